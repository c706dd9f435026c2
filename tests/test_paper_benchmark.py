"papers/benchmark.ipynb (our comparison of the papers' methods, no paper) runs through `fedlearn-repro` at smoke scale and writes its tables, figures and metadata."
import json
from pathlib import Path

import nbformat
import pandas as pd
import pytest

pytest.importorskip("papermill")
from fedlearn_nb.tools.papers import config_digest
from fedlearn_nb.tools.protocols.benchmark import METHODS, Benchmark
from fedlearn_nb.tools.runner import PAPERS, main, paper_specs, read_tables, reproduction_status

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "papers" / "benchmark.ipynb"
GLOBAL = ["FedAvg", "FedProx", "MOON", "FedProto", "FPL", "FedPLVM", "FedPLCC", "FedCCL"]
PERSONAL = ["FedAvg", "FedCRL", "FedRep", "Ditto", "IFCA", "CP-CFL"]   # FedAvg: the reference row
COLUMNS = {"Digit-5", "Office-10", "CIFAR-10 Dir(0.1)", "CIFAR-10 Dir(0.5)"}


def test_parameters_cell_and_no_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1 and 'scale: str = "smoke"' in tagged[0].source
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "commit the notebook without outputs"


def test_registered_as_a_benchmark_not_a_paper():
    assert PAPERS["benchmark"].kind == "benchmark" and not PAPERS["benchmark"].is_paper
    assert "benchmark" not in {s.key for s in paper_specs()}
    assert "benchmark" not in set(reproduction_status(ROOT / "papers" / "results").paper)


# One xdist group: under `pytest -n 2 --dist loadgroup` this module's tests share a worker, so its module fixtures run once.
pytestmark = pytest.mark.xdist_group("paper_benchmark")


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    results = tmp_path_factory.mktemp("benchmark_smoke")
    status = main(["run", "benchmark", "--scale", "smoke", "--results-dir", str(results), "--no-progress", "--threads", "1"])
    folders = list((results / "papers" / "benchmark" / "smoke").iterdir())
    assert status == 0 and len(folders) == 1, f"see {folders}"
    return folders[0]


def test_smoke_writes_every_result(smoke):
    for name in ["table_1.csv", "table_2.csv", "table_1_wide.csv", "table_2_wide.csv", "figure_0.png", "figure_1.png", "figure_2.png",
                 "figure_3.png", "bytes_per_round.csv", "metadata.json", "history_FedAvg_digits5lite_seed0.csv",
                 "history_CP-CFL_digits-a0.1_seed0.csv", "benchmark.ipynb", "runner.json"]:
        assert (smoke / name).is_file(), name


@pytest.mark.parametrize("number,methods", [(1, GLOBAL), (2, PERSONAL)])
def test_smoke_tables_have_every_method_and_column(smoke, number, methods):
    table = pd.read_csv(smoke / f"table_{number}.csv")
    assert list(table.method.drop_duplicates()) == methods and set(table.column) == COLUMNS
    assert len(table) == len(methods) * len(COLUMNS)
    ran = table[table.column != "Office-10"]
    assert ran.ours.notna().all() and ran.ours.between(0, 100).all()                 # accuracies in %
    assert ran.note.str.contains("stand-in").all()                                    # smoke numbers are labelled stand-in
    office = table[table.column == "Office-10"]
    assert office.ours.isna().all() and office.note.str.contains("not run at smoke scale").all()
    competing = ran[~ran.note.str.startswith("reference")]
    for column, group in competing.groupby("column"):         # the best of a column is marked where it beats chance by > 2 std, only there
        leader = group.loc[group.ours.idxmax()]
        signal = leader.ours - leader.chance > 2 * (0 if pd.isna(leader.ours_std) else leader.ours_std)
        assert group.signal.eq(signal).all() and group.best.any() == signal, column
        if signal: assert group.loc[group.best, "ours"].min() >= group.ours.max() - 0.005, column
    wide = pd.read_csv(smoke / f"table_{number}_wide.csv", keep_default_na=False).set_index("method")
    chance_row = {1: "chance: best single answer", 2: "chance: each client's commonest class"}[number]
    assert list(wide.index) == methods + [chance_row, "ranking"]
    marks = {c: wide.loc["ranking", c] for c in COLUMNS}
    assert marks["Office-10"] == "" and {v for c, v in marks.items() if c != "Office-10"} <= {"★ beats chance by > 2 std", "no signal at this budget"}
    stars = wide.drop(index=[chance_row, "ranking"]).apply(lambda c: c.str.contains("★")).sum()
    assert all((stars[c] > 0) == (marks[c] == "★ beats chance by > 2 std") for c in COLUMNS)


def test_smoke_histories_count_bytes_and_metadata(smoke):
    history = pd.read_csv(smoke / "history_IFCA_digits-a0.5_seed0.csv")
    fedavg = pd.read_csv(smoke / "history_FedAvg_digits-a0.5_seed0.csv")
    assert (history.bytes_down > 0).all() and (history.bytes_up > 0).all()
    assert history.bytes_down.iloc[0] > fedavg.bytes_down.iloc[0]       # IFCA sends its pool of models down
    metadata = json.loads((smoke / "metadata.json").read_text())
    assert metadata["config"]["scale"] == "smoke" and metadata["config"]["seeds"] == [0] and metadata["config"]["torch_threads"] == 1
    assert set(metadata["config"]["stand_in"]) == {"digits5lite", "digits-a0.1", "digits-a0.5"}
    assert set(read_tables(smoke)) >= {"1", "2"}


def test_unknown_method_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match=r"unknown methods \['FedNope'\]; valid: FedAvg"):
        Benchmark.from_parameters("smoke", methods="FedAvg,FedNope", results_dir=str(tmp_path))


def test_the_notebook_declares_and_shows_its_tables_only():
    "At most 250 lines of code, no federation built by hand and no state that functions change: the protocol module holds the rest."
    code = [c.source for c in nbformat.read(NOTEBOOK, as_version=4).cells if c.cell_type == "code"]
    assert sum(len(source.splitlines()) for source in code) <= 250
    for forbidden in ("FederatedData(", "Client(", "from_partition", "global ", "def "):
        assert not any(forbidden in source for source in code), forbidden
    assert any("runs.show_table(1)" in source for source in code) and any("runs.show_table(2)" in source for source in code)


# The run folders' names before the protocol moved out of the notebook (its code then, CP-CFL aside: its name holds its
# encoder's path): the digest of every name of a scale, and a few of them in full. The smoke scale's were renamed on purpose
# when its budget was cut (1 local step, 5 images per class and domain).
NAMES = {"smoke": (36, "6f29dd58", {("FedAvg", "digits5lite", 0): "digits5lite-fedavg-seed0-341285bb"}),
         "quick": (144, "fba1adf3", {("FedAvg", "digit5", 0): "digit5-fedavg-seed0-52ff4af4", ("FedPLCC", "office10", 1): "office10-fedplcc-seed1-511f6bc6",
                                     ("IFCA", "cifar10-a0.1", 2): "cifar10-a0.1-ifca-seed2-92f7f743"}),
         "paper": (144, "d202e086", {("FedAvg", "digit5", 0): "digit5-fedavg-seed0-46196139", ("FedPLCC", "office10", 1): "office10-fedplcc-seed1-99011ac6",
                                     ("IFCA", "cifar10-a0.1", 2): "cifar10-a0.1-ifca-seed2-3d671b0d"})}


@pytest.mark.parametrize("scale", sorted(NAMES))
def test_every_run_keeps_its_folder_name(scale, tmp_path):
    bench = Benchmark.from_parameters(scale, results_dir=str(tmp_path), device="cpu")
    names = {(label, key, seed): bench.run_config(label, key, seed).name for key in bench.datasets if bench.settings["federations"][key]
             for label in METHODS if label != "CP-CFL" for seed in bench.seeds_of[key]}
    count, digest, some = NAMES[scale]
    assert {k: names[k] for k in some} == some and (len(names), config_digest(sorted(names.values()))) == (count, digest)


def test_the_smoke_runs_are_in_the_folders_the_protocol_names(smoke):
    "Every run folder of the smoke run, CP-CFL's too, is the one its config names (with the encoders that run pre-trained)."
    bench = Benchmark.from_parameters("smoke", results_dir=str(smoke), device="cpu")
    encoders = json.loads((smoke / "metadata.json").read_text())["config"]["encoders"]
    named = {bench.run_config(label, key, 0, encoders.get(key)).name for key in bench.datasets if bench.settings["federations"][key] for label in METHODS}
    assert {p.name for p in (smoke / "runs").iterdir()} == named
