"The CP-CFL paper notebook runs under papermill at smoke scale and writes every table, figure, history and its metadata."
import json
import re
from pathlib import Path

import pandas as pd
import pytest

papermill = pytest.importorskip("papermill")
ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "papers" / "cpcfl.ipynb"
TABLES = ["1", "2", "3", "4", "5", "5_relevance", "6", "A.13", "7", "8", "9", "10", "11", "12", "B.14", "B.15", "B.16", "B.17",
          "B.18", "B.19", "C.20", "D.21", "E.22"]


# One xdist group: under `pytest -n 2 --dist loadgroup` this module's tests share a worker, so its module fixtures run once.
pytestmark = pytest.mark.xdist_group("paper_cpcfl")


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("cpcfl-smoke")
    papermill.execute_notebook(str(NOTEBOOK), str(out / "executed.ipynb"), parameters=dict(scale="smoke", results_dir=str(out)),
                               kernel_name="python3", progress_bar=False)
    return out


def test_every_table_and_figure_is_written(smoke):
    for number in TABLES: assert (smoke / f"table_{number}.csv").exists(), number
    for figure in (3, 4, 5, 7): assert (smoke / f"figure_{figure}.png").stat().st_size > 1000, figure
    assert (smoke / "clustering_failure.csv").exists()
    metadata = json.loads((smoke / "metadata.json").read_text())
    assert metadata["stand_in_data"] is True and metadata["seed"] == [0] and metadata["config"]["scale"] == "smoke"
    assert metadata["cpu_seconds"] > 0 and "Table 9 (number of clusters; first seed)" in metadata["sections"]
    assert list((smoke / "encoders").glob("simclr-digits-*.pt"))


def test_main_table_rows_and_columns(smoke):
    table3 = pd.read_csv(smoke / "table_3.csv")
    assert list(table3.columns[:5]) == ["method", "column", "ours", "paper", "difference"] and "note" in table3
    assert {"ours_std", "seeds"} <= set(table3) and (table3.seeds == 1).all()
    assert len(table3) == 7 * 4 and table3.ours.notna().all()                      # 7 methods x T = 25/50/75/100, all run
    assert set(table3["method"]) == {"FedAvg (None)", "FedAvg (SimCLR)", "IFCA (None)", "IFCA (FedAvg)", "CP-CFL (SimCLR)",
                               "CP-CFL (BYOL)", "CP-CFL (SimSiam)"}
    assert ((table3.ours >= 0) & (table3.ours <= 100)).all()
    assert (table3.difference - (table3.ours - table3.paper)).abs().max() < 1e-3
    assert (table3["ours from"] == "digits to digits (STAND-IN for STL-10 to STL-10)").all()
    assert table3.note.str.startswith("STAND-IN data").all()                        # computed on stand-in data: marked, entry by entry


def test_the_encoder_is_chosen_by_linear_evaluation(smoke):
    "One linear evaluation per pre-training method, the CP-CFL accuracy reached with it (Table 3's last column), one choice."
    choice = pd.read_csv(smoke / "encoder_choice.csv")
    assert list(choice["pre-training"]) == ["simclr", "byol", "simsiam"] and choice["chosen by linear evaluation"].sum() == 1
    chosen = choice.loc[choice["chosen by linear evaluation"]].iloc[0]
    assert chosen["linear evaluation, test (%)"] == choice["linear evaluation, test (%)"].max()
    table3 = pd.read_csv(smoke / "table_3.csv")
    final = table3[table3.column == "T = 100"].set_index("method").ours
    assert abs(final["CP-CFL (SimCLR)"] - choice.set_index("pre-training").loc["simclr", "CP-CFL final accuracy (%)"]) < 1e-3


def test_skipped_and_not_run_entries_say_why(smoke):
    table5 = pd.read_csv(smoke / "table_5.csv")
    missing = table5[table5.ours.isna() & table5.paper.notna()]
    assert len(missing) and missing.note.fillna("").str.len().gt(0).all()
    assert table5[(table5.column == "STL-10 to STL-10")].ours.notna().all()            # the stand-in column ran, centralised rows too
    table_d21 = pd.read_csv(smoke / "table_D.21.csv")
    assert len(table_d21) == 5 * 2 and table_d21.ours.isna().all() and table_d21.note.str.startswith("not run: ResNet-50").all()
    table9 = pd.read_csv(smoke / "table_9.csv").set_index("index")
    assert len(table9) == 5 and table9.ours.drop(4).notna().all()                       # N = 1, 2, 3, 5 run: below, at and above the 3 groups
    assert table9.note[4] == "not run at smoke scale (CPU budget)"
    table6 = pd.read_csv(smoke / "table_6.csv")
    main6 = table6[table6.column.str.startswith("STL-10 to STL-10")].set_index("row")
    assert main6.ours[["θ_c", "θ_c-3"]].notna().all() and main6.note[["θ_c-1", "θ_c-2"]].eq("not run at smoke scale (CPU budget)").all()
    table10 = pd.read_csv(smoke / "table_10.csv")
    assert table10[table10.column.str.startswith("90")].note.str.contains("not run at smoke").all()
    assert table10[table10.column.str.startswith("15")].ours.notna().all()


def test_pretraining_cost_table_measures_every_encoder(smoke):
    "Table E.22: a measured SimCLR epoch and a FLOP count at 96x96 for the CNN, ResNet-18 and ResNet-50 encoders."
    table = pd.read_csv(smoke / "table_E.22.csv").set_index(["row", "column"])
    assert table.ours.notna().all() and len(table) == 3 * 2
    flops = table.xs("Flops (G)", level="column").ours
    assert abs(flops["CNN"] - 0.1646) < 1e-3 and abs(flops["ResNet-18"] - 0.6662) < 1e-3 and abs(flops["ResNet-50"] - 1.5014) < 1e-3
    timing = pd.read_csv(smoke / "table_E.22_timing.csv").set_index("encoder")
    assert list(timing.index) == ["CNN", "ResNet-18", "ResNet-50"] and (timing.cpu_seconds_timed > 0).all() and (timing.wall_seconds_timed > 0).all()
    assert (timing.cpu_seconds_per_epoch - timing.cpu_seconds_timed * timing.epoch_images / timing.images_timed).abs().max() < 1e-6
    assert (table.xs("Time per epoch (s)", level="column").ours - timing.cpu_seconds_per_epoch).abs().max() < 1e-3   # on a CPU: CPU seconds
    assert timing.pretraining_data.eq("digits").all() and (timing.images_timed <= timing.epoch_images).all()


def test_histories_and_cluster_identities(smoke):
    history = pd.read_csv(smoke / "history_cpcfl-simclr_digits-to-digits_seed0.csv")
    assert history["round"].tolist() == list(range(1, 5))
    assert history.exploration.tolist() == [1.0, 1.0, 0.0, 0.0]                         # T = 4, T_c = 2 at smoke scale
    for column in ("accuracy_mean", "clustering_failure", "restarts", "cluster_ari", "bytes_down", "bytes_up"): assert column in history
    clients = pd.read_csv(smoke / "runs" / "digits-to-digits" / "cpcfl-simclr-seed0" / "clients.csv")
    assert set(clients.cluster.dropna().astype(int)) <= {0, 1, 2} and len(clients) == 6 * 4                  # 6 clients, 4 rounds
    failures = pd.read_csv(smoke / "clustering_failure.csv")
    assert {"IFCA (None)", "CP-CFL (SimCLR)"} <= set(failures.method)
    table2 = pd.read_csv(smoke / "table_2.csv")
    assert table2.set_index("index").ours.round(3).to_dict() == {"FedAvg": 2.0, "IFCA": 4.0, "CP-CFL": 4.0}


def test_bad_parameters_name_the_valid_ones(tmp_path):
    "The notebook's parameters are checked once, before anything is loaded or written: a bad one names the valid values."
    from fedlearn_nb.tools.protocols.cpcfl import Protocol
    for parameters, message in ((dict(scale="huge"), "unknown scale 'huge'; valid: smoke, quick, paper"),
                                (dict(methods="cpcfl"), "unknown method(s) ['cpcfl']; valid: fedavg, fedavg-simclr"),
                                (dict(scale="quick", datasets="digits-to-digits"), "dataset(s) (tasks) for scale 'quick'"),
                                (dict(rounds=0), "rounds must be an integer >= 1"), (dict(seeds="-1"), "non-negative integers"),
                                (dict(client_workers=-1), "client_workers must be an integer >= 0")):
        with pytest.raises(ValueError, match=re.escape(message)): Protocol.from_parameters(results_dir=str(tmp_path / "out"), **parameters)
    assert not (tmp_path / "out").exists()


def test_a_run_with_none_of_its_data_fails_loudly(tmp_path, monkeypatch):
    "No data of the scale on disk: a clear error (so `fedlearn-repro` exits non-zero) before any run, not empty tables."
    from fedlearn_nb.tools.protocols.cpcfl import Protocol
    from fedlearn_nb.tools.protocols.cpcfl_tables import Study
    empty = tmp_path / "no_data"
    empty.mkdir()
    monkeypatch.setenv("FEDLEARN_DATA_ROOT", str(empty))
    with pytest.raises(RuntimeError, match="none of this scale's data is present") as error:
        Study(Protocol.from_parameters(scale="quick", results_dir=str(tmp_path / "out")))
    assert "skipped (data not available)" in str(error.value)
    assert not (tmp_path / "out").exists()


def test_the_notebook_declares_and_shows_its_tables_only():
    "The notebook holds its parameters, one short cell per table or figure and the prose: no set-up of its own (the protocol holds it)."
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    assert sum(len(source.splitlines()) for source in code) <= 250
    assert not any(word in source for source in code for word in ("global ", "def ", "class ", "RunConfig", "build_federat", ".append("))
    for method in ("table_3", "table_4", "table_5", "tables_6_and_A13", "table_7", "table_8", "table_9", "table_10", "trial_tables",
                   "resnet_tables", "table_E22", "tables_1_and_2", "figure_3", "figure_4", "figure_5", "encoder_choice", "write_metadata"):
        assert sum(f"study.{method}()" in source for source in code) == 1, method


def test_the_runner_finds_the_scales_in_the_protocol_module():
    "The notebook imports the protocol (SCALES) and the tables module (Study): the runner's scale lookup reads the protocol's SCALES."
    from fedlearn_nb.tools.planning import notebook_protocols, notebook_scales
    assert notebook_protocols(NOTEBOOK) == ["cpcfl", "cpcfl_tables"]
    assert notebook_scales(NOTEBOOK) == ("smoke", "quick", "paper")


def test_runs_side_by_side_give_the_same_tables(smoke, tmp_path):
    """parallel=2: Table 3's FedAvg (None), IFCA (None) and IFCA (FedAvg) runs train in two processes first (FedAvg before the IFCA
    run that starts from its encoder), then each is read back: the same histories and Tables 3 and 4 as the notebook's."""
    import torch
    from fedlearn_nb.tools.protocols.cpcfl import Protocol
    from fedlearn_nb.tools.protocols.cpcfl_tables import Study
    threads = torch.get_num_threads()
    try:
        study = Study(Protocol.from_parameters(scale="smoke", methods="fedavg,ifca,ifca-fedavg", results_dir=str(tmp_path), parallel=2))
        study.table_3()
        study.table_4()                                       # its F1 and AUROC: the clients' predictions of each run read back
    finally: torch.set_num_threads(threads)
    assert study.protocol.parallel == 2 and len(study.paper_runs.cpu_seconds) == 3 and all(s > 0 for s in study.paper_runs.cpu_seconds.values())
    for method in ("fedavg", "ifca", "ifca-fedavg"):
        name = f"history_{method}_digits-to-digits_seed0.csv"
        pd.testing.assert_frame_equal(pd.read_csv(tmp_path / name), pd.read_csv(smoke / name))
    for number in (3, 4):
        ours, sequential = (pd.read_csv(folder / f"table_{number}.csv") for folder in (tmp_path, smoke))
        ran = ours[ours.ours.notna()]
        assert set(ran.method) == {"FedAvg (None)", "IFCA (None)", "IFCA (FedAvg)"}
        pd.testing.assert_frame_equal(ran.reset_index(drop=True), sequential.loc[ran.index].reset_index(drop=True))
