"FPL, FedPLVM, FedPLCC and FedPCL beyond their chapters: checkpoint/resume of the prototype bank, runs through RunConfig, real data."
import numpy as np
import pytest
import torch

from fedlearn_nb.core import seed_everything, torch_generator
from fedlearn_nb.data import DatasetNotFoundError, load_benchmark
from fedlearn_nb.engine import LocalTraining
from fedlearn_nb.loop import run_experiment
from fedlearn_nb.experiment import RunConfig, run
from fedlearn_nb.federation import FederatedData
from fedlearn_nb.algorithms.fpl import FPL, cluster_class_vectors
from fedlearn_nb.algorithms.fedplvm import FedPLVM
from fedlearn_nb.algorithms.fedplcc import FedPLCC
from fedlearn_nb.algorithms.fedpcl import FedPCL, frozen_keys
from toys import TinyNet, crash_and_resume, toy_federation


@pytest.mark.parametrize("make", [FPL, lambda: FedPLVM(lambda_=1.0), lambda: FedPLCC(lambda1=1.0)], ids=["fpl", "fedplvm", "fedplcc"])
def test_resume_restores_the_prototype_bank(tmp_path, make):
    "A run interrupted after round 2 and resumed equals an uninterrupted one: the bank travels in the checkpoint."
    full_algorithm, full, _, resumed_algorithm, resumed = crash_and_resume(make, tmp_path)
    assert resumed.same_as(full)
    for key, value in full_algorithm.server["bank"].items():
        assert torch.equal(resumed_algorithm.server["bank"][key], value), key


def test_a_reused_instance_starts_without_a_bank():
    "Running the same algorithm object twice: the second run's round 1 is plain cross-entropy again (no stale bank)."
    fed, training = toy_federation(), LocalTraining(batch_size=16, lr=0.05)
    algorithm = FedPLCC(lambda1=1.0)
    seed_everything(0); first = run_experiment(algorithm, fed, TinyNet(), rounds=2, training=training, progress=False)
    seed_everything(0); second = run_experiment(algorithm, fed, TinyNet(), rounds=2, training=training, progress=False)
    assert second.same_as(first)


def test_algorithms_run_from_a_config(tmp_path):
    "Every method of this part runs through RunConfig/run on the embedded digits5lite benchmark (FedPCL on a frozen ResNet-18)."
    data = FederatedData.from_benchmark(load_benchmark("digits5lite", train_per_class=6, test_per_class=6))
    common = dict(dataset="digits5lite", rounds=2, batch_size=16, lr=0.05, momentum=0.9, results_dir=str(tmp_path), device="cpu")
    for algorithm, kwargs in [("fpl", {}), ("fedplvm", {"lambda_": 1.0}), ("fedplcc", {"lambda1": 1.0, "phi": 1.0}),
                              ("fedplcc", {"lambda1": 1.0, "prototype_weights": "ones", "contrast": False})]:
        history = run(RunConfig(algorithm=algorithm, algorithm_kwargs=kwargs, **common), data=data, progress=False)
        assert len(history) == 2 and np.isfinite(history[-1]["accuracy_domain_mean"])
        assert history[-1]["num_global_prototypes"] >= 10  # at least one per class
    config = RunConfig(algorithm="fedpcl", algorithm_kwargs={"average_models": True}, model="frozen_backbone_mlp",
                       model_kwargs={"backbone": "resnet18", "hidden_dims": [32]}, optimizer="adam", **{**common, "lr": 1e-3, "momentum": 0.0})
    history = run(config, data=data, progress=False)
    assert history.protocol == "global" and np.isfinite(history[-1]["accuracy_weighted"])
    trained = 512 * 32 + 32 + 32 * 10 + 10  # projection Linear(512, 32) and head Linear(32, 10)
    assert history[-1]["bytes_up"] > 5 * trained * 4  # the trained parameters and prototypes travel ...
    assert history[-1]["bytes_up"] < 5 * (trained * 4 + 10 * (32 * 4 + 8 * 2)) + 1  # ... and never the frozen backbone


def test_frozen_keys_of_a_frozen_backbone_model():
    from fedlearn_nb.models import build_model
    model = build_model("frozen_backbone_mlp", 10, 3, 32, backbone="resnet18", hidden_dims=(16,))
    frozen = frozen_keys(model)
    assert frozen and all(k.startswith("features.backbone.") for k in frozen)
    assert set(model.state_dict()) - set(frozen) == {"features.hidden.0.weight", "features.hidden.0.bias", "head.weight", "head.bias"}


def _real_digits():
    try:
        return load_benchmark("digit5", domains=["mnist", "usps"], image_size=32, train_per_class=10, test_per_class=20, seed=0)
    except DatasetNotFoundError as error:
        pytest.skip(f"MNIST/USPS not found under the settings' data root: {str(error).splitlines()[0]}")


def test_fedplcc_weights_count_real_samples(tmp_path):
    "On real MNIST + USPS: local FINCH* weights add up to each client's class counts, global weights to 1 per class."
    data = FederatedData.from_benchmark(_real_digits())
    algorithm = FedPLCC(lambda1=1.0)
    seed_everything(0)
    from fedlearn_nb.models import build_model
    history = run_experiment(algorithm, data, build_model("fedccl_cnn4", 10, 3, 32, seed=0), rounds=2,
                             training=LocalTraining(batch_size=16, lr=0.05, momentum=0.9), progress=False)
    assert [d for d in data.domains] == ["mnist", "usps"] and np.isfinite(history[-1]["accuracy_domain_mean"])
    bank = algorithm.server["bank"]
    totals = torch.zeros(10).index_add_(0, bank["prototype_labels"].cpu(), bank["prototype_weights"].cpu())
    assert torch.allclose(totals, torch.ones(10))
    client = data[0]
    features = torch.randn(len(client.y_train), 12, generator=torch_generator(1)).relu()
    _, labels, weights = cluster_class_vectors(features, client.y_train)
    assert torch.equal(torch.zeros(10).index_add_(0, labels, weights), torch.bincount(client.y_train, minlength=10).float())
