"""Clients trained in worker processes (`client_workers=2`) give the history of clients trained in the loop, bit for bit.

Every registered algorithm that declares `independent_clients = True` runs its golden set-up (tests/test_golden_history.py:
the main job's config, 2 rounds of 3 local steps) with two workers and with none: the histories must be equal (with one
math thread in the loop, as here; with more threads in the loop they agree to float rounding). An algorithm that does not
declare it keeps the loop, and the engine says why. The engine chapter (nbs/11_engine.ipynb) checks the rest: a round's
results, clients' states, working model and torch generator equal the loop's, and a failing or dying worker names its client.
"""
from __future__ import annotations

import warnings

import pytest
import torch

from fedlearn_nb.engine import ClientUpdateError, RunConfig, build_algorithm, run, worker_obstacles
from test_golden_history import GOLDEN_HISTORIES, compare, golden_config, registered_algorithms

NAMES = registered_algorithms()
DECLARED = [name for name in NAMES if not worker_obstacles(build_algorithm(golden_config(name, "unused")))]


def history(name: str, folder, workers: int):
    torch.set_num_threads(1)
    config = golden_config(name, str(folder))
    config.client_workers = workers
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run(config, resume=False, progress=False)
    fell_back = [w for w in caught if "the clients train one after another" in str(w.message)]
    return result, fell_back


def test_the_plain_algorithms_declare_it():
    "FedAvg and the methods that only change its local loss (keeping per-client memories in client.state) use workers."
    assert {"fedavg", "fedprox", "moon"} <= set(DECLARED), DECLARED


@pytest.mark.parametrize("name", DECLARED)
def test_a_declared_algorithm_gives_the_same_history_in_workers(tmp_path, name):
    loop, _ = history(name, tmp_path / "loop", 1)
    workers, fell_back = history(name, tmp_path / "workers", 2)
    assert not fell_back, fell_back[0].message
    assert workers.same_as(loop), f"{name}: two workers changed the history"


@pytest.mark.parametrize("name", [n for n in NAMES if n not in DECLARED])
def test_an_undeclared_algorithm_says_why_it_keeps_the_loop(name):
    reasons = worker_obstacles(build_algorithm(golden_config(name, "unused")))
    assert any("independent_clients" in reason for reason in reasons), reasons


def test_an_undeclared_algorithm_runs_in_the_loop_and_warns(tmp_path):
    name = "fedproto"  # FedAvg with its own loss and payload, not declared again
    workers, fell_back = history(name, tmp_path, 2)
    assert fell_back and "independent_clients" in str(fell_back[0].message)
    assert not compare(GOLDEN_HISTORIES[name], [dict(r) for r in workers.records])


def test_an_error_in_a_worker_names_the_client(tmp_path, monkeypatch):
    from fedlearn_nb.algorithms.fedavg import FedAvg
    from fedlearn_nb.engine import Algorithm
    def loss(self, model, x, y, context):
        if context["client"].id == 2: raise FloatingPointError("diverged")
        return Algorithm.loss(self, model, x, y, context)
    monkeypatch.setattr(FedAvg, "loss", loss)
    monkeypatch.setattr(FedAvg, "independent_clients", True, raising=False)
    config = golden_config("fedavg", str(tmp_path))
    config.client_workers = 2
    with pytest.raises(ClientUpdateError, match="client 2 failed in a worker process: FloatingPointError: diverged"):
        run(config, resume=False, progress=False)


def test_the_setting_is_checked_and_does_not_name_the_run(tmp_path):
    for wrong in (-1, 1.5, "auto", True):
        with pytest.raises(ValueError, match="client_workers must be an int >= 0"): RunConfig(client_workers=wrong)
    assert RunConfig(client_workers=0).run_name == RunConfig().run_name == RunConfig(client_workers=2).run_name
    assert RunConfig.from_dict(RunConfig(client_workers=2).to_dict()).client_workers == 2
