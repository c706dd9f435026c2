"papers/fedplcc.ipynb executes under papermill at smoke scale and writes its tables, figures, histories and metadata."
import json
from pathlib import Path

import pandas as pd
import pytest

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
    assert (smoke / "runs").is_dir()


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
    with pytest.raises(papermill.PapermillExecutionError, match="scale must be one of smoke, quick, paper"):
        papermill.execute_notebook(str(NOTEBOOK), str(tmp_path / "out.ipynb"), parameters=dict(scale="huge", results_dir=str(tmp_path)),
                                   kernel_name="python3", cwd=str(ROOT), progress_bar=False)


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
    with pytest.raises(papermill.PapermillExecutionError) as error:
        papermill.execute_notebook(str(NOTEBOOK), str(tmp_path / "out.ipynb"),
                                   parameters=dict(scale="quick", datasets="digit5,office10", results_dir=str(tmp_path / "results")),
                                   kernel_name="python3", cwd=str(ROOT), progress_bar=False)
    assert "none of the selected datasets (digit5, office10) was found" in str(error.value)
    assert not list((tmp_path / "results").glob("table_*.csv"))
