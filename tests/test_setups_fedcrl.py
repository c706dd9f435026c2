"""Every column of FedCRL's Tables II and III, at every scale: the clients the notebook would build, on label arrays of
the real data sizes (no images). These are the protocol's own functions (`column_pool`, `column_partition`), the ones
the notebook's runs use through their RunConfig."""
import numpy as np
import pytest

from fedlearn_nb.partition import is_disjoint, split_train_test
from fedlearn_nb.tools.protocols import fedcrl

COLUMNS, SCALES = fedcrl.COLUMNS, fedcrl.SCALES


def merged(per_class_train: int, per_class_test: int, num_classes: int) -> np.ndarray:
    "The merged (train + test) labels of a balanced data set: the order of the real files (train first)."
    return np.concatenate([np.repeat(np.arange(num_classes), per_class_train), np.repeat(np.arange(num_classes), per_class_test)])


# The real sizes: CIFAR-10 50,000 / 10,000; our CIFAR-10 copy 10,000 / 10,000 (1,000 training images per class);
# EMNIST balanced 112,800 / 18,800 (47 classes); CIFAR-100 50,000 / 10,000.
LABELS = {
    "cifar10": merged(5000, 1000, 10),
    "cifar10-ours": merged(1000, 1000, 10),
    "emnist": merged(2400, 400, 47),
    "cifar100": merged(500, 100, 100),
}
TRAIN = {"cifar10": 50_000, "cifar10-ours": 10_000, "emnist": 112_800, "cifar100": 50_000}   # the train split leads the merged labels
SIZES = {"cifar10": 60_000, "cifar10-ours": 20_000, "emnist": 131_600, "cifar100": 60_000}


def cases():
    "(scale, column, labels key) for every column each scale runs, on every label array the column's data can be."
    out = []
    for scale, spec in SCALES.items():
        if scale == "smoke": continue
        for column, (_, dataset, *_rest) in COLUMNS.items():
            for key in ([dataset, "cifar10-ours"] if dataset == "cifar10" else [dataset]):
                out.append(pytest.param(scale, column, key, id=f"{scale}-{column}-{key}"))
    return out


def test_real_label_arrays_have_the_real_sizes():
    assert {k: len(v) for k, v in LABELS.items()} == SIZES
    assert np.bincount(LABELS["cifar10"]).tolist() == [6000] * 10 and np.bincount(LABELS["emnist"]).tolist() == [2800] * 47


def check_clients(labels, parts, note, column, scale, seed):
    "The sizes and class coverage the paper's set-up states, for one column's clients."
    _, dataset, setting, n, params = COLUMNS[column]
    settings = fedcrl.column_settings(column, scale)
    num_classes = len(np.unique(labels))
    assert len(parts) == settings["num_clients"] == SCALES[scale]["num_clients"][n]
    assert is_disjoint(parts) and sum(map(len, parts)) == len(labels)            # every sample on exactly one client
    held = np.stack([np.bincount(labels[p], minlength=num_classes) > 0 for p in parts])   # (K, C)
    assert held.any(0).all(), f"classes on no client: {np.flatnonzero(~held.any(0))}"      # every class is used
    if settings["test"] == "split":
        train, test = split_train_test(parts, 0.25, seed=seed)
        assert min(map(len, test)) >= 1 and min(map(len, train)) >= 1             # every client has a test split
        assert all(len(t) == -(-len(p) // 4) for t, p in zip(test, parts))        # 25 % of each client's data, rounded up
    if setting == "pathological":
        assert held.sum(1).tolist() == [params["classes_per_client"]] * len(parts)   # exactly its classes
        assert note == ""
    else:
        assert min(map(len, parts)) >= settings["min_size"]
        if note: assert "topped up" in note and min(map(len, parts)) == settings["min_size"]   # topped up to exactly the minimum


@pytest.mark.parametrize("scale,column,key", cases())
def test_every_column_can_be_built(scale, column, key):
    settings = fedcrl.column_settings(column, scale)
    labels = LABELS[key] if settings["test"] == "split" else LABELS[key][:TRAIN[key]]   # "whole": the clients share the train split
    pool = fedcrl.column_pool(labels, column, scale)
    pooled = labels[pool]
    num_classes = len(np.unique(labels))
    if settings["per_class"] is None: assert len(pool) == len(labels)
    else: assert np.bincount(pooled, minlength=num_classes).tolist() == [settings["per_class"]] * num_classes
    parts, note = fedcrl.column_partition(pooled, column, scale, seed=0)
    check_clients(pooled, parts, note, column, scale, seed=0)


def test_beta001_is_infeasible_without_the_top_up_and_recorded_with_it():
    "beta = 0.01 with 20 clients: no draw gives every client the minimum, so the split is topped up and says so."
    labels = LABELS["cifar10"]
    for scale in ("quick", "paper"):
        pooled = labels[fedcrl.column_pool(labels, "beta0.01", scale)]
        parts, note = fedcrl.column_partition(pooled, "beta0.01", scale, seed=0)
        assert "topped up" in note
        sizes = np.array([len(p) for p in parts])
        assert sizes.min() == fedcrl.column_settings("beta0.01", scale)["min_size"]
        classes = [len(np.unique(pooled[p])) for p in parts]
        assert np.median(classes) <= 2                        # beta = 0.01: a client holds one class or two


def test_quick_seeds_and_columns():
    "Below paper scale the headline (CIFAR-10) columns run every seed, the others the first; quick's cuts are smaller than the paper's."
    seeds = fedcrl.column_seeds
    assert seeds("path-cifar10", [0, 1, 2], "quick") == [0, 1, 2] and seeds("beta0.01", [0, 1, 2], "quick") == [0, 1, 2]
    assert seeds("prac-cifar10", [0, 1, 2], "quick") == [0, 1, 2, 3, 4]          # its own 5 seeds, unless the parameter names others
    assert seeds("prac-cifar10", [0, 1, 2], "quick", chosen=True) == [0, 1, 2]
    assert seeds("prac-emnist", [0, 1, 2], "quick") == [0] and seeds("classes50", [0, 1, 2], "quick") == [0]
    assert seeds("classes50", [0, 1, 2, 3, 4], "paper") == [0, 1, 2, 3, 4]     # the paper's 5 runs on every column
    assert SCALES["quick"]["seeds"] == "0,1,2" and SCALES["paper"]["seeds"] == "0,1,2,3,4"
    for column in COLUMNS:
        quick, paper = fedcrl.column_settings(column, "quick"), fedcrl.column_settings(column, "paper")
        assert quick["rounds"] < paper["rounds"] and quick["num_clients"] == paper["num_clients"]
        assert paper["per_class"] is None and paper["eval_every"] == 1


def test_smoke_columns_on_the_embedded_digits():
    from fedlearn_nb.data import load_dataset
    labels = load_dataset("digits", split="all").y.numpy()
    for column in SCALES["smoke"]["columns"]:
        pooled = labels[fedcrl.column_pool(labels, column, "smoke")]
        assert len(pooled) == 200
        parts, note = fedcrl.column_partition(pooled, column, "smoke", seed=0)
        check_clients(pooled, parts, note, column, "smoke", seed=0)


def test_the_runs_get_these_clients_from_their_config(tmp_path):
    "The clients a run builds from its RunConfig alone are the ones column_partition cuts from the labels (same sizes, same classes)."
    from fedlearn_nb.experiment import build_federated_data
    protocol = fedcrl.Protocol.from_parameters(scale="smoke", results_dir=str(tmp_path))
    labels = protocol.data("cifar10").y.numpy()
    for column in SCALES["smoke"]["columns"]:
        pooled = labels[fedcrl.column_pool(labels, column, "smoke")]
        parts, _ = fedcrl.column_partition(pooled, column, "smoke", seed=0)
        fed = build_federated_data(protocol.config(column, "FedCRL", 0))
        assert fed.name == f"digits/all-{column}"
        held = [np.sort(np.concatenate([c.y_train.numpy(), c.y_test.numpy()])) for c in fed.clients]
        assert [h.tolist() for h in held] == [np.sort(pooled[p]).tolist() for p in parts]


@pytest.mark.parametrize("column", ["prac-N100", "path-N100"])
def test_quick_n100_clients_take_at_least_five_local_steps(column):
    """N = 100 at quick: every client takes >= 5 optimizer steps a round (one epoch, batches of 16), so FedProx's proximal
    term, whose gradient is zero at a round's first step, acts; computed from the settings, on our CIFAR-10's labels, every quick seed."""
    labels = LABELS["cifar10-ours"]
    pooled = labels[fedcrl.column_pool(labels, column, "quick")]
    assert len(pooled) == 20_000                                                   # the whole merged set: about 200 images per client
    for seed in fedcrl.parse_seeds(None, SCALES["quick"]["seeds"]):
        parts, _ = fedcrl.column_partition(pooled, column, "quick", seed=seed)
        train, _ = split_train_test(parts, 0.25, seed=seed)
        steps = [fedcrl.local_steps(len(t), "quick") for t in train]
        assert min(steps) >= 5, (seed, min(steps))
    assert fedcrl.local_steps(65, "quick") == 4 and fedcrl.local_steps(66, "quick") == 5   # 66 = 4 x 16 + 2: a trailing 1 would join the 4th


def test_quick_practical_cifar10_tests_on_the_whole_test_split():
    """Quick's practical CIFAR-10 column: clients share the train split (75 per class: about 37 training images per client,
    as the merged cut gave) and each tests on its class-proportional share of all 10,000 test images; 5 seeds."""
    settings = fedcrl.column_settings("prac-cifar10", "quick")
    assert (settings["test"], settings["seeds"]) == ("whole", 5)
    train = LABELS["cifar10-ours"][:TRAIN["cifar10-ours"]]
    test = LABELS["cifar10-ours"][TRAIN["cifar10-ours"]:]
    pooled = train[fedcrl.column_pool(train, "prac-cifar10", "quick")]
    for seed in range(5):
        parts, _ = fedcrl.column_partition(pooled, "prac-cifar10", "quick", seed=seed)
        shares = fedcrl.test_shares([pooled[p] for p in parts], test, seed=seed)
        assert sum(map(len, shares)) == 10_000 and is_disjoint(shares)             # every test image, once
        assert min(map(len, shares)) >= 100                                        # one image moves a client's accuracy by <= 1 point
        for part, share in zip(parts, shares):
            held = np.bincount(pooled[part], minlength=10) / len(part)
            tested = np.bincount(test[share], minlength=10) / len(share)
            assert np.abs(held - tested).max() < 0.01                              # the client's own class proportions
