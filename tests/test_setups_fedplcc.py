"""Every data column of every FedPLCC table, at every scale: the clients the notebook's runs get, on label arrays of
the real data's sizes (no images), and the run folders they are written to. This is the protocol module the notebook
runs (`domain_indices`, `data_kwargs`, `run_config`, `table_columns`), not a copy."""
import numpy as np
import pytest
import torch

from fedlearn_nb.data import Domain, LabelledData, stratified_split
from fedlearn_nb.tools import papers
from fedlearn_nb.tools.protocols import fedplcc as protocol

NS = {**vars(protocol), "DATA_NOT_AVAILABLE": papers.DATA_NOT_AVAILABLE}   # the protocol's names, as the tests below read them


def labels_of(counts) -> np.ndarray:
    "A label array with `counts[c]` samples of class c (only the sizes matter to which images a client gets)."
    return np.repeat(np.arange(len(counts)), counts)


def office_splits(counts) -> tuple[np.ndarray, np.ndarray]:
    "An Office-Caltech-10 domain's (train, test) labels: the data loader's fixed 80/20 per-class split (seed 0)."
    labels = labels_of(counts)
    train, test = stratified_split(labels, 0.2, seed=0)
    return labels[train], labels[test]


# Real sizes (shared/data/README.md): per-class counts of each domain's train and test split.
# MNIST-M: the first 10,000 training images, the file we have.
SPLITS = {
    "mnist": (labels_of([5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]),
              labels_of([980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009])),
    "usps": (labels_of([1194, 1005, 731, 658, 652, 556, 664, 645, 542, 644]),
             labels_of([359, 264, 198, 166, 200, 160, 170, 147, 166, 177])),
    "mnistm": (labels_of([1001, 1127, 991, 1032, 980, 863, 1014, 1070, 944, 978]),
               labels_of([878, 1016, 933, 908, 890, 807, 856, 914, 880, 919])),
    "amazon": office_splits([92, 82, 94, 99, 100, 100, 99, 100, 94, 98]),
    "caltech": office_splits([151, 110, 100, 138, 85, 128, 133, 94, 87, 97]),
    "dslr": office_splits([12, 21, 12, 13, 10, 24, 22, 12, 8, 23]),
    "webcam": office_splits([29, 21, 31, 27, 27, 30, 43, 30, 27, 30]),
}
NOT_AVAILABLE = {"svhn", "synth"} | set(NS["DOMAIN_COLUMNS"]["domainnet10"])   # not in our data folder
# What the paper states per client: about 300 training images (30 per class) on Digit-5 and Office-10, 400 on DomainNet
PAPER_PER_CLASS = {"digit5": 30, "office10": 30, "domainnet10": 40, "digits5lite": None}


def smoke_splits() -> dict:
    "The embedded stand-in (small; loaded for real): digits-5-lite's (train, test) labels per domain."
    from fedlearn_nb.data import load_dataset
    return {d: tuple(load_dataset("digits5lite", split=s, domain=d).y.numpy() for s in ("train", "test"))
            for d in NS["DOMAIN_COLUMNS"]["digits5lite"]}


SMOKE = smoke_splits()


def domain_position(dataset: str, domain: str) -> int:
    from fedlearn_nb.data import benchmark_info
    return [name for name, _, _ in benchmark_info(dataset).domains].index(domain)


def check_domain(config: dict, dataset: str, domain: str) -> str | None:
    "Draw one domain's client as a run's config does; assert sizes and class coverage; a reason string when it cannot run."
    splits = SMOKE if dataset == "digits5lite" else SPLITS
    if domain in NOT_AVAILABLE or domain not in splits: return NS["DATA_NOT_AVAILABLE"]
    settings, position = config["datasets"][dataset], domain_position(dataset, domain)
    for split, labels, per_class in (("train", splits[domain][0], settings["train_per_class"]),
                                     ("test", splits[domain][1], settings["test_per_class"])):
        chosen = NS["domain_indices"](labels, per_class, position, split)
        assert len(np.unique(chosen)) == len(chosen) and chosen.min() >= 0 and chosen.max() < len(labels)   # distinct images of the domain
        counts, available = np.bincount(labels[chosen], minlength=10), np.bincount(labels, minlength=10)
        assert (counts > 0).all(), (dataset, domain, split, counts)                    # every client sees (and is tested on) all 10 classes
        expected = available if per_class is None else np.minimum(available, per_class)
        np.testing.assert_array_equal(counts, expected, err_msg=f"{dataset}/{domain}/{split}")
        again = NS["domain_indices"](labels, per_class, position, split)              # drawn once: the same images for every run seed
        np.testing.assert_array_equal(chosen, again)
    if dataset != "digits5lite":
        assert settings["train_per_class"] == PAPER_PER_CLASS[dataset]                 # the paper's per-client amount at every scale
    return None


@pytest.mark.parametrize("scale", ["smoke", "quick", "paper"])
def test_every_column_of_every_table_can_be_set_up(scale):
    config = NS["SCALES"][scale]
    ran, skipped = set(), {}
    for column in NS["table_columns"](config):
        key = (column["table"], column["column"])
        if column["reason"]: skipped[key] = column["reason"]; continue
        domains = [column["domain"]] if column["domain"] else list(NS["DOMAIN_COLUMNS"][column["dataset"]])
        reasons = [check_domain(config, column["dataset"], domain) for domain in domains]
        if all(reasons): skipped[key] = reasons[0]              # a table-wide column needs at least one domain
        else: ran.add(key)
    assert {t for t, _ in ran | set(skipped)} == {2, 3, 4, 5, "figure 4", "figure 5", "figure 6"}
    if scale == "smoke":   # the stand-in replaces Digit-5 (all five domains); Office-10 and DomainNet do not run
        assert {c for t, c in ran if t == 2} == {"MNIST", "USPS", "SVHN", "Synth", "MNIST-M"}
        assert all(r.startswith("not run at this scale") for (t, _), r in skipped.items() if t in (3, 4))
        assert len({c for t, c in ran if t == 5}) == 7 and ("figure 4", "alpha on digit5") in ran
    else:                  # exactly the columns whose data we lack, and the sweeps the scale leaves out, are skipped
        unavailable = {k for k, r in skipped.items() if r == NS["DATA_NOT_AVAILABLE"]}
        assert {c for t, c in unavailable if t == 2} == {"SVHN", "Synth"}
        assert {c for t, c in unavailable if t == 4} == set(NS["DOMAIN_COLUMNS"]["domainnet10"].values())
        assert ("figure 6", "lambda1 on domainnet10") in unavailable and not {c for t, c in unavailable if t == 3}
        assert {c for t, c in ran if t == 2} == {"MNIST", "USPS", "MNIST-M"} and len({c for t, c in ran if t == 3}) == 4
        assert len({c for t, c in ran if t == 5}) == 7
        assert set(skipped) - unavailable == {k for k, r in skipped.items() if r == "not a sweep of this scale"}
        expected_sweeps = {"quick": {"alpha", "lambda1"}, "paper": {"alpha", "tau", "ratio", "lambda1"}}[scale]
        assert {c.split(" on ")[0] for t, c in ran if str(t).startswith("figure")} == expected_sweeps


def test_client_sizes_are_the_papers_where_the_data_allow():
    "About 300 training images per client (30 per class); Office's small domains give all they have; test splits as stated."
    quick = NS["SCALES"]["quick"]["datasets"]
    def size(dataset, domain, split, per_class):
        labels = SPLITS[domain][0 if split == "train" else 1]
        return len(NS["domain_indices"](labels, per_class, domain_position(dataset, domain), split))
    assert [size("digit5", d, "train", 30) for d in ("mnist", "usps", "mnistm")] == [300, 300, 300]
    assert [size("office10", d, "train", 30) for d in ("amazon", "caltech", "dslr", "webcam")] == [300, 300, 126, 233]
    # Office test splits of our fixed 80/20 split: the paper's accuracies imply 190 / 224 / 30 / 58 test images
    assert [size("office10", d, "test", quick["office10"]["test_per_class"]) for d in ("amazon", "caltech", "dslr", "webcam")] == [192, 225, 31, 58]
    assert [size("digit5", d, "test", quick["digit5"]["test_per_class"]) for d in ("mnist", "usps", "mnistm")] == [300, 300, 300]
    assert [size("digit5", d, "test", None) for d in ("mnist", "usps", "mnistm")] == [10000, 2007, 9001]   # paper scale: all of them


def fake_domain(name: str, size: int = 8) -> Domain:
    x = torch.rand(20, 3, size, size)
    y = torch.arange(20) % 10
    return Domain(name, LabelledData(x, y, [str(c) for c in range(10)]), LabelledData(x[:10], y[:10], [str(c) for c in range(10)]))


def test_domainnet_keeps_its_train_augmentation():
    "DomainNet's flips and rotations reach the federation the engine builds from a run's config; Digit-5 and Office-10 are not augmented."
    from fedlearn_nb.data import DomainBenchmark, benchmark_info
    from fedlearn_nb.federation import build_federation
    def federation(dataset, domains):   # what build_federated_data makes of load_benchmark's result (load_benchmark attaches the registry's augmentation)
        info = benchmark_info(dataset)
        benchmark = DomainBenchmark(info.name, domains, [str(c) for c in range(10)], (3, 8, 8), info.stand_in, info.note,
                                    info.augmentation() if info.augmentation else None)
        return build_federation(benchmark, "domains", clients_per_domain=1)
    augmented = federation("domainnet10", [fake_domain("clipart"), fake_domain("real")])
    assert augmented.train_augmentation is not None and augmented.num_clients == 2
    torch.manual_seed(0)
    x = torch.rand(3, 8, 8)
    views = [augmented.train_augmentation(x) for _ in range(8)]
    assert all(v.shape == x.shape for v in views) and any(not torch.allclose(v, x) for v in views)   # images do change
    for dataset, domain in (("digit5", "mnist"), ("office10", "amazon")):
        assert federation(dataset, [fake_domain(domain)]).train_augmentation is None
    config = NS["SCALES"]["paper"]
    assert config["datasets"]["domainnet10"]["image_size"] == 256   # FedPLVM's DomainNet size
    assert protocol.data_kwargs(config["datasets"]["domainnet10"])["image_size"] == 256   # and the size a run's config loads


def test_domain_indices_pick_what_the_library_loader_picks():
    "`domain_indices` is the draw a run's config makes (load_benchmark with the quick scale's data_kwargs) on USPS, if present."
    from fedlearn_nb.data import DatasetNotFoundError, load_benchmark, load_dataset
    try: labels = {s: load_dataset("usps", split=s).y.numpy() for s in ("train", "test")}
    except DatasetNotFoundError: pytest.skip("USPS is not on this machine")
    options = protocol.data_kwargs(NS["SCALES"]["quick"]["datasets"]["digit5"])
    assert (options["train_per_class"], options["test_per_class"], options["seed"]) == (30, 30, NS["DATA_SEED"])
    library = load_benchmark("digit5", domains=["usps"], **options)
    position = domain_position("digit5", "usps")
    for split in ("train", "test"):
        ours = labels[split][NS["domain_indices"](labels[split], 30, position, split)]
        np.testing.assert_array_equal(ours, getattr(library.domains[0], split).y.numpy())


def test_scales_keep_the_papers_settings():
    paper, quick = NS["SCALES"]["paper"], NS["SCALES"]["quick"]
    assert {d: s["rounds"] for d, s in paper["datasets"].items()} == {"digit5": 50, "office10": 100, "domainnet10": 50}
    assert {d: s["image_size"] for d, s in paper["datasets"].items()} == {"digit5": 64, "office10": 64, "domainnet10": 256}
    assert all(s["test_per_class"] is None for s in paper["datasets"].values()) and paper["local_epochs"] == 10
    for config in (paper, quick):
        assert (config["model"], config["optimizer"], config["lr"], config["momentum"], config["weight_decay"]) == ("resnet10", "sgd", 0.01, 0.9, 1e-5)
        assert {d: s["lambda1"] for d, s in config["datasets"].items()} == {"digit5": 100.0, "office10": 20.0, "domainnet10": 1.0}
        assert config["seeds"] == "0,1,2"
    assert quick["local_epochs"] == 1 and quick["batch_size"] == 32   # 300 images / 32 = the other reading of "E = 10 iterations"


@pytest.mark.parametrize("scale", ["smoke", "quick", "paper"])
def test_fccl_plus_settings_build_at_every_scale(scale):
    "FCCL+'s keyword arguments are valid for every dataset of every scale; its public set is never one of the federation's datasets."
    from fedlearn_nb.algorithms.fccl import FCCLPlus
    from fedlearn_nb.data import benchmark_info
    config = NS["SCALES"][scale]
    for dataset, settings in config["datasets"].items():
        algorithm, kwargs = protocol.method_arguments("FCCL+", config, dataset)
        assert algorithm == "fcclplus"
        FCCLPlus(**kwargs)                                               # every argument exists and is valid
        sources = {source for _, source, _ in benchmark_info(dataset).domains}
        if dataset != "digits5lite": assert kwargs["public_data"] not in sources, (dataset, kwargs["public_data"])
        assert kwargs["distillation_temperature"] == (3.0 if dataset in ("digit5", "digits5lite") else 1.0)   # the authors' Digits / Office values
    assert config["fcclplus"]["public_data"] == ("digits" if scale == "smoke" else "cifar10")


# The run folders of the committed runs: the digest of each config as first written (before the data fields moved into it).
COMMITTED_FOLDERS = {
    ("quick", "digit5", "FedAvg", 0): "digit5-fedavg-seed0-e589941e", ("quick", "digit5", "FedPLCC", 1): "digit5-fedplcc-seed1-ff5cf548",
    ("quick", "digit5", "FCCL+", 0): "digit5-fcclplus-seed0-bf4bbf70", ("quick", "digit5", "FedPLVM", 1): "digit5-fedplvm-seed1-237ba67b",
    ("quick", "office10", "FedAvg", 1): "office10-fedavg-seed1-02d6ed34", ("quick", "office10", "FedPLCC", 0): "office10-fedplcc-seed0-a3b03885",
    ("quick", "office10", "FCCL+", 1): "office10-fcclplus-seed1-677f5ebc", ("quick", "domainnet10", "FedPLCC", 0): "domainnet10-fedplcc-seed0-c103895b",
    ("smoke", "digits5lite", "FedAvg", 0): "digits5lite-fedavg-seed0-cee047d3", ("smoke", "digits5lite", "FedPLCC", 1): "digits5lite-fedplcc-seed1-d3a3cd21",
    ("smoke", "digits5lite", "FCCL+", 0): "digits5lite-fcclplus-seed0-210b40e3", ("smoke", "digits5lite", "FedPLVM", 1): "digits5lite-fedplvm-seed1-6e6dfc6f",
}


def test_run_folders_keep_the_committed_names(tmp_path):
    "Each run's config now holds its data (data_kwargs, federation), and its folder keeps the name it was first written under."
    made = {}
    for scale in ("smoke", "quick"):
        execution = protocol.FedPLCCProtocol.from_parameters(scale=scale, results_dir=str(tmp_path / scale), device="cpu")
        for (at, dataset, label, seed), name in COMMITTED_FOLDERS.items():
            if at != scale: continue
            config = execution.run_config(dataset, seed, *protocol.method_arguments(label, execution.config, dataset))
            made[(at, dataset, label, seed)] = config.name
            assert config.data_kwargs["train_per_class"] == NS["SCALES"][scale]["datasets"][dataset]["train_per_class"]
            assert config.federation == {"partition_seed": NS["DATA_SEED"]}   # the same clients for every run seed
    assert made == COMMITTED_FOLDERS
