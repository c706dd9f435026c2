"""The Flower adapter: identical histories on Flower's simulation engine, a real multi-process deployment, resume with
client state kept on the nodes, and exact records.

Identical means *equal*: `History.same_as` compares every round record and every client's numbers with `==`. The
SuperNodes run the same operations on the same values in the same order as the in-process engine (one math thread,
torch re-seeded from (seed, round, client, "fit") before each local update), and the messages carry tensors as
NumPy arrays of their own dtype and floats as their exact hex form, so nothing is rounded on the way.
"""
from __future__ import annotations

import faulthandler
import math
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

pytest.importorskip("flwr")
from fedlearn_nb.experiment import RunConfig, build_federated_data, get_backend, run  # noqa: E402
from fedlearn_nb.tools.flower import (LocalGrid, flower_folder, pack, run_deployment, run_many_on_flower, run_on_flower,  # noqa: E402
                                save_partition, serve_experiment, unpack)

PAPER_ALGORITHMS = ("fedavg", "fedprox", "fedccl", "fedplcc", "fedcrl", "ccfc")
CCFC_SMALL = dict(model="ccfc_simsiam", model_kwargs=dict(latent_dim=32, projector_hidden_dim=32, predictor_hidden_dim=8),
                  algorithm_kwargs=dict(pretrain_rounds=1, kmeans_n_init=1))


def small_config(algorithm: str, results_dir, num_clients: int = 3, rounds: int = 2, **changes) -> RunConfig:
    "Three clients of the embedded digits (iid), 2 rounds of 2 local steps: seconds per algorithm in-process."
    values = dict(dataset="digits", partition="iid", num_clients=num_clients, model="fedccl_cnn4", algorithm=algorithm, rounds=rounds,
                  local_steps=2, batch_size=32, optimizer="adam", lr=0.003, results_dir=str(results_dir), name=f"{algorithm}-test")
    values.update(CCFC_SMALL if algorithm == "ccfc" else {})
    return RunConfig(**{**values, **changes})


def test_run_finds_the_flower_backend_without_it_being_imported():
    "run(config, backend='flower') in a fresh interpreter: the engine finds the adapter through its entry point."
    code = ("import sys; from fedlearn_nb.experiment import BACKENDS, get_backend; assert 'fedlearn_nb.tools.flower' not in sys.modules; "
            "print(get_backend('flower').__module__)")
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == "fedlearn_nb.tools.flower"


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_the_engine_finds_the_flower_backend_by_name():
    assert get_backend("flower") is run_on_flower and get_backend("Flower") is run_on_flower
    with pytest.raises(ValueError, match="unknown backend 'ray'"): get_backend("ray")


def test_packed_values_come_back_exactly():
    arrays = {}
    value = {"x": torch.randn(3, 2, dtype=torch.float64), "ints": torch.tensor([1, 2], dtype=torch.int64), 7: (0.1 + 0.2, None, [True])}
    back = unpack(pack(value, arrays), arrays)
    assert torch.equal(back["x"], value["x"]) and back["x"].dtype == torch.float64 and back["ints"].dtype == torch.int64
    assert back[7] == (0.1 + 0.2, None, [True]) and back[7][0] == 0.30000000000000004


def test_resume_on_nodes_restores_each_clients_state_from_the_node_store(tmp_path):
    "FedCRL keeps personal models on the clients: a run stopped after round 1 and resumed on fresh nodes ends as an unbroken one."
    config = small_config("fedcrl", tmp_path, rounds=3)
    straight = run(config, resume=False, progress=False)
    first = LocalGrid(3)
    serve_experiment(first, first.get_node_ids(), RunConfig(**{**config.to_dict(), "rounds": 1}), resume=False, progress=False)
    assert sorted(p.name for p in (flower_folder(config) / "nodes").iterdir()) == [f"client-{k}.round-1.pt" for k in range(3)]
    second = LocalGrid(3)  # new Contexts: the state must come from the node store on disk
    resumed = serve_experiment(second, second.get_node_ids(), config, resume=True, progress=False)
    assert resumed.same_as(straight)


def test_a_refused_resume_on_flower_writes_nothing(tmp_path):
    "Resuming a Flower run with another config is refused before config.json (the record of the finished rounds) is touched."
    config = small_config("fedavg", tmp_path, rounds=1)
    grid = LocalGrid(3)
    serve_experiment(grid, grid.get_node_ids(), config, resume=False, progress=False)
    folder = flower_folder(config)
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    grid = LocalGrid(3)
    with pytest.raises(ValueError, match="different experiment"):
        serve_experiment(grid, grid.get_node_ids(), RunConfig(**{**config.to_dict(), "lr": 0.1}), resume=True, progress=False)
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before


def ray_failed_to_start(error: BaseException) -> bool:
    "Whether `error` (or what caused it) is Ray's node timing out at start-up: Ray waits a fixed 30 s for its raylet."
    while error is not None:
        if "timed out during startup" in str(error): return True
        error = error.__cause__ or error.__context__
    return False


RAY_WATCHDOG_SECONDS = 900   # the simulation takes 30-60 s; on a machine at load 13 a failed start-up once left pytest waiting for good


def run_on_ray_with_one_retry(start, watchdog: float = RAY_WATCHDOG_SECONDS):
    """`start()`, once more if Ray's raylet did not come up within its fixed 30 s (seen on a loaded 2-core machine); any other
    error fails. Past `watchdog` seconds the process dumps every thread's stack and exits: a hang becomes a failure
    (a crashed xdist worker), not a suite that never ends."""
    faulthandler.dump_traceback_later(watchdog, exit=True)
    try:
        try: return start()
        except Exception as error:
            if not ray_failed_to_start(error): raise
            print(f"Ray's node did not start in time ({type(error).__name__}); trying once more")
            return start()
    finally: faulthandler.cancel_dump_traceback_later()



def test_the_ray_watchdog_turns_a_hang_into_a_failure_and_is_cancelled_after_a_return():
    code = ("import sys, time; sys.path.insert(0, 'tests'); import test_flower as t\n"
            "assert t.run_on_ray_with_one_retry(lambda: 7, watchdog=1) == 7; time.sleep(2)\n"   # returned: no dump after 1 s
            "t.run_on_ray_with_one_retry(lambda: time.sleep(60), watchdog=1)")                  # hung: dumped and ended
    began = time.perf_counter()
    ended = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parents[1])
    assert ended.returncode != 0 and ended.stderr.count("Timeout (0:00:01)") == 1 and "run_on_ray_with_one_retry" in ended.stderr
    assert time.perf_counter() - began < 50

# One Ray actor serves the three SuperNodes in turn (each node's state lives in its Flower Context, not in the actor), and
# no idle workers are started ahead: Flower's actors need their own environment, so Ray's prestarted workers go unused.
# Ray's metrics and the actors' log forwarding are off: a node's error still comes back in its reply.
ONE_ACTOR = {"client_resources": {"num_cpus": 1, "num_gpus": 0.0},
             "init_args": {"num_cpus": 1, "num_gpus": 0, "include_dashboard": False, "log_to_driver": False,
                           "_system_config": {"enable_worker_prestart": False, "prestart_worker_first_driver": False,
                                              "enable_metrics_collection": False}}}


def test_paper_algorithms_give_identical_histories_on_flowers_simulation_engine(tmp_path):
    "FedAvg, FedProx, FedCCL, FedPLCC, FedCRL and CCFC: 3 SuperNodes, 2 rounds, one Ray start-up for all six."
    configs = [small_config(name, tmp_path) for name in PAPER_ALGORITHMS]
    began = time.perf_counter()
    on_flower = run_on_ray_with_one_retry(lambda: run_many_on_flower(configs, resume=False, progress=False, backend_config=ONE_ACTOR))
    seconds = time.perf_counter() - began
    assert [h.name for h in on_flower] == [c.name for c in configs]
    for config, history in zip(configs, on_flower):
        in_process = run(config, resume=False, progress=False)
        assert history.same_as(in_process), f"{config.algorithm}: the Flower history differs from the in-process one"
        assert len(history) == 2 and history[-1]["num_participants"] == 3 and history[-1]["bytes_up"] > 0
        assert (flower_folder(config) / "history.json").exists() and (flower_folder(config) / "checkpoint.pt").exists()
    assert not math.isnan(on_flower[-1][-1]["nmi"])   # CCFC's pooled clustering scores came back from the nodes
    print(f"six algorithms on Flower's simulation engine: {seconds:.0f} s")


def test_a_superlink_and_supernodes_as_separate_processes_run_our_algorithm(tmp_path):
    "The deployment recipe on 127.0.0.1: a SuperLink, two SuperNodes each loading its own partition file, `flwr run`; one round."
    config = small_config("fedcrl", tmp_path / "results", num_clients=2, rounds=1)
    data = build_federated_data(config)
    partitions = [save_partition(data, k, tmp_path / "partitions" / f"client-{k}.pt") for k in range(2)]
    history = run_deployment(config, partitions, tmp_path / "deployment", timeout=420)
    assert history.same_as(run(config, resume=False, progress=False))
    logs = "".join(p.read_text() for p in (tmp_path / "deployment").glob("supernode-*.log"))
    assert logs.count("Start `flwr-clientapp` process") >= 4     # set-up, train and evaluate messages reached both nodes
