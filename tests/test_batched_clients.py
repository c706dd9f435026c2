"""Clients trained together (`client_batching="batched"`) give the history of clients trained one by one, to float rounding.

Losses are compared to a relative 1e-5. (With heavy momentum and many steps on these near-flat images, rounding
differences grow faster: max-pooling ties and ReLU kinks can route a gradient differently; the momentum cases here
are kept short.) Accuracies are counts of test examples: a prediction that sits on a tie between
two classes may fall either way under a change in the last bits, so each client's number correct may differ by one.
"""
import numpy as np
import pytest
import torch

from fedlearn_nb.experiment import RunConfig, run
from fedlearn_nb.federation import FederatedData

RTOL, ATOL = 1e-5, 1e-7


class Pooled:
    "Some domains' images in one labelled set (the data chapter's interface: x, y, classes, name)."
    def __init__(self, splits, classes): self.x, self.y, self.classes, self.name = torch.cat([s.x for s in splits]), torch.cat([s.y for s in splits]), classes, "digits"


# One xdist group: under `pytest -n 2 --dist loadgroup` this module's tests share a worker, so its module fixtures run once.
pytestmark = pytest.mark.xdist_group("batched_clients")


@pytest.fixture(scope="module")
def digits():
    "The embedded digits (40 training images per class and domain): two clients per domain, and eight uneven clients."
    data = pytest.importorskip("fedlearn_nb.data")
    torch.set_num_threads(1)
    benchmark = data.load_benchmark("digits5lite", train_per_class=8, test_per_class=6)
    even = FederatedData.from_benchmark(benchmark, clients_per_domain=2, seed=0)
    train = Pooled([d.train for d in benchmark.domains], benchmark.classes)
    test = Pooled([d.test for d in benchmark.domains], benchmark.classes)
    order = np.random.default_rng(0).permutation(len(train.y))                   # 400 images
    sizes = [9, 17, 40, 95, 33, 120, 50, 36]                                     # 1 to 8 batches of 16
    uneven = FederatedData.from_partition(train, np.split(order, np.cumsum(sizes)[:-1]), test=test, seed=0)
    return {"even": even, "uneven": uneven}


def config(tmp_path, name, **changes) -> RunConfig:
    values = dict(dataset="digits5lite", partition="domains", clients_per_domain=2, model="fedccl_cnn4", algorithm="fedavg",
                  rounds=2, local_epochs=1, batch_size=16, optimizer="sgd", lr=0.05, momentum=0.9, seed=0, device="cpu",
                  results_dir=str(tmp_path), name=name)
    return RunConfig(**{**values, **changes})


def assert_close(first, second):
    "The same history: losses to RTOL, bytes and participants exactly, each client's number correct to within one."
    a, b = first.to_frame(), second.to_frame()
    assert list(a.columns) == list(b.columns) and len(a) == len(b)
    for column in ("train_loss", "bytes_up", "bytes_down", "num_participants"):
        np.testing.assert_allclose(a[column], b[column], rtol=RTOL, atol=ATOL, err_msg=column)
    ca, cb = first.clients_frame(), second.clients_frame()
    assert ca["participated"].tolist() == cb["participated"].tolist()
    for column in ("train_loss", "test_loss"):
        np.testing.assert_allclose(ca[column], cb[column], rtol=RTOL, atol=ATOL, err_msg=column)
    assert (ca["correct"] - cb["correct"]).abs().max() <= 1


@pytest.mark.parametrize("which,changes", [
    ("even", dict(momentum=0.0)),
    ("even", dict(momentum=0.0, weight_decay=1e-3, fraction=0.6)),
    ("uneven", dict(momentum=0.0, local_epochs=2)),
    ("uneven", dict(local_steps=5, momentum=0.5)),
    ("uneven", dict(optimizer="adam", lr=0.003, momentum=0.0)),
    ("even", dict(optimizer="adamw", lr=0.003, momentum=0.0, weight_decay=1e-2, local_steps=4)),
])
def test_batched_history_equals_the_sequential_one(tmp_path, digits, which, changes):
    data = digits[which]
    sequential = run(config(tmp_path, "one-by-one", client_batching="sequential", **changes), resume=False, progress=False, data=data)
    batched = run(config(tmp_path, "together", client_batching="batched", **changes), resume=False, progress=False, data=data)
    assert_close(sequential, batched)


def test_auto_keeps_the_loop_on_a_cpu_and_the_same_seed_gives_the_same_history(tmp_path, digits):
    "On a CPU 'auto' is the loop, bit for bit (the chapters' exact invariants rest on it); 'batched' agrees to rounding."
    data = digits["uneven"]
    auto = run(config(tmp_path, "auto", rounds=2), resume=False, progress=False, data=data)
    again = run(config(tmp_path, "auto-again", rounds=2), resume=False, progress=False, data=data)
    sequential = run(config(tmp_path, "sequential", rounds=2, client_batching="sequential"), resume=False, progress=False, data=data)
    batched = run(config(tmp_path, "batched", rounds=2, client_batching="batched"), resume=False, progress=False, data=data)
    assert auto.same_as(again) and auto.same_as(sequential)
    assert_close(sequential, batched)


@pytest.mark.parametrize("changes,reason", [
    (dict(algorithm="fedprox", algorithm_kwargs={"mu": 0.01}), "replaces the client hooks ['begin_local', 'loss']"),
    (dict(algorithm="moon"), "replaces the client hooks"),
    (dict(model="fedcrl_cnn"), "dropout"),
    (dict(model="resnet10"), "BatchNorm"),
])
def test_what_cannot_be_batched_runs_one_by_one_and_a_forced_batch_says_why(tmp_path, digits, changes, reason):
    data = digits["even"]
    forced = config(tmp_path, "forced", rounds=1, client_batching="batched", **changes)
    with pytest.raises(ValueError, match="client_batching='batched' cannot train these clients together") as error:
        run(forced, resume=False, progress=False, data=data)
    assert reason in str(error.value)
    if changes.get("model") == "resnet10": return  # slow to train here; the refusal is what is checked
    auto = run(config(tmp_path, "auto", rounds=1, local_steps=2, **changes), resume=False, progress=False, data=data)
    sequential = run(config(tmp_path, "sequential", rounds=1, local_steps=2, client_batching="sequential", **changes),
                     resume=False, progress=False, data=data)
    assert auto.same_as(sequential)                        # bit for bit: "auto" kept the loop


def test_the_setting_is_checked_and_does_not_name_the_run(tmp_path):
    with pytest.raises(ValueError, match="client_batching must be one of"): RunConfig(client_batching="threads")
    assert config(tmp_path, None, client_batching="sequential").run_name == config(tmp_path, None).run_name
