"CP-CFL beyond the chapters' inline tests: the engine's RunConfig path, the encoder cache on loaded data, and a real-data run."
import numpy as np
import pytest
import torch

from fedlearn_nb.data import DatasetNotFoundError, load_dataset
from fedlearn_nb.engine import LocalTraining, get_algorithm
from fedlearn_nb.experiment import RunConfig, build_federated_data, run
from fedlearn_nb.federation import build_federation
from fedlearn_nb.selfsupervised import PretrainConfig, load_encoder, pretrained_encoder, to_encoder_input
from fedlearn_nb.algorithms.cpcfl import CPCFL, run_method
from fedlearn_nb.algorithms.ifca import IFCA, cluster_identities

TINY = dict(epochs=1, batch_size=64, image_size=8, padding=1, max_samples=128)


# One xdist group: under `pytest -n 2 --dist loadgroup` this module's tests share a worker, so its module fixtures run once.
pytestmark = pytest.mark.xdist_group("cpcfl")


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits", split="train"), load_dataset("digits", split="test")


@pytest.fixture(scope="module")
def federation():
    "The paper's clients on the digits, as a run's configuration builds them (6 clients, 8x8 encoder input)."
    return build_federated_data(RunConfig(dataset="digits", partition="grouped_label_sets", num_clients=6, encoder_input={"image_size": 8}))


def test_registered_names():
    assert get_algorithm("ifca") is IFCA and get_algorithm("cpcfl") is CPCFL


def test_encoder_cache_loads_the_named_dataset(tmp_path):
    "Without images, the cache loads `config.dataset` itself (as bytes), pre-trains once, then reads the file."
    config = PretrainConfig(dataset="digits", split="train", **TINY)
    state, info = pretrained_encoder(config, cache_dir=tmp_path, device="cpu")
    assert not info["cached"] and info["path"].parent == tmp_path and info["path"].name.startswith("simclr-digits-")
    again, info_again = pretrained_encoder(config, cache_dir=tmp_path, device="cpu")
    assert info_again["cached"] and all(torch.equal(state[k], again[k]) for k in state)
    saved = load_encoder(info["path"])
    assert saved["config"]["dataset"] == "digits" and len(saved["losses"]) == 1 and saved["metadata"]["seed"] == 0


def test_run_config_runs_cpcfl_and_ifca(tmp_path, federation):
    "RunConfig(algorithm='cpcfl', encoder_path=...) runs through the engine's `run`, writes its folder and resumes."
    fed = federation
    _, info = pretrained_encoder(PretrainConfig(dataset="digits", split="train", **TINY), cache_dir=tmp_path / "encoders", device="cpu")
    common = dict(model="cpcfl_cnn", model_kwargs={"padding": 1}, rounds=3, optimizer="adam", lr=1e-3, batch_size=32,
                  results_dir=str(tmp_path), device="cpu", local_epochs=1)
    config = RunConfig(algorithm="cpcfl", algorithm_kwargs={"encoder_path": str(info["path"]), "exploration_rounds": 1}, **common)
    history = run(config, data=fed, progress=False)
    frame = history.to_frame()
    assert frame.exploration.tolist() == [1.0, 0.0, 0.0]
    assert (tmp_path / config.run_name / "history.csv").exists() and (tmp_path / config.run_name / "checkpoint.pt").exists()
    assert cluster_identities(history).shape == (6, 3)
    assert run(config, data=fed, progress=False).same_as(history)                       # finished: read back, not re-run
    ifca = run(RunConfig(algorithm="ifca", algorithm_kwargs={"num_clusters": 2}, **common), data=fed, progress=False)
    assert [c for c in ifca.to_frame() if c.startswith("cluster_size/")] == ["cluster_size/0", "cluster_size/1"]
    _, other = pretrained_encoder(PretrainConfig(dataset="digits", split="train", **{**TINY, "image_size": 28}),
                                  cache_dir=tmp_path / "encoders", device="cpu")
    with pytest.raises(ValueError, match="does not fit"):                              # an encoder for another input size
        run(RunConfig(algorithm="cpcfl", algorithm_kwargs={"encoder_path": str(other["path"])}, **common), data=fed, progress=False)


def test_same_seed_same_history(federation):
    fed = federation
    training = LocalTraining(epochs=1, batch_size=32, optimizer="adam", lr=1e-3)
    first, _ = run_method("ifca", fed, 3, training, seed=3, model_kwargs={"padding": 1})
    second, _ = run_method("ifca", fed, 3, training, seed=3, model_kwargs={"padding": 1})
    other, _ = run_method("ifca", fed, 3, training, seed=4, model_kwargs={"padding": 1})
    assert first.same_as(second) and not first.same_as(other)


def test_grouped_federation_protocol(digits, federation):
    "The paper's clients: 3 groups x 4 classes (overlapping by one), 20/20/5/5 train and test images, encoder-ready images."
    fed = federation
    assert fed.image_shape == (3, 8, 8) and fed.num_classes == 10
    assert [c.domain for c in fed] == ["group 0", "group 0", "group 1", "group 1", "group 2", "group 2"]
    counts, test_counts = fed.class_counts(), fed.class_counts("test")
    assert (counts == test_counts).all()
    for client in fed:
        present = np.flatnonzero(counts[client.id])
        assert present.tolist() == [[0, 1, 2, 3], [3, 4, 5, 6], [6, 7, 8, 9]][int(client.domain[-1])]
        assert sorted(counts[client.id][present].tolist()) == [5, 5, 20, 20]
    with pytest.raises(ValueError, match="fewer than num_groups"):
        build_federation(*digits[:1], "grouped_label_sets", 2, test=digits[1])


def test_mnist_cpcfl_finds_the_groups(tmp_path):
    "Real data: on MNIST, CP-CFL with a briefly pre-trained SimCLR encoder finds the three planted groups and beats FedAvg."
    try:
        train, test = load_dataset("mnist"), load_dataset("mnist", split="test")
    except DatasetNotFoundError as error:
        pytest.skip(f"MNIST is not under the settings' data root: {str(error).splitlines()[0]}")
    torch.set_num_threads(1)
    # 3 epochs over 4,096 images: 2 over 2,048 left the encoder at the edge, where a processor's rounding decided the
    # clusters (on an AVX-512 machine the run stayed at ARI 0.44); with this one the groups are found by round 6 with
    # torch's AVX-512 kernels and with its AVX2 ones (ATEN_CPU_CAPABILITY=avx2) alike
    config = PretrainConfig(dataset="mnist", split="train", epochs=3, batch_size=256, image_size=16, padding=1, max_samples=4096)
    _, info = pretrained_encoder(config, train.x, device="cpu", cache_dir=tmp_path)
    fed = build_federation(train, "grouped_label_sets", 6, test=test, transform=lambda x: to_encoder_input(x, 16), seed=0)
    training = LocalTraining(epochs=3, batch_size=32, optimizer="adam", lr=1e-3)
    cpcfl, _ = run_method("cpcfl-simclr", fed, 12, training, exploration_rounds=2, encoder_path=info["path"], model_kwargs={"padding": 1})
    fedavg, _ = run_method("fedavg", fed, 12, training, model_kwargs={"padding": 1})
    cp, fa = cpcfl.to_frame(), fedavg.to_frame()
    assert cp.cluster_ari.iloc[-1] == 1.0 and cp.clustering_failure.sum() == 0, cp
    assert cp.accuracy_mean.iloc[-1] > 0.7 and cp.accuracy_mean.iloc[-1] > fa.accuracy_mean.iloc[-1] + 0.2, (cp.accuracy_mean, fa.accuracy_mean)
