"FedProto, FedProc, FedCCL and FedCCL+/FedAvg+ end to end: by name through RunConfig/run on the embedded data, and on real data when present."
import warnings

import numpy as np
import pytest
import torch

from fedlearn_nb.adversarial import robustness_report
from fedlearn_nb.data import DatasetNotFoundError, load_benchmark, load_dataset, subsample_per_class
from fedlearn_nb.engine import LocalTraining, get_algorithm
from fedlearn_nb.loop import CHECKPOINT_NAME, run_experiment
from fedlearn_nb.experiment import RunConfig, run, run_folder
from fedlearn_nb.federation import FederatedData
from fedlearn_nb.models import build_model
from fedlearn_nb.partition import partition_dirichlet
import fedlearn_nb.algorithms.fedccl as fedccl


# One xdist group: under `pytest -n 2 --dist loadgroup` this module's tests share a worker, so its module fixtures run once.
pytestmark = pytest.mark.xdist_group("fedccl")


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    "Small models on a shared CPU: one torch thread (restored afterwards)."
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def small_config(algorithm, tmp_path, **algorithm_kwargs):
    return RunConfig(dataset="digits5lite", data_kwargs={"train_per_class": 8, "test_per_class": 10}, model="fedccl_cnn5",
                     algorithm=algorithm, algorithm_kwargs=algorithm_kwargs, rounds=2, batch_size=32, optimizer="adam", lr=1e-3,
                     device="cpu", results_dir=str(tmp_path))


@pytest.mark.parametrize("algorithm, kwargs", [("fedproto", {}), ("fedproc", {"rounds": 2}), ("fedccl", {}),
                                               ("fedcclplus", {"attack_steps": 1}), ("fedavgplus", {"attack_steps": 1})])
def test_by_name_on_the_embedded_benchmark(tmp_path, algorithm, kwargs):
    config = small_config(algorithm, tmp_path, **kwargs)
    history = run(config, progress=False)
    frame = history.to_frame()
    assert frame["round"].tolist() == [1, 2]
    assert {f"accuracy/{d}" for d in ("mnist_like", "usps_like", "svhn_like", "synth_like", "mnistm_like")} <= set(frame.columns)
    if algorithm in ("fedccl", "fedcclplus"):
        assert (frame["num_local_signals"] >= 5 * 10).all()  # every client holds every class: at least one signal each
    if algorithm in ("fedproto", "fedproc"):
        assert (frame["num_prototypes"] == 10).all()
    assert (run_folder(config) / CHECKPOINT_NAME).exists()
    again = run(config, progress=False)  # finished: read back from the run folder
    assert again.same_as(history)


def test_adversarial_variants_are_fedccl_with_options():
    assert get_algorithm("fedcclplus") is fedccl.FedCCLPlus and get_algorithm("fedavgplus") is fedccl.FedAvgPlus
    plus = fedccl.FedAvgPlus(epsilon=0.2)
    assert (plus.adversarial, plus.use_local, plus.use_global, plus.attack.epsilon) == (True, False, False, 0.2)
    with pytest.raises(ValueError, match="attack_steps must be an integer >= 1"): fedccl.FedCCLPlus(attack_steps=0)


@pytest.mark.parametrize("make", [lambda **budget: fedccl.FedCCL(adversarial=True, **budget), lambda **budget: fedccl.FedCCLPlus(**budget),
                                  lambda **budget: fedccl.FedAvgPlus(**budget)])
@pytest.mark.parametrize("budget, message", [({"epsilon": float("inf")}, "epsilon must be a finite number"),
                                             ({"attack_steps": 2.5}, "attack_steps must be an integer >= 1"),
                                             ({"step_size": -0.1}, "step_size must be positive"),
                                             ({"clip": (1.0, 0.0)}, "clip must be \\(low, high\\) with low < high"),
                                             ({"epsilom": 0.3}, "unknown keyword 'epsilom' \\(did you mean 'epsilon'\\?\\)")])
def test_a_bad_attack_budget_is_refused_when_the_algorithm_is_made(make, budget, message):
    "One PGDSettings checks the budget of FedCCL, FedCCL+ and FedAvg+ at construction, not in the first training batch."
    with pytest.raises((ValueError, TypeError), match=message): make(**budget)


def test_the_attack_keywords_keep_run_names_and_fingerprints():
    "Configs that give the budget by keyword keep their run folders, and the algorithms record the budget field by field as before."
    from fedlearn_nb.adversarial import PGDSettings
    config = RunConfig(dataset="mnist", partition="dirichlet", partition_kwargs={"alpha": 0.05}, num_clients=10, algorithm="fedcclplus",
                       algorithm_kwargs={"epsilon": 0.3, "attack_steps": 10}, rounds=50, seed=1)
    assert config.run_name == "mnist-fedcclplus-seed1-b0008ee9"
    assert RunConfig(algorithm="fedavgplus", algorithm_kwargs={"epsilon": 8 / 255, "attack_steps": 3, "clip": None}).run_name == \
        "digits5lite-fedavgplus-seed0-684b88a8"
    recorded = {"bn": "average", "weighting": "samples", "tau": 0.07, "use_local": True, "use_global": True, "local_signal": "cluster",
                "global_signal": "cluster", "finch_level": -1, "adversarial": True, "epsilon": 0.3, "attack_steps": 5, "step_size": None,
                "random_start": True, "clip": (0.0, 1.0)}
    assert list(fedccl.FedCCLPlus(epsilon=0.3, attack_steps=5).hyperparameters().items()) == list(recorded.items())
    assert fedccl.FedCCLPlus(attack=PGDSettings(epsilon=0.3, attack_steps=5)).hyperparameters() == recorded
    assert fedccl.FedAvgPlus(epsilon=0.1, clip=[0, 1]).hyperparameters() == {
        **recorded, "use_local": False, "use_global": False, "epsilon": 0.1, "attack_steps": 10, "clip": (0, 1)}


def test_signal_kinds_are_refused_by_one_check_with_one_message():
    "The two signal functions and FedCCL's options refuse a wrong kind alike: one check, naming the parameter and both kinds."
    points, labels = torch.zeros(2, 3), torch.zeros(2, dtype=torch.long)
    refusals = []
    for attempt in (lambda: fedccl.local_clustered_signals(points, labels, signal="median"),
                    lambda: fedccl.global_clustered_signals(points, labels, signal="median"),
                    lambda: fedccl.FedCCL(local_signal="median"), lambda: fedccl.FedCCLPlus(global_signal="median")):
        with pytest.raises(ValueError) as error: attempt()
        refusals.append(str(error.value))
    assert refusals[0] == refusals[1] and refusals[0].startswith("signal must be 'cluster'") and "'average'" in refusals[0]
    assert refusals[2:] == ["local_signal" + refusals[0][len("signal"):], "global_signal" + refusals[0][len("signal"):]]


def mnist_federation(num_train=3000, num_test=1000, seed=0):
    try: train, test = load_dataset("mnist", split="train"), load_dataset("mnist", split="test")
    except DatasetNotFoundError as error: pytest.skip(f"MNIST not found: {str(error).splitlines()[0]}")
    train = train.subset(subsample_per_class(train.y.numpy(), total=num_train, seed=seed))
    test = test.subset(subsample_per_class(test.y.numpy(), total=num_test, seed=seed))
    parts = partition_dirichlet(train.y.numpy(), 5, 0.5, seed=seed)
    return FederatedData.from_partition(train, parts, test=test, seed=seed), test


def test_fedccl_learns_real_mnist_and_is_attackable():
    data, test = mnist_federation()
    model = build_model("fedccl_cnn4", 10, 1, 28, seed=0)
    algorithm = fedccl.FedCCL()
    history = run_experiment(algorithm, data, model, rounds=3, training=LocalTraining(batch_size=32, lr=0.05, momentum=0.5), progress=False)
    frame = history.to_frame()
    assert frame["accuracy_weighted"].iloc[-1] > 0.6, frame
    assert (frame["local_signals_per_class"] > 1).any()  # FINCH finds several clusters per class on real digits
    assert torch.equal(algorithm.server["global_signal_labels"], torch.arange(10))
    from fedlearn_nb.engine import set_parameters
    set_parameters(model, algorithm.server["params"])
    report = robustness_report(model, test.x, test.y, epsilon=0.3, pgd_steps=10)
    assert report["clean"] > 0.6 and report["fgsm"] < report["clean"] and report["pgd10"] < report["clean"]


def test_fedccl_on_the_real_digit5_domains_present():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try: benchmark = load_benchmark("digit5", missing="skip", train_per_class=10, test_per_class=10)
        except DatasetNotFoundError as error: pytest.skip(f"no Digit-5 domain found: {str(error).splitlines()[0]}")
    data = FederatedData.from_benchmark(benchmark)
    history = run_experiment(fedccl.FedCCL(), data, build_model("fedccl_cnn5", 10, 3, 32, seed=0), rounds=2,
                             training=LocalTraining(batch_size=32, optimizer="adam", lr=1e-3), progress=False)
    frame = history.to_frame()
    assert {f"accuracy/{d.name}" for d in benchmark} <= set(frame.columns)
    assert np.isfinite(frame["train_loss"]).all() and (frame["num_local_signals"] >= 10 * len(benchmark)).all()
