"""Every data column of every CCFC table and figure, at every scale: the clients the notebook would build, on label
arrays of the real datasets' sizes (no images). The subset, the p-mix partition and the scales are the protocol module's
own (`fedlearn_nb.tools.protocols.ccfc`, which the notebook runs), not a copy."""
import numpy as np
import pytest

from fedlearn_nb.loop import disconnected_clients
from fedlearn_nb.tools.protocols import ccfc

P_VALUES = [0.0, 0.25, 0.5, 0.75, 1.0]


def labels_of(counts) -> np.ndarray:
    "A label array with `counts[c]` samples of class c, in class order (only the sizes matter to a partition)."
    return np.repeat(np.arange(len(counts)), counts)


MNIST_TRAIN = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
MNIST_TEST = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
# The clustering set is train + test merged. CIFAR-10: the paper's 60,000, and our files (1,000 per class of the
# training set + the full test set); STL-10: 5,000 train + 8,000 test labelled images (not in our data folder).
ALL_LABELS = {
    "mnist": labels_of(np.add(MNIST_TRAIN, MNIST_TEST)),                 # 70,000
    "fashion_mnist": labels_of([7000] * 10),                              # 70,000
    "cifar10": labels_of([6000] * 10),                                    # 60,000 (the paper's)
    "stl10": labels_of([1300] * 10),                                      # 13,000
}
OUR_FILES = {"cifar10": labels_of([2000] * 10)}                           # what the loader finds here: 20,000
NOT_AVAILABLE = {"stl10"}


def digits_labels() -> np.ndarray:
    from fedlearn_nb.data import load_dataset
    return load_dataset("digits", split="all").y.numpy()


def label_sets(scale: str) -> dict:
    "Each dataset of the scale with the label arrays to check: the paper's size and, where ours differ, our files'."
    if scale == "smoke": return {"digits": {"embedded": digits_labels()}}
    return {name: {"paper size": ALL_LABELS[name], **({"our files": OUR_FILES[name]} if name in OUR_FILES else {})}
            for name in ccfc.SCALES[scale]["datasets"]}


def check_federation(labels: np.ndarray, config: dict, p: float, seed: int) -> list:
    "The protocol's subset and p-mix split; asserts the paper's client count, sizes, class coverage and disjointness."
    subset = ccfc.clustering_subset(labels, config)
    chosen = labels[subset]
    if config["per_class"]: assert np.all(np.bincount(chosen, minlength=10) == config["per_class"])
    else: assert len(subset) == len(labels)
    parts = ccfc.client_partition(chosen, p, seed)
    assert len(parts) == 10                                              # m = k* = 10 clients, one per class
    every = np.concatenate(parts)
    assert len(np.unique(every)) == len(every) and every.min() >= 0 and every.max() < len(chosen)   # disjoint
    s = len(chosen) // 10
    if p == 1.0:                                                         # client l holds exactly class l
        for client, part in enumerate(parts):
            assert set(chosen[part].tolist()) == {client} and len(part) == np.sum(chosen == client)
    else:
        assert [len(part) for part in parts] == [s] * 10                 # s = |X| / m images each
        for client, part in enumerate(parts):
            assert np.sum(chosen[part] == client) >= round(p * s)         # p*s of its own class, the rest at random
        if p == 0.0:                                                     # IID: every client sees every class
            assert all(len(np.unique(chosen[part])) == 10 for part in parts)
    assert set(chosen[every].tolist()) == set(range(10))                 # every class is clustered
    return [chosen[part] for part in parts]


@pytest.mark.parametrize("scale", ["smoke", "quick", "paper"])
def test_every_column_of_tables_1_and_2(scale):
    config, seeds = ccfc.SCALES[scale], [0, 1, 2]
    record, built = {}, set()
    for name, arrays in label_sets(scale).items():
        for method in ccfc.METHODS:
            reason = ccfc.column_skip_reason(config, name, method)
            if name in NOT_AVAILABLE and not reason: reason = ccfc.DATA_NOT_AVAILABLE
            for p in P_VALUES:
                if method in ccfc.CENTRALISED and p != 0.0: continue                # KM, FCM: p = 0 rows only
                if reason: record[(name, method, p)] = reason; continue
                for size, labels in arrays.items():
                    for seed in seeds:
                        if method in ccfc.CENTRALISED:                                 # the pooled clustering set
                            subset = ccfc.clustering_subset(labels, config)
                            assert set(labels[subset].tolist()) == set(range(10))
                        elif (name, size, p, seed) not in built:                        # k-FED, FFCM, CCFC share it
                            check_federation(labels, config, p, seed); built.add((name, size, p, seed))
                record[(name, method, p)] = "runs"
    names = list(label_sets(scale))
    assert len(record) == len(names) * (2 + 6 * 5)
    for name in names:                                                  # the synthetic-data baselines run, or say why not
        for method in ccfc.SYNTHETIC:
            expected = ("skipped at quick" if scale == "quick" and name in ("cifar10", "stl10")
                        else ccfc.DATA_NOT_AVAILABLE if name in NOT_AVAILABLE else "runs")
            assert all(record[(name, method, p)].startswith(expected) for p in P_VALUES), (name, method)
    if scale == "quick":
        assert record[("mnist", "CCFC", 0.5)] == "runs" and record[("fashion_mnist", "FFCM", 1.0)] == "runs"
        assert record[("cifar10", "k-FED", 0.25)] == "runs" and record[("cifar10", "KM", 0.0)] == "runs"
        assert "ResNet-18" in record[("cifar10", "CCFC", 0.0)] and record[("mnist", "PPFC-GAN", 1.0)] == "runs"
        assert record[("stl10", "k-FED", 0.0)] == "skipped (data not available)"
    if scale == "paper":
        assert all(record[(name, "CCFC", p)] == "runs" for name in ("mnist", "fashion_mnist", "cifar10") for p in P_VALUES)


def test_client_sizes_are_the_papers_at_paper_scale_and_500_at_quick():
    paper, quick = ccfc.SCALES["paper"], ccfc.SCALES["quick"]
    mnist = check_federation(ALL_LABELS["mnist"], paper, 0.5, 0)
    assert [len(c) for c in mnist] == [7000] * 10 and all(np.sum(c == l) >= 3500 for l, c in enumerate(mnist))
    assert [len(c) for c in check_federation(ALL_LABELS["mnist"], paper, 1.0, 0)] == list(np.add(MNIST_TRAIN, MNIST_TEST))
    assert [len(c) for c in check_federation(ALL_LABELS["stl10"], paper, 0.25, 0)] == [1300] * 10
    assert [len(c) for c in check_federation(OUR_FILES["cifar10"], paper, 0.0, 0)] == [2000] * 10
    assert [len(c) for c in check_federation(ALL_LABELS["mnist"], quick, 0.75, 1)] == [500] * 10
    # the quick subset is fixed (drawn once), the partition follows the seed
    a, b = (ccfc.clustering_subset(ALL_LABELS["mnist"], quick) for _ in range(2))
    assert np.array_equal(a, b)
    chosen = ALL_LABELS["mnist"][a]
    assert not all(np.array_equal(x, y) for x, y in zip(ccfc.client_partition(chosen, 0.5, 0), ccfc.client_partition(chosen, 0.5, 1)))


@pytest.mark.parametrize("scale", ["smoke", "quick", "paper"])
def test_tables_3_4_and_figures_5_6_7(scale):
    "The secondary experiments' federations: first dataset, their p values; Figure 6's connected clients."
    config = ccfc.SCALES[scale]
    name, arrays = next(iter(label_sets(scale).items()))
    labels = next(iter(arrays.values()))
    clients = check_federation(labels, config, config["table4_p"], 0)             # Table 4 (and Table 3's encoders)
    ratios = [np.bincount(c, minlength=10).max() / np.bincount(c, minlength=10).min() for c in clients]
    assert all(np.isfinite(r) and r >= 1 for r in ratios)                         # IR defined: every client holds every class
    if scale == "paper": assert max(ratios) < 1.6                                 # the paper's IRs: 1.18 - 1.53
    for p in sorted(set(config["fig5_ps"]) | set(config["fig6_ps"]) | set(config["fig7_ps"])):
        check_federation(labels, config, p, 0)
    for rate in config["fig6_rates"]:
        offline = disconnected_clients(10, rate, 0)
        assert len(offline) == round(10 * rate) and len(set(range(10)) - set(offline.tolist())) >= 1
    assert set(config["fig5_ps"]) <= set(config["p_values"])                      # Figure 5 reuses Tables 1-2's runs
    if config["knn_per_class"]:                                                   # Table 3 at quick: subsets of MNIST's splits
        from fedlearn_nb.data import subsample_per_class
        train = subsample_per_class(labels_of(MNIST_TRAIN), per_class=config["knn_per_class"][0], seed=0)
        assert len(train) == 10 * config["knn_per_class"][0] and max(config["knn_ks"]) < len(train)


def test_quick_is_smaller_than_paper_and_paper_keeps_the_papers_settings():
    quick, paper = ccfc.SCALES["quick"], ccfc.SCALES["paper"]
    assert paper["ccfc"]["pretrain_rounds"] == 100 and paper["ccfc"]["rounds"] == 130 and paper["per_class"] is None
    assert paper["training"] == dict(optimizer="adam", lr=1e-3, momentum=0.0, batch_size=128, epochs=1)
    assert quick["ccfc"]["rounds"] < paper["ccfc"]["rounds"] and quick["per_class"] * 10 < 70000
    assert [ccfc.DATASET_SETUP[n]["lambda_"] for n in ("mnist", "fashion_mnist", "cifar10", "stl10")] == [0.001, 1.0, 0.1, 0.1]


def test_synthetic_baselines_keep_the_authors_gan_at_paper_scale_and_shrink_it_below():
    "SDA-FC / PPFC-GAN: the authors' DCGAN and schedule at paper scale; smaller GANs, fewer steps and a smaller DCN at quick and smoke."
    paper = ccfc.synthetic_settings(ccfc.SCALES["paper"], "mnist")
    assert paper["gan"]["gan_width"] == 64 and paper["gan"]["gan_hidden_dim"] == 1024 and paper["gan"]["synthetic_per_client"] is None
    assert (paper["gan"]["lr_generator"], paper["gan"]["lr_discriminator"]) == (1.8e-3, 2e-4) and paper["gan_training"] == dict(epochs=50, batch_size=64)
    assert paper["encoder_hidden_dims"] == [500, 500, 2000] and paper["latent_dim"] == 10
    for scale in ("quick", "smoke"):
        config = ccfc.SCALES[scale]
        for name in config["datasets"]:
            small = ccfc.synthetic_settings(config, name)
            assert small["gan"]["gan_width"] < 64 and small["gan_training"]["steps"] >= 1 and small["dcn"]["pretrain_epochs"] + small["dcn"]["dcn_epochs"] >= 1
            assert set(small) == {"gan", "gan_training", "encoder_hidden_dims", "latent_dim", "dcn"}
    runs = ccfc.runs_synthetic                                          # which (seed, p) the baselines run at
    assert all(runs(ccfc.SCALES[scale], seed, [0, 1, 2], p) for scale in ("smoke", "quick", "paper") for seed in (0, 1, 2) for p in P_VALUES)
    narrow = {"synthetic": dict(seeds=1, p_values=[0.0, 0.5, 1.0])}      # a scale may still cut them to fewer seeds and p
    assert [p for p in P_VALUES if runs(narrow, 0, [0, 1, 2], p)] == [0.0, 0.5, 1.0] and not runs(narrow, 1, [0, 1, 2], 0.0)


@pytest.mark.parametrize("p", [0.0, 0.5, 1.0])
def test_a_runs_federation_is_the_protocols_partition(p, tmp_path):
    "What run(config) builds from a method's config is the subset and p-mix split checked above, under the federation's name."
    from fedlearn_nb.experiment import build_federated_data
    protocol = ccfc.Protocol.from_parameters(results_dir=str(tmp_path), device="cpu")
    labels = digits_labels()
    chosen = labels[ccfc.clustering_subset(labels, protocol.config)]      # smoke: 100 images of each class
    parts = ccfc.client_partition(chosen, p, 1)
    for method in ("k-FED", "CCFC", "PPFC-GAN"):
        data = build_federated_data(ccfc.method_config(protocol, method, "digits", p, 1))
        assert data.name == f"digits-p{p:g}" and data.num_clients == 10 and sum(c.num_examples for c in data) == len(chosen)
        assert [sorted(c.y_train.tolist()) for c in data] == [sorted(chosen[part].tolist()) for part in parts], method
