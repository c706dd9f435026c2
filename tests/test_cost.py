"""The cost meter (fedlearn_nb.tools.cost): its projection arithmetic, the declared paper settings against the papers'
numbers (as the implementer's extracts in shared/specs state them), the stand-ins' shapes, the command's refusals, and a
tiny end-to-end run on the embedded digits."""
import json

import pytest
import torch

from fedlearn_nb.tools import cost
from fedlearn_nb.tools.runner import main


def test_projection_arithmetic_on_hand_values():
    # a run: 130 rounds of 2 s and an evaluation of 0.5 s every round -> 130 x 2.5 = 325 s
    assert cost.run_seconds(130, 2.0, 0.5, eval_every=1) == 325.0
    # evaluations every 4th round and the last: rounds 4, 8 and 10 -> 10 x 1 + 3 x 2 = 16 s
    assert cost.evaluations_per_run(10, 4) == 3 and cost.run_seconds(10, 1.0, 2.0, eval_every=4) == 16.0
    # a table: columns of 325 s (5 runs) and 16 s (3 runs)
    assert cost.table_seconds([325.0, 16.0], [5, 3]) == 1673.0
    # 100 of 6,000 images took 2 s -> 120 s
    assert cost.scale_to_full(2.0, 100, 6000) == 120.0
    # rounds on 100 and 400 images took 5 s and 6 s: t0 = 14/3 s, 1/300 s per image -> 6 + 5600 / 300 at 6,000 images
    assert cost.fit_to_full([100, 400], [5.0, 6.0], 6000) == pytest.approx(6.0 + 5600 / 300)
    assert cost.steps_per_round([6000, 6000], batch_size=128, epochs=1) == 47   # ceil(6000 / 128)
    assert cost.duration(90) == "1.5 min" and cost.duration(7200) == "2.0 h" and cost.duration(3 * 86400) == "3.0 d"


def test_projection_of_a_table_counts_methods_seeds_and_variants():
    table = cost.tables_for("ccfc")[0]
    timing = dict(fit_seconds=2.0, eval_seconds=0.5)
    projection = cost.project(table, [dict(timing, label=c.label) for c in table.columns])
    # CCFC Tables 1-2: 4 datasets x 5 values of p x 1 method x 1 seed, 130 rounds each evaluated
    assert [c["runs"] for c in projection["columns"]] == [5, 5, 5, 5]
    assert projection["seconds"] == 4 * 5 * 130 * 2.5


SPECS = {  # (paper, table, column) -> clients, rounds, local epochs, batch size, as the specs state them
    ("ccfc", "Tables 1-2", "mnist"): (10, 130, 1, 128),          # ccfc.md §3: m = 10; authors' code: 100 + 30 rounds, 1 epoch, batch 128
    ("fedccl", "Table 4", "mnist"): (10, 100, 1, 64),           # fedccl.md §3: 10 clients, batch 64; Table 8 set-up: 100 rounds
    ("fedccl", "Table 4", "cifar10"): (10, 100, 5, 64),          # CIFAR-10: 5 local epochs
    ("fedccl", "Tables 1-2", "Digit-5"): (5, 60, 1, 64),         # 5 clients (one per domain)
    ("fedccl", "Tables 1-2", "Office-10"): (4, 60, 1, 64),
    ("fedplcc", "Table II", "Digit-5"): (5, 50, 10, 32),         # fedplcc.md §3: T = 50 / 100 / 50, E = 10, batch 32
    ("fedplcc", "Table III", "Office-10"): (4, 100, 10, 32),
    ("fedplcc", "Table IV", "DomainNet"): (6, 50, 10, 32),
    ("fedcrl", "Table II", "prac-cifar10"): (20, 500, 1, 16),    # fedcrl.md §3: N = 20, 500 iterations, R = 1, b = 16
    ("fedcrl", "Table II", "path-emnist"): (20, 500, 1, 16),
    ("cpcfl", "Table 3", "STL-10 to STL-10"): (60, 100, 3, 32),  # cpcfl.md Algorithm 2 defaults: T = 100, E = 3, batch 32; 60 clients
}


@pytest.mark.parametrize("key", list(SPECS))
def test_declared_settings_match_the_specs(key):
    paper, name, label = key
    table = next(t for t in cost.tables_for(paper) if t.name == name)
    config = next(c for c in table.columns if c.label == label).config
    assert (config.num_clients, config.rounds, config.local_epochs, config.batch_size) == SPECS[key]


def test_declared_seeds_and_methods():
    assert len(cost.tables_for("fedcrl")[0].seeds) == 5 and len(cost.tables_for("fedcrl")[0].methods) == 16   # Local + 14 baselines + FedCRL
    assert cost.tables_for("fedplcc")[0].methods[-1] == "FedPLCC" and len(cost.tables_for("fedplcc")[0].seeds) == 3
    assert cost.tables_for("fedccl")[-1].methods == ("FedAvg", "FedProc", "FedPCL", "FedProto", "FPL", "FedCCL")
    ccfc = cost.tables_for("ccfc")[0].columns[0].config
    assert ccfc.algorithm_kwargs["pretrain_rounds"] == 100 and ccfc.optimizer == "adam" and ccfc.lr == 1e-3


def test_stand_in_has_the_shape_of_the_data_it_replaces():
    stl = cost.stand_in_data(cost.STL10, 20)
    assert tuple(stl.x.shape) == (20, 3, 96, 96) and stl.x.dtype == torch.float32 and stl.y.max() == 9
    emnist = cost.stand_in_data(cost.EMNIST, 94)
    assert tuple(emnist.x.shape[1:]) == (1, 28, 28) and emnist.y.bincount().tolist() == [2] * 47   # 47 balanced classes
    # a whole column: CIFAR-100 stand-in cut by FedCRL's pathological scheme into 20 clients, train + test merged, 75/25 split
    column = next(c for c in cost.tables_for("fedcrl")[0].columns if c.label == "path-cifar100")
    shape = cost.DataShape(2000, 0, 3, 32, 100)
    data = cost.stand_in_federation(column.config, shape)
    assert len(data.clients) == 20 and tuple(data.clients[0].x_train.shape[1:]) == (3, 32, 32)
    assert sum(c.num_examples + c.num_test_examples for c in data.clients) == 2000
    assert cost.merged(cost.CIFAR100).train == 60000


def test_unknown_paper_or_scale_is_refused_in_one_line(capsys):
    assert main(["cost", "fedxyz", "--scale", "paper"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "unknown paper 'fedxyz'" in error and "ccfc" in error
    assert main(["cost", "ccfc", "--scale", "quick"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "unknown scale 'quick'" in error and "paper" in error


def test_tiny_end_to_end_cost_run(tmp_path, capsys):
    out = tmp_path / "cost.json"
    assert main(["cost", "ccfc", "--scale", "smoke", "--rounds", "1", "--device", "cpu", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "smoke digits" in text and "measured: 1 round(s) after 1 warm-up" in text
    record = json.loads(out.read_text())
    assert {"device", "torch", "threads", "load_average"} <= set(record["machine"])
    column = record["tables"][0]["columns"][0]
    assert column["data"] == "real" and column["config"]["dataset"] == "digits" and column["fit_seconds"] > 0
    assert record["tables"][0]["seconds"] == pytest.approx(2 * cost.run_seconds(3, column["fit_seconds"], column["eval_seconds"]))


def test_extrapolation_from_a_share_of_the_images():
    table = cost._smoke_tables()[0]
    record = cost.time_column(table.columns[0], rounds=1, images=8, target_seconds=0.0)   # two shares: 8, then 16 images per client
    full = record["train_images"]                       # 1,347: the digits' train split over 2 clients
    assert [t["timed_images"] for t in record["tries"]] == [16, 32]
    assert record["how"].startswith(f"extrapolated from 1 step(s) per client (32 of {full:,} images")
    seconds = [t["round_seconds"][0] for t in record["tries"]]
    assert record["fit_seconds"] == pytest.approx(cost.fit_to_full([16, 32], seconds, full))
    assert record["steps_per_client_round"] == 11           # ceil(674 / 64) = 11 (and 673 -> 11)


def test_a_partial_copy_of_the_real_data_is_scaled_to_the_papers_size():
    # CIFAR-10 here holds 1,000 train images per class: CCFC's column (train + test merged, 60,000) is timed on 20,000
    column = cost.tables_for("ccfc")[0].columns[2]
    assert cost.partial_copy_factors(column, dict(data="real", train_images=20000, evaluated_images=20000)) == (3.0, 3.0)
    assert cost.partial_copy_factors(column, dict(data="stand-in", train_images=20000, evaluated_images=20000)) == (1.0, 1.0)
    timing = dict(label="cifar10", data="real", train_images=20000, evaluated_images=20000, fit_seconds=2.0, eval_seconds=1.0, how="measured")
    projected = cost.project(cost.Table("ccfc", "t", [column], ("CCFC",), (0,), "CCFC"), [timing])
    assert projected["seconds"] == 5 * 130 * (2.0 * 3 + 1.0 * 3)


def test_the_meter_reads_the_protocol_modules():
    "Each declared column is its protocol module's paper-scale run (its own config builder where one works without the data), and says so."
    from fedlearn_nb.tools.protocols import ccfc, cpcfl, fedplcc
    for paper in cost.PAPER_TABLES:
        sources = [t.source for t in cost.tables_for(paper)]
        assert sources[0].startswith(f"fedlearn_nb.tools.protocols.{paper} SCALES['paper']") and not any("papers/" in s for s in sources), paper
    assert cost.tables_for("ccfc")[0].columns[0].config == ccfc.method_config(ccfc.Protocol.from_parameters("paper", device="cpu"), "CCFC", "mnist", 0.0, 0)
    column = cost.tables_for("cpcfl")[0].columns[0]
    assert (column.config.rounds, column.config.encoder_input) == (cpcfl.SCALES["paper"]["rounds"], {"image_size": cpcfl.SCALES["paper"]["image_size"]})
    assert column.timing_config().algorithm_kwargs == {**column.config.algorithm_kwargs, "exploration_rounds": 0, "init": "random", "encoder_path": None}
    rounds = [fedplcc.SCALES["paper"]["datasets"][name]["rounds"] for name in ("digit5", "office10", "domainnet10")]
    assert [t.columns[0].config.rounds for t in cost.tables_for("fedplcc")] == rounds
