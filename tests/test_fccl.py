"FCCL+ beyond its chapter: resume after a crash equals an uninterrupted run (consensus and teachers travel in the checkpoint), runs from a RunConfig, real public data."
import numpy as np
import pytest
import torch

from fedlearn_nb.core import seed_everything
from fedlearn_nb.data import DatasetNotFoundError, load_benchmark
from fedlearn_nb.engine import LocalTraining
from fedlearn_nb.loop import run_experiment
from fedlearn_nb.experiment import RunConfig, run
from fedlearn_nb.federation import FederatedData
from fedlearn_nb.algorithms.fccl import FCCLPlus, load_public_images
from toys import TinyNet, crash_and_resume, toy_federation


def make():
    return FCCLPlus(public_size=48, public_batch_size=16)


def test_resume_equals_an_uninterrupted_run(tmp_path):
    "Crash after round 2, resume: the same history, consensus and teachers as a run that never stopped."
    full_algorithm, full, full_previous, resumed_algorithm, resumed = crash_and_resume(
        make, tmp_path, snapshot=lambda fed: [dict(c.state["previous"]) for c in fed])
    assert resumed.same_as(full)
    assert resumed_algorithm.server["consensus_round"] == full_algorithm.server["consensus_round"] == 5
    for key, value in full_algorithm.server["consensus"].items():
        assert torch.equal(resumed_algorithm.server["consensus"][key], value), key
    for client, previous in zip(full_algorithm.data.clients, full_previous):
        for key, value in previous.items(): assert torch.equal(client.state["previous"][key], value), key


def test_a_reused_instance_starts_afresh():
    "Running the same object twice gives the same history: no consensus or teacher survives from the first run."
    fed, training = toy_federation(), LocalTraining(batch_size=16, lr=0.05)
    algorithm = make()
    seed_everything(0); first = run_experiment(algorithm, fed, TinyNet(), rounds=2, training=training, progress=False)
    seed_everything(0); second = run_experiment(algorithm, fed, TinyNet(), rounds=2, training=training, progress=False)
    assert second.same_as(first)


def test_partial_participation_uses_the_participants_consensus():
    "With half the clients per round the consensus is the mean over that round's participants only, and the run is finite."
    fed, training = toy_federation(clients=6), LocalTraining(batch_size=16, lr=0.05)
    seed_everything(0)
    history = run_experiment(make(), fed, TinyNet(), rounds=3, training=training, fraction=0.5, progress=False)
    assert [r["num_participants"] for r in history.records] == [3, 3, 3]
    assert all(np.isfinite(r["accuracy_weighted"]) for r in history.records)


def test_runs_from_a_config(tmp_path):
    "FCCL+ runs through RunConfig/run on the embedded digits5lite benchmark with embedded public digits."
    data = FederatedData.from_benchmark(load_benchmark("digits5lite", train_per_class=6, test_per_class=6))
    config = RunConfig(dataset="digits5lite", algorithm="fcclplus", algorithm_kwargs={"public_size": 64, "public_batch_size": 32},
                       rounds=2, batch_size=16, lr=0.05, momentum=0.9, results_dir=str(tmp_path), device="cpu")
    history = run(config, data=data, progress=False)
    assert len(history) == 2 and np.isfinite(history[-1]["accuracy_domain_mean"])
    assert np.isfinite(history[-1]["collaboration_loss"])
    with pytest.raises(TypeError, match="public_sise"):
        run(RunConfig(dataset="digits5lite", algorithm="fcclplus", algorithm_kwargs={"public_sise": 64}, rounds=1,
                      results_dir=str(tmp_path), device="cpu"), data=data, progress=False)


def test_real_public_data():
    "CIFAR-10 (the nearest we have to the paper's CIFAR-100) as public data for a 1-channel federation: grey 28x28 images in [0, 1]."
    try: images = load_public_images("cifar10", 32, (1, 28, 28), seed=0)
    except DatasetNotFoundError as error: pytest.skip(f"CIFAR-10 not available: {error}")
    assert images.shape == (32, 1, 28, 28) and 0 <= images.min() and images.max() <= 1
