"""The FedCRL paper notebook runs end to end under papermill at smoke scale (once, shared by the tests that read its
outputs) and writes its tables, Figures 3 and 4 and histories; its parameters are checked before anything runs."""
import ast
import json
from pathlib import Path

import pandas as pd
import pytest
import torch

from fedlearn_nb.tools.protocols import fedcrl

pytestmark = pytest.mark.xdist_group("paper_fedcrl")   # one worker: the smoke run below happens once

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "papers" / "fedcrl.ipynb"
METHODS = ["Local", "FedAvg", "FedProx", "pFedMe", "Ditto", "PerFedAvg", "FedRep", "LG-FedAvg", "FedPer", "MOON",
           "FedAMP", "FedALA", "FedProto", "FedPAC", "FedGH", "FedCRL"]
COLUMNS = ["table", "column", "data", "method", "metric", "ours", "ours_std", "seeds", "paper", "difference", "note"]


@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> Path:
    "The results folder of one papermill run of the notebook at smoke scale."
    papermill = pytest.importorskip("papermill")
    folder = tmp_path_factory.mktemp("fedcrl-smoke")
    papermill.execute_notebook(str(NOTEBOOK), str(folder / "out.ipynb"), parameters=dict(scale="smoke", results_dir=str(folder)),
                               kernel_name="python3", cwd=str(NOTEBOOK.parent), progress_bar=False)
    return folder


def test_smoke_writes_every_file(smoke):
    for name in ("table_2.csv", "table_3.csv", "ranking.csv", "figure_3.png", "figure_4.png", "representations.csv", "metadata.json"):
        assert (smoke / name).exists(), name
    metadata = json.loads((smoke / "metadata.json").read_text())["config"]
    assert [c for c, s in metadata["columns"].items() if s == "ran"] == ["prac-cifar10", "path-cifar10", "beta1"]
    assert set(metadata["cpu_seconds_per_column"]) == {"prac-cifar10", "path-cifar10", "beta1"}


def test_smoke_figure_4_representations(smoke):
    "Figure 4: the representations of every sample of every client of the practical column, from the runs' final models."
    representations = pd.read_csv(smoke / "representations.csv")
    assert representations.method.tolist() == ["FedAvg", "Local", "FedRep", "FedCRL"]
    assert (representations.points == representations.points.iloc[0]).all() and representations.points.iloc[0] == 200  # digits: 20 per class
    assert (representations.clients == 5).all() and (representations.classes == 10).all()
    assert representations.silhouette_by_class.between(-1, 1).all() and representations.silhouette_by_client.between(-1, 1).all()
    # FedAvg evaluates one global model on every client: its representations cannot separate the clients better than Local's own models
    by_client = representations.set_index("method").silhouette_by_client
    assert by_client["FedAvg"] < by_client["Local"]


def test_smoke_paired_gaps(smoke):
    "Every method against FedCRL on the practical column, seed by seed: FedCRL's own gap is zero, and each gap is the table's difference."
    gaps = pd.read_csv(smoke / "paired_prac-cifar10.csv").set_index("method")
    assert sorted(gaps.index) == sorted(METHODS) and (gaps.seeds == 1).all()
    assert gaps.loc["FedCRL", "mean_gap"] == 0 and gaps.loc["FedCRL", "seeds_ahead"] == 0
    acc = pd.read_csv(smoke / "table_2.csv").query("column == 'prac-cifar10' and metric == 'Acc'").set_index("method").ours
    assert ((gaps.mean_gap - (acc - acc["FedCRL"]).reindex(gaps.index)).abs() < 0.01).all()   # one seed: the gap is the difference of the means


@pytest.mark.parametrize("name", ["table_2.csv", "table_3.csv"])
def test_smoke_tables(smoke, name):
    table = pd.read_csv(smoke / name)
    assert list(table.columns) == COLUMNS
    assert len(table) == 16 * 6 * 2 and sorted(set(table.method)) == sorted(METHODS)
    ran = table[table.ours.notna()]
    assert len(ran) > 0 and ran.note.str.contains("STAND-IN").all()  # smoke numbers are labelled as stand-in data
    assert (ran.ours.between(0, 100)).all()
    assert not table.note.str.startswith("not implemented yet").any()  # all 16 methods of Tables II and III run
    assert (table.difference.dropna() == (table.ours - table.paper).dropna().round(2)).all()
    assert (ran.seeds == 1).all() and ran.ours_std.isna().all()   # smoke runs one seed: no spread over seeds
    assert (table[table.ours.isna()].note == "not run at smoke scale").all()


def test_smoke_headline_entry_and_histories(smoke):
    table = pd.read_csv(smoke / "table_2.csv")
    entry = table[(table.method == "FedCRL") & (table.column == "prac-cifar10") & (table.metric == "Acc")]
    assert entry.paper.item() == 91.28 and entry.ours.notna().item()
    histories = sorted(p.name for p in smoke.glob("history_*_seed0.csv"))
    assert "history_fedcrl_digits-prac_seed0.csv" in histories and len(histories) == 16 * 3
    frame = pd.read_csv(smoke / "history_fedcrl_digits-prac_seed0.csv")
    assert frame["round"].tolist() == [1, 2] and {"accuracy_mean", "accuracy_std", "tau_mean"} <= set(frame.columns)
    assert frame.train_loss.notna().all()   # Figure 3's loss curves come from every round's training loss
    assert entry.ours.item() == round(100 * frame.accuracy_mean.iloc[-1], 2)   # the table's number is the final round's
    # one run folder per (algorithm, column, seed), named as before
    assert sorted(p.name for p in (smoke / "runs").iterdir()) == sorted(f"{fedcrl.METHODS[m][0]}_{c}_seed0" for m in METHODS
                                                                         for c in ("prac-cifar10", "path-cifar10", "beta1"))


def notebook_code() -> list[str]:
    return ["".join(c["source"]) for c in json.loads(NOTEBOOK.read_text())["cells"] if c["cell_type"] == "code"]


def test_notebook_checks_every_parameter_through_the_protocol():
    "The cell after the parameters hands every parameter, by name, to Protocol.from_parameters (where they are checked)."
    parameters, first = notebook_code()[:2]
    names = [node.target.id for node in ast.parse(parameters).body]
    call = next(node for node in ast.walk(ast.parse(first)) if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "from_parameters")
    assert {(k.arg, k.value.id) for k in call.keywords} == {(n, n) for n in names}
    assert sum(len(code.splitlines()) for code in notebook_code()) <= 250


@pytest.mark.parametrize("bad,message", [(dict(scale="huge"), "unknown scale"), (dict(methods="FedCRL,FedFoo"), "unknown method"),
                                         (dict(columns="prac-cifar10,prac-mnist"), "unknown column"), (dict(seeds="0,a"), "seeds must be"),
                                         (dict(device="cuda:7"), "device 'cuda:7'")])
def test_bad_parameters_fail_before_anything_is_written(tmp_path, bad, message):
    if bad.get("device") and torch.cuda.device_count() > 7: pytest.skip("this machine has a cuda:7")
    with pytest.raises((ValueError, RuntimeError), match=message):
        fedcrl.Protocol.from_parameters(**bad, results_dir=str(tmp_path / "results"))
    assert not (tmp_path / "results").exists()


def test_fails_when_no_data_is_present(tmp_path, monkeypatch):
    "quick with none of its data sets present stops with a clear error instead of writing empty tables."
    (tmp_path / "no_data").mkdir()
    monkeypatch.setenv("FEDLEARN_DATA_ROOT", str(tmp_path / "no_data"))   # an empty data folder
    threads = torch.get_num_threads()
    try:
        protocol = fedcrl.Protocol.from_parameters(scale="quick", results_dir=str(tmp_path))
        with pytest.raises(RuntimeError, match="None of the selected data is present"): protocol.check()
        with pytest.raises(RuntimeError, match="None of the selected data is present"): protocol.run()
    finally:
        torch.set_num_threads(threads)
    assert not (tmp_path / "table_2.csv").exists() and not (tmp_path / "runs").exists()
    assert protocol.status()["prac-emnist"].startswith("skipped (data not available): emnist not in the data folder")


def test_runs_side_by_side_give_the_same_histories(smoke, tmp_path):
    """parallel=2: a column's runs train in two processes first, then each is read back from its folder: the same histories
    as the notebook's, run one after another, and Figure 4's kept representations come from the read-back models."""
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    try:
        protocol = fedcrl.Protocol.from_parameters(scale="smoke", methods="FedAvg,Ditto,FedCRL", columns="prac-cifar10", results_dir=str(tmp_path),
                                                   device="cpu", parallel=2)
        study = protocol.run()
    finally: torch.set_num_threads(threads)   # the protocol set this process's threads as the notebook's kernel does
    assert protocol.parallel == 2 and study.status["prac-cifar10"] is None and study.cpu_seconds["prac-cifar10"] > 0
    histories = sorted(p.name for p in tmp_path.glob("history_*.csv"))
    assert histories == ["history_ditto_digits-prac_seed0.csv", "history_fedavg_digits-prac_seed0.csv", "history_fedcrl_digits-prac_seed0.csv"]
    for name in histories: pd.testing.assert_frame_equal(pd.read_csv(tmp_path / name), pd.read_csv(smoke / name))
    assert set(study.representations) >= {"FedCRL"} and len(study.representations["FedCRL"]["labels"]) > 0
    with pytest.raises(ValueError, match="parallel"): fedcrl.Protocol.from_parameters(scale="smoke", results_dir=str(tmp_path / "x"), parallel=0)
    assert not (tmp_path / "x").exists()   # refused before anything is written
