"The FedCRL paper notebook runs end to end under papermill at smoke scale and writes its tables, Figures 3 and 4 and histories."
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "papers" / "fedcrl.ipynb"
METHODS = ["Local", "FedAvg", "FedProx", "pFedMe", "Ditto", "PerFedAvg", "FedRep", "LG-FedAvg", "FedPer", "MOON",
           "FedAMP", "FedALA", "FedProto", "FedPAC", "FedGH", "FedCRL"]


def test_fedcrl_notebook_smoke(tmp_path):
    papermill = pytest.importorskip("papermill")
    papermill.execute_notebook(str(NOTEBOOK), str(tmp_path / "out.ipynb"), parameters=dict(scale="smoke", results_dir=str(tmp_path)),
                               kernel_name="python3", cwd=str(NOTEBOOK.parent), progress_bar=False)
    for name in ("table_2.csv", "table_3.csv", "ranking.csv", "figure_3.png", "figure_4.png", "representations.csv", "metadata.json"):
        assert (tmp_path / name).exists(), name
    # Figure 4: the representations of every sample of every client of the practical column, from the runs' final models
    representations = pd.read_csv(tmp_path / "representations.csv")
    assert representations.method.tolist() == ["FedAvg", "Local", "FedRep", "FedCRL"]
    assert (representations.points == representations.points.iloc[0]).all() and representations.points.iloc[0] == 400  # digits: 40 per class
    assert (representations.clients == 5).all() and (representations.classes == 10).all()
    assert representations.silhouette_by_class.between(-1, 1).all() and representations.silhouette_by_client.between(-1, 1).all()
    # FedAvg evaluates one global model on every client: its representations cannot separate the clients better than Local's own models
    by_client = representations.set_index("method").silhouette_by_client
    assert by_client["FedAvg"] < by_client["Local"]
    columns = ["table", "column", "data", "method", "metric", "ours", "ours_std", "seeds", "paper", "difference", "note"]
    for name in ("table_2.csv", "table_3.csv"):
        table = pd.read_csv(tmp_path / name)
        assert list(table.columns) == columns
        assert len(table) == 16 * 6 * 2 and sorted(set(table.method)) == sorted(METHODS)
        ran = table[table.ours.notna()]
        assert len(ran) > 0 and ran.note.str.contains("STAND-IN").all()  # smoke numbers are labelled as stand-in data
        assert (ran.ours.between(0, 100)).all()
        assert not table.note.str.startswith("not implemented yet").any()  # all 16 methods of Tables II and III run
        assert (table.difference.dropna() == (table.ours - table.paper).dropna().round(2)).all()
        assert (ran.seeds == 1).all() and ran.ours_std.isna().all()   # smoke runs one seed: no spread over seeds
    table = pd.read_csv(tmp_path / "table_2.csv")
    fedcrl = table[(table.method == "FedCRL") & (table.column == "prac-cifar10") & (table.metric == "Acc")]
    assert fedcrl.paper.item() == 91.28 and fedcrl.ours.notna().item()
    histories = sorted(p.name for p in tmp_path.glob("history_*_seed0.csv"))
    assert "history_fedcrl_digits-prac_seed0.csv" in histories and len(histories) == 16 * 3
    frame = pd.read_csv(tmp_path / "history_fedcrl_digits-prac_seed0.csv")
    assert frame["round"].tolist() == [1, 2] and {"accuracy_mean", "accuracy_std", "tau_mean"} <= set(frame.columns)
    assert frame.train_loss.notna().all()   # Figure 3's loss curves come from every round's training loss


def test_fedcrl_notebook_rejects_bad_names(tmp_path):
    papermill = pytest.importorskip("papermill")
    with pytest.raises(papermill.PapermillExecutionError, match="unknown scale"):
        papermill.execute_notebook(str(NOTEBOOK), str(tmp_path / "out.ipynb"), parameters=dict(scale="huge", results_dir=str(tmp_path)),
                                   kernel_name="python3", cwd=str(NOTEBOOK.parent), progress_bar=False)
    with pytest.raises(papermill.PapermillExecutionError, match="unknown method"):
        papermill.execute_notebook(str(NOTEBOOK), str(tmp_path / "out2.ipynb"), parameters=dict(methods="FedCRL,FedFoo", results_dir=str(tmp_path)),
                                   kernel_name="python3", cwd=str(NOTEBOOK.parent), progress_bar=False)
    with pytest.raises(papermill.PapermillExecutionError, match="unknown column"):
        papermill.execute_notebook(str(NOTEBOOK), str(tmp_path / "out3.ipynb"), parameters=dict(columns="prac-cifar10,prac-mnist", results_dir=str(tmp_path)),
                                   kernel_name="python3", cwd=str(NOTEBOOK.parent), progress_bar=False)


def test_fedcrl_notebook_fails_when_no_data_is_present(tmp_path, monkeypatch):
    "quick with none of its data sets present stops with a clear error instead of writing empty tables."
    papermill = pytest.importorskip("papermill")
    (tmp_path / "no_data").mkdir()
    monkeypatch.setenv("FEDLEARN_DATA_ROOT", str(tmp_path / "no_data"))   # the kernel inherits it: an empty data folder
    with pytest.raises(papermill.PapermillExecutionError, match="None of the selected data is present"):
        papermill.execute_notebook(str(NOTEBOOK), str(tmp_path / "out.ipynb"), parameters=dict(scale="quick", results_dir=str(tmp_path)),
                                   kernel_name="python3", cwd=str(NOTEBOOK.parent), progress_bar=False)
    assert not (tmp_path / "table_2.csv").exists()
