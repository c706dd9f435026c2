"""Every data column of every FedCCL table, at every scale: the clients the notebook would build, on label arrays of
the real data's sizes (no images). The protocol module (`fedlearn_nb.tools.protocols.fedccl`) is what the notebook
runs, so this is the notebook's code, not a copy."""
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from fedlearn_nb.data import stratified_split
import fedlearn_nb.tools.protocols.fedccl as fedccl

ROOT = Path(__file__).resolve().parents[1]
NS = vars(fedccl)   # the protocol's scales, settings and partition functions, by name


def labels_of(counts) -> np.ndarray:
    "A label array with `counts[c]` samples of class c (only the sizes matter to a partition's sizes)."
    return np.repeat(np.arange(len(counts)), counts)


def office_train(counts) -> np.ndarray:
    "An Office-Caltech-10 domain's training labels: the data loader's fixed 80/20 per-class split (seed 0)."
    labels = labels_of(counts)
    train, _ = stratified_split(labels, 0.2, seed=0)
    return labels[train]


# Real sizes (shared/data/README.md); MNIST-M: the first 10,000 training images, the file we have.
TRAIN_LABELS = {
    "mnist": labels_of([5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]),
    "usps": labels_of([1194, 1005, 731, 658, 652, 556, 664, 645, 542, 644]),
    "mnistm": labels_of([1001, 1127, 991, 1032, 980, 863, 1014, 1070, 944, 978]),
    "fashion_mnist": labels_of([6000] * 10),
    "cifar10": labels_of([1000] * 10),
    "amazon": office_train([92, 82, 94, 99, 100, 100, 99, 100, 94, 98]),
    "caltech": office_train([151, 110, 100, 138, 85, 128, 133, 94, 87, 97]),
    "dslr": office_train([12, 21, 12, 13, 10, 24, 22, 12, 8, 23]),
    "webcam": office_train([29, 21, 31, 27, 27, 30, 43, 30, 27, 30]),
}
NOT_AVAILABLE = {"svhn", "synth", "domainnet10"}   # SVHN, SynthDigits and DomainNet are not in our data folder


def smoke_labels() -> dict:
    "The embedded stand-in data of the smoke scale (small; loaded for real)."
    from fedlearn_nb.data import load_benchmark, load_dataset
    lite = load_benchmark("digits5lite")
    labels = {f"lite/{d.name}": d.train.y.numpy() for d in lite.domains}
    labels["digits"] = load_dataset("digits", split="train").y.numpy()
    return labels


def settings(scale: str) -> list[dict]:
    return NS["table_settings"](NS["SCALES"][scale], stand_in=scale == "smoke")


def domains_of(dataset: str, smoke: dict) -> list[tuple[str, np.ndarray]]:
    "The domains of a benchmark that the notebook would find here, with their training labels."
    if dataset == "digits5lite":
        return [(name.split("/")[1].removesuffix("_like"), labels) for name, labels in smoke.items() if name.startswith("lite/")]
    return [(d, TRAIN_LABELS[d]) for d in NS["PAPER_DOMAINS"][dataset] if d in TRAIN_LABELS]


def check_inter(config: dict, column: dict, seed: int, smoke: dict) -> str | None:
    "Build one inter-domain federation; assert the paper's sizes and class coverage; a reason string when skipped."
    dataset, alpha = column["dataset"], column["alpha"]
    if dataset not in NS["INTER"] or (dataset not in ("digits5lite",) and dataset not in config["inter_datasets"]):
        return "not run at smoke scale (no stand-in)"
    if dataset != "digits5lite" and (dataset in NOT_AVAILABLE or column["domain"] in NOT_AVAILABLE): return NS["DATA_NOT_AVAILABLE"]
    domains = domains_of(dataset, smoke)
    names, labels = [d for d, _ in domains], [l for _, l in domains]
    parts = NS["inter_partition"](labels, config["inter"], alpha, seed, 10)
    assert len(parts) == len(domains)                                    # one client per domain
    counts = np.stack([np.bincount(l[p], minlength=10) for l, p in zip(labels, parts)])   # (clients, classes)
    for l, p in zip(labels, parts):
        assert len(np.unique(p)) == len(p) and p.min() >= 0 and p.max() < len(l)         # distinct images of its domain
    wanted = config["inter"]["samples_per_class"]
    if alpha is None:   # balanced: the same number of images of every class on every client
        expected = 6 if dataset == "office10" else wanted          # DSLR's rarest class has 6 training images (8 - 2 test)
        assert (counts == expected).all(), (dataset, counts)
    else:               # imbalanced: Dirichlet shares of clients x samples_per_class images per class, capped by each domain
        assert (counts.sum(0) <= len(domains) * wanted).all() and (counts.sum(0) > 0).all()   # every class reaches someone
        assert counts.sum(1).min() >= 2 and len(set(counts.sum(1).tolist())) > 1            # sizes differ, none empty
        if dataset == "office10":   # not capped by the rarest class: the bug gave every client 6 per class (240 in all)
            assert counts.max() > 6 and counts.sum() > 4 * 6 * 10, counts
    if column["domain"] is not None: assert counts[names.index(column["domain"])].sum() > 0   # this column's client has data
    return None


def check_intra(config: dict, column: dict, seed: int, smoke: dict) -> str | None:
    dataset, alpha = column["dataset"], column["alpha"]
    if dataset not in config["intra_datasets"]: return f"{dataset} is not a dataset of this scale"
    labels = smoke["digits"] if dataset == "digits" else TRAIN_LABELS[dataset]
    subset = NS["intra_train_indices"](labels, config["intra"], dataset)
    per_class = (config["intra"]["train_per_class"] or {}).get(dataset)
    expected = np.minimum(np.bincount(labels), per_class) if per_class else np.bincount(labels)
    assert (np.bincount(labels[subset], minlength=10) == expected).all()
    sub_labels = labels[subset]
    parts = NS["intra_partition"](sub_labels, config["intra"], alpha, seed)
    assert len(parts) == config["intra"]["num_clients"]
    joined = np.sort(np.concatenate(parts))
    assert (joined == np.arange(len(sub_labels))).all()               # every training image on exactly one client
    assert min(len(p) for p in parts) >= 10                           # partition_dirichlet's minimum client size
    assert len(np.unique(sub_labels[joined])) == 10                   # all classes in the federation
    if alpha <= 0.05:   # strong label skew: most of a client's data is one class
        top_share = np.mean([np.bincount(sub_labels[p]).max() / len(p) for p in parts])
        assert top_share > 0.4, top_share                             # (an IID split: about 0.1)
    return None


@pytest.mark.parametrize("scale", ["smoke", "quick", "paper"])
def test_every_column_of_every_table_can_be_set_up(scale):
    config, smoke = NS["SCALES"][scale], smoke_labels()
    seeds = [int(s) for s in config["seeds"].split(",")]
    skipped, ran = {}, set()
    for column in settings(scale):
        inter = column["dataset"] in NS["INTER"]
        for seed in seeds:
            reason = (check_inter if inter else check_intra)(config, column, seed, smoke)
            if reason: skipped[(column["table"], column["column"])] = reason; break
        else: ran.add((column["table"], column["column"]))
    tables = {t for t, _ in ran | set(skipped)}
    assert tables == {"1", "2", "3", "4", "5", "6", "7", "8", "figure 5", "figure 6"}
    if scale == "smoke":   # the stand-ins replace Digit-5 and the intra-domain datasets; Office-10 and DomainNet do not run
        assert {c for t, c in ran if t == "1"} == {"MNIST", "SVHN", "USPS", "Synth", "MNIST-M"}
        assert all("no stand-in" in r for (t, c), r in skipped.items() if t in ("1", "2") and c in ("Amazon", "DSLR"))
    else:                  # exactly the columns whose data we lack are skipped, each with its reason
        unavailable = {k for k, r in skipped.items() if r == NS["DATA_NOT_AVAILABLE"]}
        assert unavailable == set(skipped), skipped
        assert {c for t, c in unavailable if t in ("1", "2")} == {"SVHN", "Synth"}
        assert {t for t, _ in unavailable} == {"1", "2", "3", "figure 5"}
        assert {("4", "MNIST"), ("4", "FMNIST"), ("4", "CIFAR-10"), ("2", "DSLR"), ("7", "Office-10 (Local rows)")} <= ran


def test_office_imbalanced_is_not_capped_by_the_rarest_class():
    "Imbalanced Office-10 clients draw from clients x 10 images per class, not 6 (the rarest DSLR class)."
    config = NS["SCALES"]["quick"]["inter"]
    labels = [TRAIN_LABELS[d] for d in NS["PAPER_DOMAINS"]["office10"]]
    test_eq = np.testing.assert_array_equal
    assert NS["inter_samples_per_class"](labels, 10, None, 10) == 6          # balanced: capped, equal sizes need it
    assert NS["inter_samples_per_class"](labels, 10, 0.5, 10) == 10          # imbalanced: not capped
    sizes = [len(p) for p in NS["inter_partition"](labels, config, 0.5, 0, 10)]
    assert sum(sizes) > 240 and max(sizes) > 60, sizes
    test_eq([len(p) for p in NS["inter_partition"](labels, config, None, 0, 10)], [60] * 4)


def test_scales_keep_the_papers_data_amounts_and_seeds():
    for scale in ("quick", "paper"):
        config = NS["SCALES"][scale]
        assert config["inter"]["samples_per_class"] == 10            # FedPCL's few-shot protocol
        assert config["seeds"] == "0,1,2"                             # the paper's three runs
        assert config["intra"]["num_clients"] == 10 and config["intra"]["lr"] == 0.01
    paper = NS["SCALES"]["paper"]
    assert (paper["inter"]["rounds"], paper["intra"]["rounds"]) == (60, 100) and paper["intra"]["train_per_class"] is None


def test_the_committed_quick_runs_keep_their_folders(tmp_path):
    """Every run of the committed quick results (metadata.json) gets the folder it was written to: re-running resumes them.
    152 runs of every table, and the 8 that Table 8's seeds 1-2 added (FedAvg+, FedCCL+ on MNIST and Fashion-MNIST)."""
    def domains(name):   # instead of the data: the domains' training labels (the real sizes), no images
        return ([SimpleNamespace(name=d, train=SimpleNamespace(y=torch.as_tensor(TRAIN_LABELS[d]), classes=list(range(10))))
                 for d in fedccl.PAPER_DOMAINS[name] if d in TRAIN_LABELS], {}, None)
    protocol = fedccl.FedCCLProtocol(scale="quick", results_dir=str(tmp_path), inter_loader=domains)
    runs = json.loads((ROOT / "papers" / "results" / "fedccl" / "quick" / "metadata.json").read_text())["runs"]
    assert len(runs) == 160
    assert sum(r["method"] in ("FedAvg+", "FedCCL+") for r in runs) == 2 * 2 * 3      # Table 8: two datasets, every seed
    folders = {r["folder"]: protocol.method_config(r["method"], r["dataset"], r["alpha"], r["seed"]).name for r in runs}
    assert [folder for folder, name in folders.items() if folder != name] == []
    assert folders["digit5-balanced-fedavg-seed0-063c820f"] == "digit5-balanced-fedavg-seed0-063c820f"   # the others keep theirs
    assert protocol.method_config("FedAvg", "mnist", 0.05, 0).name == "mnist-alpha0-05-fedavg-seed0-8664d08e"   # all 60,000 images
    assert not list(tmp_path.iterdir())   # building the configs wrote nothing


def test_quick_adversarial_training_sees_all_the_training_images(tmp_path):
    """Table 8 at quick: FedAvg+ and FedCCL+ train on all 60,000 MNIST / Fashion-MNIST training images for 5 rounds, one PGD
    step of 2.5 eps from a random point of the ball, eps 0.3 (MNIST) and 0.1 (Fashion-MNIST). On the former 1,000 images per
    class FedAvg+ ends as a one-class model on MNIST, with 1 or 10 PGD steps alike; on all the images it learns
    (benchmarks/results_fedccl_robust_collapse.txt)."""
    from fedlearn_nb.experiment import build_algorithm
    protocol = fedccl.FedCCLProtocol(scale="quick", results_dir=str(tmp_path))
    for label in ("FedAvg+", "FedCCL+"):
        for dataset, epsilon in (("mnist", 0.3), ("fashion_mnist", 0.1)):
            config = protocol.method_config(label, dataset, 0.05, 0)
            assert (config.per_class, config.rounds, config.lr, config.momentum) == (None, 5, 0.01, 0.9)
            attack = build_algorithm(config).attack
            assert (attack.epsilon, attack.attack_steps, attack.step_size, attack.random_start) == (epsilon, 1, None, True)
    assert not list(tmp_path.iterdir())

