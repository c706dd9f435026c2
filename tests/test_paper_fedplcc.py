"papers/fedplcc.ipynb executes under papermill at smoke scale and writes its tables, figures, histories and metadata."
import json
from pathlib import Path

import pandas as pd
import pytest

from fedlearn_nb.data import DatasetNotFoundError
from fedlearn_nb.tools.protocols.fedplcc import FedPLCCProtocol

papermill = pytest.importorskip("papermill")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "papers" / "fedplcc.ipynb"
TABLE_II_METHODS = ["FedAvg", "MOON", "FedProx", "FedProto", "FPL", "FCCL+", "FedPLVM", "FedPLCC"]
DIGIT5_COLUMNS = ["MNIST", "USPS", "SVHN", "Synth", "MNIST-M", "Avg.", "Δ"]


def test_parameters_cell_is_tagged():
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    tagged = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1 and 'scale: str = "smoke"' in "".join(tagged[0]["source"])
    assert all(not c.get("outputs") for c in cells if c["cell_type"] == "code"), "commit the paper notebook without outputs"


def test_the_notebook_declares_its_tables_and_builds_no_federation():
    "The notebook reads like the paper: a short cell per table, at most 250 lines of code, every run's clients from its RunConfig."
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    assert sum(len(source.splitlines()) for source in code) <= 250
    for forbidden in ("from_benchmark", "FederatedData", "load_benchmark", "global ", "DomainBenchmark"):
        assert not any(forbidden in source for source in code), forbidden
    for number in (2, 3, 4):
        assert f"table_{number} = protocol.accuracy_table({number})" in code
    assert "table_5 = protocol.ablation_table()" in code


# Every run folder of the smoke run, by the name its config gives (the digest of the config as first written).
SMOKE_FOLDERS = {"digits5lite-fcclplus-seed0-210b40e3", "digits5lite-fedavg-seed0-cee047d3", "digits5lite-fedplcc-seed0-0f143124",
                 "digits5lite-fedplcc-seed0-15421a08", "digits5lite-fedplcc-seed0-8f631f43", "digits5lite-fedplcc-seed0-d17f8249",
                 "digits5lite-fedplcc-seed0-d3e1d976", "digits5lite-fedplcc-seed0-e35884c7", "digits5lite-fedplcc-seed0-ecec3a11",
                 "digits5lite-fedplvm-seed0-a8d45843", "digits5lite-fedproto-seed0-44971d9f", "digits5lite-fedprox-seed0-28a87d08",
                 "digits5lite-fpl-seed0-ab3cd499", "digits5lite-moon-seed0-0c2645c3"}


# One xdist group: under `pytest -n 2 --dist loadgroup` this module's tests share a worker, so its module fixtures run once.
pytestmark = pytest.mark.xdist_group("paper_fedplcc")


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    results = tmp_path_factory.mktemp("fedplcc_smoke")
    papermill.execute_notebook(str(NOTEBOOK), str(results / "executed.ipynb"), parameters=dict(scale="smoke", results_dir=str(results)),
                               kernel_name="python3", cwd=str(ROOT), progress_bar=False)
    return results


def test_smoke_writes_every_result(smoke):
    for name in ["table_2.csv", "table_3.csv", "table_4.csv", "table_5.csv", "figure_3.png", "figure_4.png", "sweep_alpha.csv",
                 "method_ordering.csv", "metadata.json", "history_FedPLCC_digits5lite_seed0.csv", "history_FedAvg_digits5lite_seed0.csv",
                 "history_FCCL+_digits5lite_seed0.csv"]:
        assert (smoke / name).is_file(), name
    assert {p.name for p in (smoke / "runs").iterdir()} == SMOKE_FOLDERS   # 14 runs: 8 methods, 5 more ablation rows, 1 more sweep point


def test_smoke_table_2_rows_and_notes(smoke):
    table = pd.read_csv(smoke / "table_2.csv")
    assert list(table.columns) == ["table", "method", "column", "ours", "paper", "difference", "ours_std", "seeds", "note"]
    assert sorted(set(table.method)) == sorted(TABLE_II_METHODS)
    assert set(table.column) == set(DIGIT5_COLUMNS) and len(table) == len(TABLE_II_METHODS) * len(DIGIT5_COLUMNS)
    assert table.ours.notna().all() and (table.ours.between(-100, 100)).all()   # every method runs, FCCL+ included
    assert table.note.str.contains("stand-in: digits5lite").all()  # smoke numbers are marked as stand-in data
    assert not table.note.str.contains("not implemented").any()
    fedplcc = table.set_index(["method", "column"])
    assert fedplcc.loc[("FedPLCC", "Avg."), "paper"] == pytest.approx(80.092)
    assert fedplcc.loc[("FedPLCC", "Avg."), "difference"] == pytest.approx(fedplcc.loc[("FedPLCC", "Avg."), "ours"] - 80.092, abs=1e-3)
    assert fedplcc.loc[("FedAvg", "Δ"), "ours"] == 0


def test_smoke_other_tables(smoke):
    for number, rows in ((3, 8 * 6), (4, 8 * 8)):
        table = pd.read_csv(smoke / f"table_{number}.csv")
        assert len(table) == rows and table.ours.isna().all()
        assert table.note.str.startswith("not run at smoke scale").all()
    ablation = pd.read_csv(smoke / "table_5.csv")
    assert len(ablation) == 7 * 2 and ablation.ours.notna().all()
    first = ablation[(ablation.column == "Avg.")].iloc[0]
    assert first.method == "L_contra w/o, L_corr w/o" and "FedAvg" in first.note
    fedavg = pd.read_csv(smoke / "table_2.csv").query("method == 'FedAvg' and column == 'Avg.'").ours.item()
    assert first.ours == pytest.approx(fedavg)
    metadata = json.loads((smoke / "metadata.json").read_text())
    assert metadata["config"]["scale"] == "smoke" and metadata["seed"] == 0 and "versions" in metadata


def test_unknown_scale_is_a_clear_error(tmp_path):
    "The notebook's parameters go through FedPLCCProtocol.from_parameters, which refuses a bad one before anything is written."
    with pytest.raises(ValueError, match="scale must be one of smoke, quick, paper"):
        FedPLCCProtocol.from_parameters(scale="huge", results_dir=str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_smoke_uses_one_seed_and_marks_it(smoke):
    "smoke's default seeds are '0'; every table says how many seeds its numbers average; the sweep says which seed."
    for number in (2, 5):
        assert set(pd.read_csv(smoke / f"table_{number}.csv").seeds) == {1}
    assert set(pd.read_csv(smoke / "sweep_alpha.csv").seed) == {0}
    metadata = json.loads((smoke / "metadata.json").read_text())
    assert metadata["config"]["headline_seeds"] == [0] and metadata["config"]["sweep_seeds"] == [0]
    assert metadata["config"]["cpu_minutes"] > 0 and metadata["config"]["torch_threads"] == 1


def test_a_run_with_none_of_its_data_fails_loudly(tmp_path, monkeypatch):
    "No selected benchmark on disk: a clear error (so `fedlearn-repro` exits non-zero), not empty tables."
    empty = tmp_path / "no_data"
    empty.mkdir()
    monkeypatch.setenv("FEDLEARN_DATA_ROOT", str(empty))
    protocol = FedPLCCProtocol.from_parameters(scale="quick", datasets="digit5,office10", results_dir=str(tmp_path / "results"), device="cpu")
    with pytest.raises(DatasetNotFoundError) as error:
        protocol.load_federations()   # the notebook's data cell, before any run or table
    assert "none of the selected datasets (digit5, office10) was found" in str(error.value)
    assert "skipped (data not available): MNIST" in str(error.value)
    assert not list((tmp_path / "results").glob("table_*.csv"))
