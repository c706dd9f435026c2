"Integration tests of fedlearn_nb.data on the real files (shared/data, Debian's Fashion-MNIST); skipped when absent."
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from fedlearn_nb.core import load_settings
from fedlearn_nb.data import load_benchmark, load_dataset

SETTINGS = load_settings()
ROOT = Path(SETTINGS.data_root)


def needs(*relative):
    "Skip unless every file `relative` (to the data root) exists."
    absent = [r for r in relative if not (ROOT / r).is_file()]
    return pytest.mark.skipif(bool(absent), reason=f"real data not present: {', '.join(str(ROOT / r) for r in absent)} "
                                                   "(set data_root in settings.ini or FEDLEARN_DATA_ROOT)")


MNIST_FILES = [f"mnist/{n}" for n in ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                                      "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")]
OFFICE_FILES = [f"office_caltech10/{d}_64x64.npz" for d in ("amazon", "caltech", "dslr", "webcam")]


@needs(*MNIST_FILES)
def test_idx_reader_agrees_with_torchvision_on_the_real_mnist(tmp_path):
    "torchvision's IDX readers (which open only uncompressed files) read the same arrays from gunzipped copies."
    import gzip
    from torchvision.datasets.mnist import read_image_file, read_label_file
    from fedlearn_nb.readers import read_idx
    for name, reader in (("t10k-images-idx3-ubyte", read_image_file), ("t10k-labels-idx1-ubyte", read_label_file)):
        (tmp_path / name).write_bytes(gzip.decompress((ROOT / "mnist" / f"{name}.gz").read_bytes()))
        assert np.array_equal(reader(str(tmp_path / name)).numpy(), read_idx(ROOT / "mnist" / f"{name}.gz"))


@needs(*MNIST_FILES)
def test_mnist_sizes_and_counts():
    train, test = load_dataset("mnist", split="train", dtype=torch.uint8), load_dataset("mnist", split="test", dtype=torch.uint8)
    assert train.x.shape == (60000, 1, 28, 28) and test.x.shape == (10000, 1, 28, 28)
    assert train.class_counts().tolist() == [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
    assert test.class_counts().tolist() == [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
    assert test.x.max() == 255 and test.x.float().mean() / 255 == pytest.approx(0.1325, abs=0.002)  # MNIST's known mean


@needs("usps/usps.h5")
def test_usps_sizes_and_counts():
    train, test = load_dataset("usps"), load_dataset("usps", split="test")
    assert train.x.shape == (7291, 1, 16, 16) and len(test) == 2007
    assert train.class_counts().tolist() == [1194, 1005, 731, 658, 652, 556, 664, 645, 542, 644]
    assert test.class_counts().tolist() == [359, 264, 198, 166, 200, 160, 170, 147, 166, 177]
    assert 0 <= train.x.min() and train.x.max() <= 1


@needs("mnist_m/mnist_m_test.npz", "mnist_m/mnist_m_train_first10000.npz", *MNIST_FILES)
def test_mnist_m_counts_and_labels_match_mnist():
    test, train = load_dataset("mnist_m", split="test", dtype=torch.uint8), load_dataset("mnist_m", dtype=torch.uint8)
    assert test.x.shape == (9001, 3, 32, 32) and len(train) == 10000 and "first 10000 of 59001" in train.note
    assert test.class_counts().tolist() == [878, 1016, 933, 908, 890, 807, 856, 914, 880, 919]
    assert train.class_counts().tolist() == [1001, 1127, 991, 1032, 980, 863, 1014, 1070, 944, 978]
    assert torch.equal(test.y, load_dataset("mnist", split="test", dtype=torch.uint8).y[:9001])  # MNIST-M i is MNIST i


@needs("cifar10/cifar10_train_1000perclass.npz", "cifar10/cifar10_test.npz")
def test_cifar10_subset():
    train, test = load_dataset("cifar10", dtype=torch.uint8), load_dataset("cifar10", split="test", dtype=torch.uint8)
    assert train.x.shape == (10000, 3, 32, 32) and test.x.shape == (10000, 3, 32, 32)
    assert train.class_counts().tolist() == [1000] * 10 and test.class_counts().tolist() == [1000] * 10
    assert train.classes[0] == "airplane" and train.classes[9] == "truck" and "JPEG" in train.note
    means = train.x.float().mean((0, 2, 3))
    assert torch.allclose(means, torch.tensor([125.6, 123.1, 114.0]), atol=0.5)  # about the README's per-channel means


@needs(*OFFICE_FILES)
def test_office_caltech10_counts_and_split():
    totals = {"amazon": 958, "caltech": 1123, "dslr": 157, "webcam": 295}
    for domain, total in totals.items():
        train = load_dataset("office10", domain=domain, dtype=torch.uint8)
        test = load_dataset("office10", domain=domain, split="test", dtype=torch.uint8)
        assert len(train) + len(test) == total and abs(len(test) - 0.2 * total) <= 5
        assert train.image_shape == (3, 64, 64)
    dslr = load_dataset("office10", domain="dslr", split="all", dtype=torch.uint8)
    assert dslr.class_counts().tolist() == [12, 21, 12, 13, 10, 24, 22, 12, 8, 23]
    bench = load_benchmark("office10", image_size=32, max_train_per_domain=50)
    assert bench.domain_names == ["amazon", "caltech", "dslr", "webcam"] and bench.image_shape == (3, 32, 32)
    assert [len(d.train) for d in bench] == [50] * 4


@needs(*MNIST_FILES, "usps/usps.h5", "mnist_m/mnist_m_test.npz", "mnist_m/mnist_m_train_first10000.npz")
def test_digit5_loads_the_domains_present():
    present = [d for d, path in (("svhn", "svhn/train_32x32.mat"), ("synth", "synth_digits/syn_number.mat")) if (ROOT / path).is_file()]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bench = load_benchmark("digit5", missing="skip", train_per_class=30, max_test_per_domain=200)
    assert bench.domain_names[:2] == ["mnist", "usps"] and "mnistm" in bench.domain_names
    assert len(bench) == 3 + len(present)
    if len(present) < 2: assert any("skipped domain" in str(w.message) for w in caught)
    for domain in bench:
        assert domain.train.image_shape == (3, 32, 32) and domain.train.class_counts().tolist() == [30] * 10


FASHION = Path(SETTINGS.fashion_mnist_root or "/nonexistent")


@pytest.mark.skipif(not (FASHION / "t10k-images-idx3-ubyte.gz").is_file() and not (ROOT / "fashion_mnist").is_dir(),
                    reason=f"Fashion-MNIST not installed (apt-get install dataset-fashion-mnist puts it in {FASHION})")
def test_fashion_mnist_from_debian_package():
    train, test = load_dataset("fashion_mnist", dtype=torch.uint8), load_dataset("fashion_mnist", split="test", dtype=torch.uint8)
    assert train.x.shape == (60000, 1, 28, 28) and len(test) == 10000
    assert train.class_counts().tolist() == [6000] * 10 and test.class_counts().tolist() == [1000] * 10


DEBIAN_FASHION = Path("/usr/share/datasets/fashion-mnist")


@pytest.mark.skipif(not (DEBIAN_FASHION / "t10k-labels-idx1-ubyte.gz").is_file(),
                    reason="Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)")
def test_fashion_mnist_found_from_any_folder(tmp_path):
    "Debian's location is in the registry: no settings.ini and an empty data root still find it (it was reported missing)."
    import subprocess, sys, os
    code = ("from fedlearn_nb.data import load_dataset; d = load_dataset('fashion_mnist', split='test'); "
            "print(len(d), d.class_counts().tolist()[:2])")
    env = {k: v for k, v in os.environ.items() if not k.startswith("FEDLEARN_")}
    env["FEDLEARN_DATA_ROOT"] = str(tmp_path / "empty")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[0] == "10000"
