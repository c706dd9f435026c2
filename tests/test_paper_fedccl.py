"Execute papers/fedccl.ipynb at smoke scale with papermill and check every result file it promises."
import json
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "papers" / "fedccl.ipynb"
MAIN_METHODS = ["FedAvg", "FedProc", "FedPCL", "FedProto", "FPL", "FedCCL"]
COLUMNS = ["table", "block", "row", "column", "ours", "paper", "difference", "note"]


def execute(output: Path, **parameters) -> Path:
    papermill = pytest.importorskip("papermill")
    executed = output / "executed.ipynb"
    papermill.execute_notebook(str(NOTEBOOK), str(executed), parameters=parameters, kernel_name="python3",
                               cwd=str(ROOT), progress_bar=False)
    return executed


# One xdist group: under `pytest -n 2 --dist loadgroup` this module's tests share a worker, so its module fixtures run once.
pytestmark = pytest.mark.xdist_group("paper_fedccl")


@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> Path:
    results = tmp_path_factory.mktemp("fedccl_smoke")
    execute(results, scale="smoke", results_dir=str(results))
    return results


def table(results: Path, number: int) -> pd.DataFrame:
    return pd.read_csv(results / f"table_{number}.csv", keep_default_na=False, na_values=[""])


def test_every_table_has_the_paper_rows_and_columns(smoke):
    for number in range(1, 9):
        frame = table(smoke, number)
        assert list(frame.columns[:len(COLUMNS)]) == COLUMNS, (number, list(frame.columns))
        assert frame["paper"].notna().any(), f"table {number} lost the paper's numbers"
    t1 = table(smoke, 1)
    assert set(t1.row) == set(MAIN_METHODS)
    assert len(t1) == 6 * 7 + 6 * 6  # Digit-5: 5 domains + Avg + Δ; Office-10: 4 domains + Avg + Δ
    assert set(table(smoke, 5).row) == {"FedAvg", "FedCCL (local only)", "FedCCL (global only)", "FedCCL"}
    assert len(table(smoke, 7)) == 4 * 2 and len(table(smoke, 8)) == 6 * 3


def test_our_numbers_sit_next_to_the_papers(smoke):
    t1 = table(smoke, 1).set_index(["block", "row", "column"])
    fedccl = t1.loc[("digit5", "FedCCL", "Avg")]
    assert fedccl.paper == 58.55
    assert 0 <= fedccl.ours <= 100
    assert fedccl.difference == pytest.approx(fedccl.ours - fedccl.paper, abs=0.011)
    assert "STAND-IN" in fedccl.note
    # FedAvg's delta is 0 by definition, every other row's is its Avg minus FedAvg's
    assert t1.loc[("digit5", "FedAvg", "Δ")].ours == pytest.approx(0.0)
    proto = t1.loc[("digit5", "FedProto", "Δ")].ours
    assert proto == pytest.approx(t1.loc[("digit5", "FedProto", "Avg")].ours - t1.loc[("digit5", "FedAvg", "Avg")].ours, abs=0.011)
    # the real benchmarks are not run at smoke scale, and say so
    office = t1.loc["office10"]
    assert office.ours.isna().all() and office.note.str.contains("not run at smoke scale").all()
    assert table(smoke, 3).ours.isna().all()
    t4 = table(smoke, 4).set_index(["row", "column"])
    assert t4.loc[("FedCCL", "MNIST")].ours > 0 and "STAND-IN" in t4.loc[("FedCCL", "MNIST")].note
    t8 = table(smoke, 8).set_index(["row", "column"])
    for method in ("FedAvg", "FedAvg+", "FedCCL+"):
        clean, fgsm = t8.loc[(f"MNIST / {method}", "Clean")].ours, t8.loc[(f"MNIST / {method}", "FGSM")].ours
        assert 0 <= fgsm <= 100 and 0 <= clean <= 100


def test_histories_figures_and_metadata(smoke):
    history = pd.read_csv(smoke / "history_fedccl_digits5lite-balanced_seed0.csv")
    assert history["round"].tolist() == [1, 2]
    assert {"accuracy_weighted", "accuracy_domain_mean", "num_local_signals", "bytes_up"} <= set(history.columns)
    assert (smoke / "history_fedccl-plus_digits-alpha0-05_seed0.csv").exists()
    for name in ("figure_3", "figure_6"):
        assert (smoke / f"{name}.png").stat().st_size > 1000
    sweep = pd.read_csv(smoke / "figure_6.csv")
    assert set(sweep.alpha) == {0.05, 0.5} and set(sweep.method) == {"FedAvg", "FedCCL"}
    metadata = json.loads((smoke / "metadata.json").read_text())
    assert metadata["config"]["parameters"]["scale"] == "smoke" and metadata["seed"] == [0]
    assert metadata["versions"]["torch"] and len(metadata["runs"]) >= 20
    assert all((smoke / "runs" / run["folder"] / "checkpoint.pt").exists() for run in metadata["runs"])


def test_runs_side_by_side_give_the_same_tables(smoke, tmp_path):
    "parallel=2: Table 7's runs (and FedAvg's) train in two processes first; their histories and Table 7 are the fixture's, run one after another."
    torch = pytest.importorskip("torch")
    from fedlearn_nb.tools.protocols.fedccl import TABLE7, FedCCLProtocol
    threads = torch.get_num_threads()
    try:
        protocol = FedCCLProtocol(scale="smoke", methods="FedAvg,FedCCL", datasets="digits5lite", parallel=2, results_dir=str(tmp_path)).start()
        keys = [("FedAvg", "digits5lite", None, 0)] + [(label, "digits5lite", alpha, 0) for label, alpha in TABLE7.values()]
        protocol.runs.run_all([protocol.request(*key) for key in keys])
        protocol.averaging_table()
    finally: torch.set_num_threads(threads)   # start() set this process's threads as the notebook's kernel does
    assert list(protocol.runs.folders) == keys and all(protocol.runs.cpu_seconds[key] > 0 for key in keys)   # trained, in the workers
    for name in ("history_fedavg_digits5lite-balanced_seed0.csv", "history_fedccl_digits5lite-alpha0-5_seed0.csv",
                 "history_fedccl-local-avg_digits5lite-alpha0-5_seed0.csv", "history_fedccl-global-avg_digits5lite-balanced_seed0.csv"):
        ours, sequential = (pd.read_csv(folder / name).drop(columns="seconds", errors="ignore") for folder in (tmp_path, smoke))
        pd.testing.assert_frame_equal(ours, sequential)
    ours, sequential = table(tmp_path, 7), table(smoke, 7)
    assert ours.ours.notna().sum() == 4
    pd.testing.assert_frame_equal(ours, sequential)
    assert protocol.metadata()["config"]["parameters"]["parallel"] == 2


def test_the_notebook_checks_its_parameters_before_it_writes(tmp_path):
    "A bad parameter stops the notebook at its protocol cell with the valid names, and nothing is written (one kernel; the cases: below)."
    papermill = pytest.importorskip("papermill")
    with pytest.raises(papermill.PapermillExecutionError, match=r"valid: ") as error:
        execute(tmp_path, results_dir=str(tmp_path / "results"), methods="FedAvg,FedFoo")
    assert "unknown method(s) ['FedFoo']" in str(error.value) and not (tmp_path / "results").exists()


@pytest.mark.parametrize("parameters, message", [(dict(scale="huge"), "unknown scale"),
                                                 (dict(methods="FedAvg,FedFoo"), "unknown method(s) ['FedFoo']"),
                                                 (dict(datasets="digits,mnist"), "unknown dataset(s) for scale 'smoke' ['mnist']")])
def test_bad_parameters_name_the_valid_ones(tmp_path, parameters, message):
    "The notebook's parameters go to FedCCLProtocol as they are; it refuses a bad one with the valid ones, before anything is written."
    from fedlearn_nb.tools.protocols.fedccl import FedCCLProtocol
    with pytest.raises(ValueError, match=r"valid: ") as error:
        FedCCLProtocol(results_dir=str(tmp_path / "results"), **parameters)
    assert message in str(error.value) and not (tmp_path / "results").exists()


def test_a_run_with_none_of_its_data_fails_loudly(tmp_path, monkeypatch):
    "No selected dataset on disk: a clear error (so `fedlearn-repro` exits non-zero), not empty tables."
    papermill = pytest.importorskip("papermill")
    empty = tmp_path / "no_data"
    empty.mkdir()
    monkeypatch.setenv("FEDLEARN_DATA_ROOT", str(empty))
    with pytest.raises(papermill.PapermillExecutionError) as error:
        execute(tmp_path, scale="quick", datasets="mnist,cifar10", results_dir=str(tmp_path / "results"))
    assert "none of the selected datasets (mnist, cifar10) was found" in str(error.value)
    assert not list((tmp_path / "results").glob("table_*.csv"))


def test_backbone_weights_need_the_frozen_backbone_model(tmp_path):
    from fedlearn_nb.tools.protocols.fedccl import FedCCLProtocol
    weights = tmp_path / "backbone.pt"
    weights.write_bytes(b"")
    with pytest.raises(ValueError, match="backbone_weights is only used with inter_model='frozen_backbone_mlp'"):
        FedCCLProtocol(results_dir=str(tmp_path), backbone_weights=str(weights))


def test_backbone_must_be_one_we_can_build(tmp_path):
    from fedlearn_nb.tools.protocols.fedccl import FedCCLProtocol
    with pytest.raises(ValueError, match="backbone='vgg11' is not a backbone we can build"):
        FedCCLProtocol(results_dir=str(tmp_path), inter_model="frozen_backbone_mlp", backbone="vgg11")


@pytest.mark.slow  # a full smoke execution (about a CPU-minute): pytest --runslow
def test_inter_domain_runs_take_a_pretrained_backbone_from_a_file(tmp_path):
    "The weights file reaches every client's frozen backbone: the run's config names it and the final model holds it."
    torch = pytest.importorskip("torch")
    torchvision = pytest.importorskip("torchvision")
    weights = tmp_path / "resnet18.pt"
    torch.manual_seed(0)
    torch.save(torchvision.models.resnet18().state_dict(), weights)              # a full model, fc included
    results = tmp_path / "results"
    execute(tmp_path, scale="smoke", results_dir=str(results), methods="FedAvg", datasets="digits5lite", rounds=1,
            inter_model="frozen_backbone_mlp", backbone="resnet18", backbone_weights=str(weights))
    metadata = json.loads((results / "metadata.json").read_text())
    assert metadata["config"]["parameters"]["backbone"] == "resnet18"
    assert metadata["config"]["parameters"]["backbone_weights"] == str(weights.resolve())
    configs = [json.loads(p.read_text()) for p in (results / "runs").glob("*/config.json")]
    assert configs and all(c["config"]["model"] == "frozen_backbone_mlp" and
                           c["config"]["model_kwargs"] == {"backbone": "resnet18", "backbone_weights": str(weights.resolve())}
                           for c in configs)
    checkpoint = torch.load(next((results / "runs").glob("*/checkpoint.pt")), weights_only=False, map_location="cpu")
    saved = torch.load(weights, weights_only=True)
    params = checkpoint["algorithm"]["server"]["params"]
    frozen = {k[len("features.backbone."):]: v for k, v in params.items() if k.startswith("features.backbone.")}
    assert frozen and all(torch.allclose(v, saved[k], atol=1e-6) for k, v in frozen.items())  # the file's (FedAvg's mean of copies)
    assert (results / "table_1.csv").exists()
