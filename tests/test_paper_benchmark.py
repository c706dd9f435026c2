"papers/benchmark.ipynb (our comparison of the papers' methods, no paper) runs through `fedlearn-repro` at smoke scale and writes its tables, figures and metadata."
import json
from pathlib import Path

import nbformat
import pandas as pd
import pytest

pytest.importorskip("papermill")
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
    for column, group in competing.groupby("column"):                                 # the best of each column is marked
        assert group.best.any() and group.loc[group.best, "ours"].min() >= group.ours.max() - 0.005, column
    wide = pd.read_csv(smoke / f"table_{number}_wide.csv").set_index("method")
    assert list(wide.index) == methods and wide.astype(str).apply(lambda c: c.str.contains("★")).to_numpy().sum() >= 3


def test_smoke_histories_count_bytes_and_metadata(smoke):
    history = pd.read_csv(smoke / "history_IFCA_digits-a0.5_seed0.csv")
    fedavg = pd.read_csv(smoke / "history_FedAvg_digits-a0.5_seed0.csv")
    assert (history.bytes_down > 0).all() and (history.bytes_up > 0).all()
    assert history.bytes_down.iloc[0] > fedavg.bytes_down.iloc[0]       # IFCA sends its pool of models down
    metadata = json.loads((smoke / "metadata.json").read_text())
    assert metadata["config"]["scale"] == "smoke" and metadata["config"]["seeds"] == [0] and metadata["config"]["torch_threads"] == 1
    assert set(metadata["config"]["stand_in"]) == {"digits5lite", "digits-a0.1", "digits-a0.5"}
    assert set(read_tables(smoke)) >= {"1", "2"}


def test_unknown_method_is_a_clear_error(tmp_path, capsys):
    status = main(["run", "benchmark", "--scale", "smoke", "-p", "methods", "FedAvg,FedNope", "--results-dir", str(tmp_path),
                   "--no-progress", "--threads", "1"])
    assert status == 1
    record = json.loads(next((tmp_path / "papers" / "benchmark" / "smoke").iterdir()).joinpath("runner.json").read_text())
    assert "unknown methods ['FedNope']" in record["error"] and "valid: FedAvg" in record["error"]
