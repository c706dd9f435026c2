"The papers' partitions on the real label vectors (MNIST, CIFAR-10, Office-Caltech-10); skipped when the data is absent."
import gzip
from pathlib import Path

import numpy as np
import pytest

from fedlearn_nb.core import load_settings
from fedlearn_nb.partition import (is_disjoint, partition_dirichlet, partition_domains, partition_grouped_label_sets,
                                   partition_pathological, partition_pmix, partition_stats, split_train_test)

DATA = Path(load_settings().data_root)


def _need(*paths: Path) -> None:
    missing = [str(p) for p in paths if not p.is_file()]
    if missing: pytest.skip(f"data file(s) not found: {missing}; set data_root in settings.ini (see shared/data/README.md)")


def _idx_labels(path: Path) -> np.ndarray:
    "Labels from an IDX1 file: 8 header bytes, then one uint8 per sample."
    with gzip.open(path, "rb") as handle: data = handle.read()
    assert int.from_bytes(data[:4], "big") == 2049, f"{path} is not an IDX1 label file"
    return np.frombuffer(data, dtype=np.uint8, offset=8).astype(np.int64)


# One xdist group: under `pytest -n 2 --dist loadgroup` this module's tests share a worker, so its module fixtures run once.
pytestmark = pytest.mark.xdist_group("partition_real")


@pytest.fixture(scope="module")
def mnist_all() -> np.ndarray:
    "MNIST train + test labels, concatenated as CCFC does (70,000)."
    train, test = DATA / "mnist/train-labels-idx1-ubyte.gz", DATA / "mnist/t10k-labels-idx1-ubyte.gz"
    _need(train, test)
    return np.concatenate([_idx_labels(train), _idx_labels(test)])


@pytest.mark.parametrize("p", [0.0, 0.25, 0.5, 0.75])
def test_ccfc_pmix_on_mnist(mnist_all, p):
    parts = partition_pmix(mnist_all, p, seed=20)
    assert [len(x) for x in parts] == [7000] * 10                 # s = N / m
    assert is_disjoint(parts) and sum(map(len, parts)) == 70_000  # every image on exactly one client
    counts = partition_stats(mnist_all, parts).drop(columns="total").to_numpy()
    assert np.all(np.diag(counts) >= round(p * 7000))
    off_diagonal = counts[~np.eye(10, dtype=bool)]
    if p == 0: assert counts.min() > 500                        # IID: every class on every client
    else: assert np.diag(counts).min() > off_diagonal.max()


def test_ccfc_pmix_p1_is_one_class_per_client(mnist_all):
    parts = partition_pmix(mnist_all, 1.0)
    assert [len(x) for x in parts] == np.bincount(mnist_all).tolist()   # the class sizes, 6903, 7877, ...
    assert all(set(mnist_all[x]) == {l} for l, x in enumerate(parts))


def test_fedccl_dirichlet_on_mnist(mnist_all):
    labels = mnist_all[:60_000]
    parts = partition_dirichlet(labels, 10, alpha=0.05, seed=0)
    assert is_disjoint(parts) and sum(map(len, parts)) == 60_000 and min(map(len, parts)) >= 10
    shares = partition_stats(labels, parts).drop(columns="total").to_numpy() / np.bincount(labels)
    assert shares.max(0).mean() > 0.6                            # alpha = 0.05: classes concentrate on a client


def test_fedcrl_practical_and_pathological_on_mnist(mnist_all):
    practical = partition_dirichlet(mnist_all, 20, alpha=0.1, seed=1)
    train, test = split_train_test(practical, 0.25, seed=1)
    assert is_disjoint(train + test) and sum(map(len, train + test)) == 70_000
    assert all(len(t) == -(-len(p) // 4) for t, p in zip(test, practical))   # ceil(n / 4) each
    pathological = partition_pathological(mnist_all, 20, 2, seed=1)
    present = (partition_stats(mnist_all, pathological).drop(columns="total").to_numpy() > 0).sum(1)
    assert present.tolist() == [2] * 20 and is_disjoint(pathological)


def test_cpcfl_groups_on_cifar10():
    train_file, test_file = DATA / "cifar10/cifar10_train_1000perclass.npz", DATA / "cifar10/cifar10_test.npz"
    _need(train_file, test_file)
    train_labels, test_labels = np.load(train_file)["y"], np.load(test_file)["y"]
    split = partition_grouped_label_sets(train_labels, 60, test_labels=test_labels, seed=0)
    assert np.bincount(split.groups).tolist() == [20, 20, 20]
    for client in range(60):
        counts = np.bincount(train_labels[split.train[client]], minlength=10)
        assert counts[split.client_classes[client]].tolist() == [20, 20, 5, 5] and counts.sum() == 50
        assert np.array_equal(np.bincount(test_labels[split.test[client]], minlength=10), counts)
    assert {tuple(sorted(c.tolist())) for c in split.client_classes} == {(0, 1, 2, 3), (3, 4, 5, 6), (6, 7, 8, 9)}


def test_domains_on_office_caltech10():
    files = [DATA / f"office_caltech10/{d}_64x64.npz" for d in ("amazon", "caltech", "dslr", "webcam")]
    _need(*files)
    domain_labels = [np.load(f)["y"] for f in files]
    balanced = partition_domains(domain_labels, seed=0)              # the most every domain can give: 8 (dslr mugs)
    assert [len(p) for p in balanced] == [80] * 4
    with pytest.raises(ValueError, match="use at most 8"):
        partition_domains(domain_labels, samples_per_class=30)       # FedPLCC's "about 300" cannot hold for DSLR
    imbalanced = partition_domains(domain_labels, samples_per_class=30, alpha=0.5, seed=0)
    for labels, part in zip(domain_labels, imbalanced):
        assert len(np.unique(part)) == len(part) and part.max() < len(labels)
    assert len({len(p) for p in imbalanced}) > 1


@pytest.fixture(scope="module")
def cifar10_merged() -> np.ndarray:
    "Our CIFAR-10 copy's labels, train (1,000 per class) + test (1,000 per class), merged as FedCRL does (20,000)."
    train_file, test_file = DATA / "cifar10/cifar10_train_1000perclass.npz", DATA / "cifar10/cifar10_test.npz"
    _need(train_file, test_file)
    return np.concatenate([np.load(train_file)["y"], np.load(test_file)["y"]]).astype(np.int64)


def test_fedcrl_beta001_needs_the_top_up_on_cifar10(cifar10_merged):
    "beta = 0.01, 20 clients: PFLlib's capped split re-drawn 100 times never gives every client 40; top_up does, and says so."
    settings = dict(min_partition_size=40, self_balancing=True, max_retries=100, seed=0)
    with pytest.raises(ValueError, match="top_up=True"):
        partition_dirichlet(cifar10_merged, 20, alpha=0.01, **settings)
    with pytest.warns(UserWarning, match="topped up"):
        parts = partition_dirichlet(cifar10_merged, 20, alpha=0.01, top_up=True, **settings)
    sizes = np.array([len(p) for p in parts])
    assert sizes.min() == 40 and sizes.sum() == 20_000 and is_disjoint(parts)
    present = (partition_stats(cifar10_merged, parts).drop(columns="total").to_numpy() > 0).sum(1)
    assert np.median(present) <= 2                                   # a client holds one class or two
    feasible = partition_dirichlet(cifar10_merged, 20, alpha=0.1, **settings)   # beta = 0.1: a draw works, no top-up
    assert min(map(len, feasible)) >= 40


def test_fedcrl_pathological_cover_on_cifar10(cifar10_merged):
    "Fewer clients than classes (4 clients x 3 classes >= 10): 'cover' uses every class, 'random' may not."
    parts = partition_pathological(cifar10_merged, 4, 3, class_assignment_mode="cover", seed=0)
    counts = partition_stats(cifar10_merged, parts).drop(columns="total").to_numpy()
    assert (counts > 0).sum(1).tolist() == [3] * 4 and (counts > 0).any(0).all()
    assert sum(map(len, parts)) == 20_000                           # every class held, so every image used
