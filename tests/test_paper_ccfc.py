"Execute papers/ccfc.ipynb at smoke scale with papermill (once) and check every result file it promises; its protocol module directly."
import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from fedlearn_nb.tools.protocols import ccfc

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "papers" / "ccfc.ipynb"
METHODS = ["KM", "FCM", "k-FED", "FFCM", "SDA-FC-KM", "SDA-FC-FCM", "PPFC-GAN", "CCFC"]
P_VALUES = [0.0, 0.25, 0.5, 0.75, 1.0]


# One xdist group: under `pytest -n 2 --dist loadgroup` this module's tests share a worker, so its module fixtures run once.
pytestmark = pytest.mark.xdist_group("paper_ccfc")


@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> Path:
    papermill = pytest.importorskip("papermill")
    results = tmp_path_factory.mktemp("ccfc_smoke")
    papermill.execute_notebook(str(NOTEBOOK), str(results / "executed.ipynb"), parameters=dict(scale="smoke", results_dir=str(results)),
                               kernel_name="python3", language="python", cwd=str(ROOT), progress_bar=False)
    return results


def read(results: Path, name: str) -> pd.DataFrame:
    return pd.read_csv(results / name, keep_default_na=False, na_values=[""])


def test_tables_1_and_2_have_every_method_and_p(smoke):
    for number, metric_max in ((1, 1.0), (2, 1.0)):
        table = read(smoke, f"table_{number}.csv")
        assert list(table.columns) == ["dataset", "p", "method", "ours", "ours_std", "seeds", "paper", "difference", "note"]
        assert set(table.method) == set(METHODS) and sorted(set(table.p)) == P_VALUES
        assert len(table) == 2 + 6 * 5           # KM and FCM only at p = 0, as in the paper
        ours = table.set_index(["p", "method"])
        for method in ("k-FED", "FFCM", "SDA-FC-KM", "SDA-FC-FCM", "PPFC-GAN", "CCFC"):  # built and run at every p
            assert ours.loc[[(p, method) for p in P_VALUES], "ours"].between(-1, metric_max).all(), method
        for method in ("SDA-FC-KM", "SDA-FC-FCM", "PPFC-GAN"):          # our numbers beside the paper's, labelled as stand-in
            rows = ours.xs(method, level="method")
            assert rows.ours.notna().all() and rows.paper.notna().all() and (rows.seeds == 1).all()
        assert table.note.str.contains("stand-in").all()
        ccfc = ours.loc[(0.0, "CCFC")]
        assert ccfc.paper == (0.9236 if number == 1 else 0.9619)
        assert ccfc.difference == pytest.approx(ccfc.ours - ccfc.paper)


def test_table_3_knn_and_table_4_per_client_kappa(smoke):
    t3 = read(smoke, "table_3.csv")
    assert set(t3.space) == {"Raw pixels", "PPFC-GAN", "SCFC", "CCFC"} and len(t3) == 4 * 7
    for space in ("Raw pixels", "PPFC-GAN", "SCFC", "CCFC"):
        assert t3[(t3.space == space) & (t3.k == 3)].ours.between(10, 100).all(), space
    big = t3[t3.k == 7000]                                                   # more neighbours than the digits' train split
    assert big.ours.isna().all() and big.note.str.startswith("skipped").all() and t3.paper.notna().all()
    t4 = read(smoke, "table_4.csv")
    assert list(t4.columns) == ["client", "column", "ours", "paper", "difference", "note"]
    assert set(t4.column) == {"IR", "Standalone SCFC", "Standalone CCFC", "FedAvg SCFC", "FedAvg CCFC", "FedAvg+MC SCFC", "FedAvg+MC CCFC"}
    assert sorted(set(t4.client)) == list(range(1, 11)) and t4.ours.notna().all()
    assert (t4[t4.column == "IR"].ours >= 1).all()


def test_figures_histories_scores_and_metadata(smoke):
    for number in (3, 4, 5, 6, 7): assert (smoke / f"figure_{number}.png").stat().st_size > 1000
    figure_3 = read(smoke, "figure_3.csv")                                   # one client's data in four spaces
    assert list(figure_3.panel) == ["(a) raw pixels", "(b) standalone local model", "(c) FedAvg global model", "(d) FedAvg local model"]
    assert figure_3.kmeans_nmi.between(0, 1).all() and figure_3.client.nunique() == 1 and figure_3.note.str.contains("stand-in").all()
    figure_6, figure_7 = read(smoke, "figure_6.csv"), read(smoke, "figure_7.csv")
    assert set(figure_6.method) == {"k-FED", "FFCM", "CCFC"} and set(figure_6.disconnection_rate) == {0.0, 0.3}
    assert set(figure_7["lambda"]) == {0.001, 1.0}
    assert len(read(smoke, "figure_5.csv")) == 3
    for method in ("CCFC", "k-FED", "FFCM", "SDA-FC-KM", "SDA-FC-FCM", "PPFC-GAN"):
        for p in ("0", "0.25", "0.5", "0.75", "1"):
            history = read(smoke, f"history_{method}_digits-p{p}_seed0.csv")
            assert {"round", "nmi", "kappa", "acc", "ari", "bytes_up"} <= set(history.columns)
    scores = read(smoke, "scores.csv")
    assert {"method", "dataset", "p", "seed", "nmi", "kappa", "acc", "ari"} <= set(scores.columns)
    metadata = json.loads((smoke / "metadata.json").read_text())
    assert metadata["config"]["scale"] == "smoke" and metadata["stand_in"] is True and metadata["versions"]["torch"]
    cpu = metadata["cpu_seconds"]
    assert {"tables_1_2", "table_3", "table_4", "figure_3", "figure_5", "figure_6", "figure_7", "total"} <= set(cpu)
    synthetic = read(smoke, "history_SDA-FC-KM_digits-p0_seed0.csv")       # one shot: the synthetic images go up in round 1
    assert len(synthetic) == 1 and synthetic.bytes_up.iloc[0] > 0
    assert 0 < cpu["tables_1_2"] < cpu["total"]
    assert (smoke / "figure_nmi_per_round.png").stat().st_size > 1000


def test_orderings_compare_the_methods_we_ran_with_the_papers(smoke):
    orderings = read(smoke, "orderings.csv")
    assert list(orderings.columns) == ["metric", "dataset", "p", "ours", "paper", "same_best", "same_order"]
    assert len(orderings) == 2 * 5                                    # NMI and Kappa, every p
    first = orderings[(orderings.metric == "NMI") & (orderings.p == 0.0)].iloc[0]
    assert set(first.ours.replace(" = ", " > ").split(" > ")) == set(METHODS)
    assert first.paper == "CCFC > PPFC-GAN > KM > FCM > FFCM > SDA-FC-FCM > SDA-FC-KM > k-FED"   # Table 1, MNIST, p = 0
    assert orderings.same_best.dtype == bool


def test_no_dataset_found_fails_loudly(tmp_path, monkeypatch):
    "With none of the selected datasets on disk the protocol raises (so the notebook and the runner fail) before writing any table."
    monkeypatch.setenv("FEDLEARN_DATA_ROOT", str(tmp_path / "empty"))
    monkeypatch.setenv("FEDLEARN_DOWNLOAD", "false")
    protocol = ccfc.Protocol.from_parameters(scale="quick", datasets="cifar10", results_dir=str(tmp_path / "results"), device="cpu")
    with pytest.raises(RuntimeError, match="none of the selected datasets"): ccfc.Reproduction(protocol)
    assert not (tmp_path / "results" / "table_1.csv").exists()


def test_a_second_run_resumes_from_the_checkpoints(smoke, tmp_path):
    """Tables 1-2 again, on a copy of the smoke run's folder: every finished run is read back from its checkpoint (none is trained
    again, no checkpoint is rewritten), with the same scores and the same history files."""
    shutil.copytree(smoke / "runs", tmp_path / "runs")
    checkpoints = {path: path.stat().st_mtime_ns for path in (tmp_path / "runs").rglob("checkpoint.pt")}
    study = ccfc.Reproduction(ccfc.Protocol.from_parameters(scale="smoke", sections="tables_1_2", results_dir=str(tmp_path), device="cpu"))
    study.tables_1_2()
    assert len(checkpoints) > 30 and {path: path.stat().st_mtime_ns for path in checkpoints} == checkpoints
    before, after = read(smoke, "scores.csv"), read(tmp_path, "scores.csv")
    pd.testing.assert_frame_equal(before.iloc[:len(after)], after)                  # Tables 1-2's runs come first
    for history in tmp_path.glob("history_*.csv"): assert history.read_bytes() == (smoke / history.name).read_bytes(), history.name
    for name in ("table_1.csv", "table_2.csv"): assert (tmp_path / name).read_bytes() == (smoke / name).read_bytes(), name


def test_bad_parameters_name_the_valid_ones(tmp_path):
    "Each invalid parameter is refused by name, with the valid values, before anything is loaded, written or run."
    for parameters, message in ((dict(scale="huge"), "valid: smoke, quick, paper"), (dict(methods="CCFC,DEC"), "unknown method(s) ['DEC']"),
                                (dict(sections="table_9"), "unknown section(s) ['table_9']"), (dict(rounds=0), "rounds must be an integer >= 1"),
                                (dict(datasets="mnist"), "unknown dataset(s) for scale 'smoke' ['mnist']")):
        with pytest.raises(ValueError, match=re.escape(message)):
            ccfc.Protocol.from_parameters(**parameters, results_dir=str(tmp_path / "results"))
    assert not (tmp_path / "results").exists()


def test_the_notebook_checks_its_parameters_first(tmp_path):
    "The notebook stops at its first cell after the parameters, with the protocol's error, and writes nothing."
    papermill = pytest.importorskip("papermill")
    with pytest.raises(papermill.PapermillExecutionError, match=re.escape("unknown method(s) ['DEC']")):
        papermill.execute_notebook(str(NOTEBOOK), str(tmp_path / "bad.ipynb"), parameters=dict(methods="CCFC,DEC", results_dir=str(tmp_path / "results")),
                                   kernel_name="python3", language="python", cwd=str(ROOT), progress_bar=False)
    assert not (tmp_path / "results").exists()


def test_runs_side_by_side_give_the_same_tables(smoke, tmp_path):
    """parallel=2: Figure 6's k-FED and CCFC runs (all clients connected, and 30% disconnected) train in two processes first,
    then each is read back from its folder, and Figure 7 reuses the connected CCFC run: the same scores, histories and Figures
    6-7 as the notebook's, run one after another."""
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    try:
        study = ccfc.Reproduction(ccfc.Protocol.from_parameters(scale="smoke", methods="k-FED,CCFC", sections="figure_6,figure_7",
                                                                results_dir=str(tmp_path), device="cpu", parallel=2))
        study.figure_6()
        study.figure_7()
        study.finish()                        # scores.csv: every run
    finally: torch.set_num_threads(threads)   # the study set this process's threads as the notebook's kernel does
    assert study.protocol.parallel == 2 and len(study.runs.cpu_seconds) == 2 * 2 + 1 and all(s > 0 for s in study.runs.cpu_seconds.values())
    key = ["method", "dataset", "p", "seed", "disconnection_rate"]
    ours, sequential = read(tmp_path, "scores.csv"), read(smoke, "scores.csv")
    assert len(ours) == 5 and set(ours.method) == {"k-FED", "CCFC", "CCFC [lambda=1]"} and set(ours.disconnection_rate) == {0.0, 0.3}
    pd.testing.assert_frame_equal(ours, ours[key].merge(sequential, on=key, how="left")[ours.columns])
    histories = sorted(tmp_path.glob("history_*.csv"))
    assert len(histories) == 5
    for history in histories:
        pd.testing.assert_frame_equal(read(tmp_path, history.name).drop(columns="seconds"), read(smoke, history.name).drop(columns="seconds"))
    figure_6 = read(smoke, "figure_6.csv")
    pd.testing.assert_frame_equal(read(tmp_path, "figure_6.csv"), figure_6[figure_6.method != "FFCM"].reset_index(drop=True))
    pd.testing.assert_frame_equal(read(tmp_path, "figure_7.csv"), read(smoke, "figure_7.csv"))
