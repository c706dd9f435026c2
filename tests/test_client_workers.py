"""Clients trained in worker processes (`client_workers=2`) give the history of clients trained in the loop, bit for bit.

Every registered algorithm that declares `independent_clients = True` runs its golden set-up (tests/golden_histories.py:
the main job's config, 2 rounds of 3 local steps) with two workers and with none: the histories must be equal (with one
math thread in the loop, as here; with more threads in the loop they agree to float rounding). An algorithm that does not
declare it keeps the loop, and the engine says why. The engine chapter (nbs/11_engine.ipynb) checks the rest: a round's
results, clients' states, working model and torch generator equal the loop's, and a failing or dying worker names its client.
"""
from __future__ import annotations

import warnings

import pytest
import torch

from fedlearn_nb.algorithms.fedavg import FedAvg
from fedlearn_nb.execution import ClientUpdateError, worker_obstacles
from fedlearn_nb.loop import run_experiment
from fedlearn_nb.experiment import RunConfig, build_algorithm, build_federated_data, build_model_for, run
from golden_histories import check, golden_config, registered_algorithms

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


def test_the_algorithms_that_keep_nothing_on_the_server_object_declare_it():
    "FedAvg's family, the prototype and signal methods, the personalised ones, the clustered and the federated-clustering ones."
    assert {"fedavg", "fedprox", "moon", "local", "fedproto", "fedproc", "fpl", "fedplvm", "fedccl", "fedcclplus", "fedplcc", "fedpcl",
            "fedcrl", "fedrep", "ditto", "pfedme", "perfedavg", "fedamp", "fedpac", "ifca", "cpcfl", "kfed", "ffcm", "ccfc"} <= set(DECLARED)


@pytest.mark.parametrize("name", DECLARED)
def test_a_declared_algorithm_gives_the_same_history_in_workers(tmp_path, name):
    loop, _ = history(name, tmp_path / "loop", 1)
    workers, fell_back = history(name, tmp_path / "workers", 2)
    assert not fell_back, fell_back[0].message
    assert workers.same_as(loop), f"{name}: two workers changed the history"


def test_every_registered_algorithm_declares_it_or_says_why_not():
    for name in NAMES:
        reasons = worker_obstacles(build_algorithm(golden_config(name, "unused")))
        assert not reasons or any("independent_clients" in reason for reason in reasons), (name, reasons)


class CountingFedAvg(FedAvg):
    "FedAvg that counts its clients' updates on the algorithm object: truly not independent (a worker's count never comes back)."
    def end_local(self, client, model, ins, context):
        self.updates = getattr(self, "updates", 0) + 1


def test_an_undeclared_algorithm_runs_in_the_loop_and_warns():
    "A subclass that replaces a client hook below FedAvg without declaring again keeps the loop: its count is whole, its history FedAvg's."
    torch.set_num_threads(1)
    config = golden_config("fedavg", "unused")
    data = build_federated_data(config)
    algorithm = CountingFedAvg()
    assert any("replaces the client hooks ['end_local'] below FedAvg" in reason for reason in worker_obstacles(algorithm))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run_experiment(algorithm, data, build_model_for(config, data), config.rounds, config.training(), seed=config.seed,
                                progress=False, client_workers=2)
    assert any("independent_clients" in str(w.message) for w in caught), [str(w.message) for w in caught]
    assert algorithm.updates == config.rounds * data.num_clients
    problems, how = check("fedavg", [dict(r) for r in result.records])    # FedAvg's recorded history, as this processor warrants
    assert not problems, (how, problems[:5])


# a few more rounds where the golden two do not reach a state the client update reads: CP-CFL's choice by loss after its
# exploration round, FedCRL's tau from the L_Reg kept in round 2, FedALA's weights after the first (converging) ALA, FedPCL's
# training against every client's prototypes
LONGER = {"cpcfl": (3, dict(exploration_rounds=1)), "fedcrl": (3, {}), "fedala": (3, {}), "fedpcl": (3, {})}


@pytest.mark.parametrize("name", sorted(LONGER))
def test_round_dependent_state_gives_the_same_history_in_workers(tmp_path, name):
    rounds, settings = LONGER[name]
    def longer(folder, workers):
        torch.set_num_threads(1)
        config = golden_config(name, str(folder))
        config.rounds, config.client_workers = rounds, workers
        config.algorithm_kwargs.update(settings)
        return run(config, resume=False, progress=False)
    loop, workers = longer(tmp_path / "loop", 1), longer(tmp_path / "workers", 2)
    assert len(loop) == rounds and workers.same_as(loop), f"{name}: two workers changed the history"
    if name == "cpcfl": assert loop[0]["exploration"] == 1.0 and loop[-1]["exploration"] == 0.0


def test_synthetic_images_kept_for_reuse_come_back_from_the_workers(tmp_path):
    "SDA-FC's reuse: the server keeps the uploads, so a run in workers fills the store and the next run takes them."
    from fedlearn_nb.algorithms import sdafc
    sdafc._SYNTHETIC_CACHE.clear()
    def reused(folder):
        torch.set_num_threads(1)
        config = golden_config("sdafc_km", str(folder))
        config.client_workers = 2
        config.algorithm_kwargs.update(reuse_synthetic=True)
        return run(config, resume=False, progress=False)
    first = reused(tmp_path / "first")
    assert len(sdafc._SYNTHETIC_CACHE) == len(first[0]["participants"]) == 5     # one client per domain of digits5lite
    second = reused(tmp_path / "second")
    assert second.same_as(first) and not check("sdafc_km", [dict(r) for r in second.records])[0]


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
    with pytest.raises(ClientUpdateError, match="client 2 failed.*FloatingPointError: diverged"):
        run(config, resume=False, progress=False)


def test_the_setting_is_checked_and_does_not_name_the_run(tmp_path):
    for wrong in (-1, 1.5, "auto", True):
        with pytest.raises(ValueError, match="client_workers must be an int >= 0"): RunConfig(client_workers=wrong)
    assert RunConfig(client_workers=0).run_name == RunConfig().run_name == RunConfig(client_workers=2).run_name
    assert RunConfig.from_dict(RunConfig(client_workers=2).to_dict()).client_workers == 2
