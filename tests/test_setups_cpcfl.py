"""Every data column of every CP-CFL table, at every scale: the clients the notebook would build, on label arrays of
the real datasets' sizes (no images). The scales, tasks, `client_partition` and `federation_setups` are the protocol's
(`fedlearn_nb.tools.protocols.cpcfl`), the code the notebook runs, not a copy."""
from functools import lru_cache

import numpy as np
import pytest

import fedlearn_nb.tools.protocols.cpcfl as protocol


def labels_of(counts) -> np.ndarray:
    "A label array with `counts[c]` samples of class c (only the sizes matter to a partition)."
    return np.repeat(np.arange(len(counts)), counts)


# Client datasets at their real sizes (shared/data/README.md; STL-10 and full CIFAR-10: the official splits).
MNIST = (labels_of([5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]),
         labels_of([980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]))
CLIENT_LABELS = {
    "mnist": MNIST,
    "cifar10": (labels_of([1000] * 10), labels_of([1000] * 10)),        # our subset: 1,000 training images per class
    "stl10": (labels_of([500] * 10), labels_of([800] * 10)),            # STL-10 labelled: 5,000 train, 8,000 test
}
FULL_CIFAR10 = (labels_of([5000] * 10), labels_of([1000] * 10))          # the paper's own CIFAR-10 client data
AVAILABLE = {"digits", "mnist", "cifar10", "fashion_mnist"}              # what our data folder (and Debian) holds
NOT_AVAILABLE = {"stl10", "emnist", "cifar100"}


@lru_cache(maxsize=1)
def digits_labels():
    from fedlearn_nb.data import load_dataset
    return load_dataset("digits", split="train").y.numpy(), load_dataset("digits", split="test").y.numpy()


def labels_for(task: str, full: bool = False):
    pre, _, client = protocol.TASKS[task]
    if client == "digits": return digits_labels()
    if client == "cifar10" and full: return FULL_CIFAR10
    return CLIENT_LABELS[client]


def chosen_task(tasks):
    "The notebook's choice for a column: the first task whose pre-training and client data are both present here."
    return next((t for t in tasks if {protocol.TASKS[t][0], protocol.TASKS[t][2]} <= AVAILABLE), None)


def check_federation(train_labels, test_labels, clients: int, seed: int):
    "Build one federation with the notebook's call and assert the paper's structure (Section 4.1)."
    partition = protocol.client_partition(train_labels, test_labels, clients, seed)
    assert len(partition.train) == len(partition.test) == clients
    sizes = np.bincount(partition.groups, minlength=3)
    assert len(sizes) == 3 and sizes.max() - sizes.min() <= 1 and sizes.sum() == clients     # three (equal) groups
    group_classes = {g: set() for g in range(3)}
    for k in range(clients):
        for indices, labels in ((partition.train[k], train_labels), (partition.test[k], test_labels)):
            assert len(indices) == 50 and indices.min() >= 0 and indices.max() < len(labels)
            classes, counts = np.unique(labels[indices], return_counts=True)
            assert sorted(counts.tolist()) == [5, 5, 20, 20]                           # 20/20/5/5 images
            group_classes[int(partition.groups[k])].update(classes.tolist())
        assert set(np.unique(train_labels[partition.train[k]])) == set(np.unique(test_labels[partition.test[k]]))
    assert [sorted(group_classes[g]) for g in range(3)] == [[0, 1, 2, 3], [3, 4, 5, 6], [6, 7, 8, 9]]
    assert set().union(*group_classes.values()) == set(range(10))                     # every class is held by someone
    return partition


@pytest.mark.parametrize("scale", ["smoke", "quick", "paper"])
def test_every_column_of_every_table_builds_or_says_why(scale):
    config = protocol.SCALES[scale]
    setups = protocol.federation_setups(config)
    assert {s["table"] for s in setups} >= {"3", "4", "5", "6", "A.13", "7", "8", "9", "10", "11", "B.14", "12"}
    built, skipped = 0, {}
    seeds = (0, 1, 2) if scale != "paper" else (0, 1, 2, 3, 4)
    for setup in setups:
        if setup["clients"] is None or not setup["tasks"]:
            assert setup["reason"], setup                                                 # never silently empty
            skipped[(setup["table"], setup["column"])] = setup["reason"]; continue
        task = chosen_task(setup["tasks"])
        for candidate in setup["tasks"]:                                                  # also the paper's own data, at their real sizes
            train, test = labels_for(candidate, full=protocol.TASKS[candidate][0] != "cifar10")
            for seed in (seeds if candidate == task and setup["table"] in ("3", "11") else seeds[:1]):
                check_federation(train, test, setup["clients"], seed)
                built += 1
        if task is None: skipped[(setup["table"], setup["column"])] = "skipped (data not available)"
        elif scale != "smoke" and protocol.task_title(task) != setup["paper_column"]:
            assert protocol.task_title(task) in ("CIFAR-10 to CIFAR-10", "CIFAR-10 to MNIST", "MNIST to MNIST", "Fashion-MNIST to MNIST")
    assert built > 0
    if scale == "quick":
        assert skipped[("5", "STL-10 to CIFAR-10")].startswith("skipped: no substitute")
        assert skipped[("5", "EMNIST to MNIST")].startswith("not run at quick scale")
        assert ("10", "STL-10 to STL-10, 60 clients") in skipped and ("10", "STL-10 to STL-10, 90 clients") in skipped
        assert ("10", "STL-10 to STL-10, 30 clients") not in skipped
    if scale == "paper":                                                                  # the paper's data we lack: skipped or substituted
        assert skipped[("5", "STL-10 to CIFAR-10")] == "skipped (data not available)"
        assert chosen_task(config["columns"]["STL-10 to STL-10"]) == "cifar10-to-cifar10"
        assert not any(k[0] == "10" for k in skipped)                                    # 15, 30, 60, 90 clients all run


def test_quick_main_comparison_is_the_papers_smallest_federation():
    quick, paper = protocol.SCALES["quick"], protocol.SCALES["paper"]
    assert quick["num_clients"] == 15 and 15 in paper["client_counts"]                    # Table 10's 15-client setting
    assert (quick["local_epochs"], quick["batch_size"], quick["lr"]) == (paper["local_epochs"], paper["batch_size"], paper["lr"])
    assert quick["exploration_rounds"] / quick["rounds"] == 10 / 40                      # the paper's 15 clients: T = 40, T_c = 10
    assert protocol.SAMPLES_PER_CLASS == (20, 20, 5, 5) and paper["num_clients"] == 60 and paper["rounds"] == 100
    assert paper["pretrain"] == dict(epochs=300, batch_size=500, max_samples=None) and paper["image_size"] == 96


def test_paper_sizes_need_shared_images_and_still_build():
    "60 and 90 clients draw 20-image classes from STL-10's 500 per class: images are shared between clients, as we read the paper."
    train, test = CLIENT_LABELS["stl10"]
    partition = check_federation(train, test, 90, seed=0)
    drawn = np.concatenate(partition.train)
    assert len(drawn) == 4500 and len(np.unique(drawn)) < len(drawn)


def test_client_partition_is_the_builders_draw():
    "The notebook draws its figure's partition with `client_partition`; the federation builder draws the same clients."
    import torch
    from fedlearn_nb.data import LabelledData
    from fedlearn_nb.federation import build_federation
    train_labels, test_labels = CLIENT_LABELS["mnist"]
    def indexed(labels):   # image i holds the number i
        return LabelledData(torch.arange(len(labels), dtype=torch.float32).reshape(-1, 1, 1, 1), torch.as_tensor(labels), list("0123456789"))
    for clients, seed in ((6, 0), (15, 3)):
        partition = protocol.client_partition(train_labels, test_labels, clients, seed)
        fed = build_federation(indexed(train_labels), "grouped_label_sets", clients, test=indexed(test_labels), seed=seed)
        assert [c.x_train.flatten().long().tolist() for c in fed] == [p.tolist() for p in partition.train]
        assert [c.x_test.flatten().long().tolist() for c in fed] == [p.tolist() for p in partition.test]
        assert [c.domain for c in fed] == [f"group {g}" for g in partition.groups]

def test_every_run_gets_its_clients_from_its_config(tmp_path):
    "A run config of the protocol's `Experiments` describes the clients `client_partition` draws: same groups, same labels in the same order, named after the task."
    import torch
    threads = torch.get_num_threads()
    try: study = protocol.Experiments(protocol.Protocol.from_parameters("smoke", results_dir=str(tmp_path)))
    finally: torch.set_num_threads(threads)                                               # it sets the notebook's threads: not this test's
    train, test, _ = study.task_data("digits-to-digits")
    for clients, seed in ((6, 0), (3, 2)):
        config = study.run_config("digits-to-digits", seed, clients, 2, "example", "ifca", dict(num_clusters=3))
        federation = study.federation(config)
        partition = protocol.client_partition(train.y.numpy(), test.y.numpy(), clients, seed)
        assert federation.name == f"digits-to-digits ({clients} clients)" and config.federation == {"name": federation.name}
        assert [c.y_train.tolist() for c in federation] == [train.y[p].tolist() for p in partition.train]
        assert [c.y_test.tolist() for c in federation] == [test.y[p].tolist() for p in partition.test]
        assert [c.domain for c in federation] == [f"group {g}" for g in partition.groups]
        assert tuple(federation.clients[0].x_train.shape[1:]) == (3, 8, 8)                  # encoder-ready: RGB at the scale's size
