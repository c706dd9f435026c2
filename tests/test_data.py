"Loaders of fedlearn_nb.data (the readers of fedlearn_nb.readers) on tiny files written in each dataset's real format; no test touches the network."
import bz2
import dataclasses
import gzip
import hashlib
import pickle
import socket
import warnings
from pathlib import Path

import h5py
import numpy as np
import pytest
import scipy.io
import torch
from PIL import Image

from fedlearn_nb import data
from fedlearn_nb.data import (DATASETS, DatasetCorruptError, DatasetNotFoundError, UnknownDatasetError, load_benchmark,
                              load_dataset, write_idx)


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    "Any attempt to open a network connection fails the test."
    def refuse(*args, **kwargs): raise AssertionError("a data test tried to use the network")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.fixture
def root(tmp_path, monkeypatch):
    "An empty data root; downloads off and no Fashion-MNIST fallback folder, whatever the machine's settings say."
    monkeypatch.setenv("FEDLEARN_DOWNLOAD", "false")
    monkeypatch.setenv("FEDLEARN_FASHION_MNIST_ROOT", str(tmp_path / "no-fashion-here"))
    for name, info in list(DATASETS.items()):  # nor the system folders a package installs into (Debian's Fashion-MNIST)
        if info.system_dirs: monkeypatch.setitem(DATASETS, name, dataclasses.replace(info, system_dirs=()))
    return tmp_path


def images(n, shape, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (n, *shape), dtype=np.uint8)


# ---------------------------------------------------------------- writers of the real formats (tiny files)
def write_mnist(folder, split, x, y, gz=True):
    folder.mkdir(parents=True, exist_ok=True)
    prefix = "train" if split == "train" else "t10k"
    suffix = ".gz" if gz else ""
    write_idx(folder / f"{prefix}-images-idx3-ubyte{suffix}", x)
    write_idx(folder / f"{prefix}-labels-idx1-ubyte{suffix}", np.asarray(y, np.uint8))


def write_cifar_batch(path, x, y, label_key="labels"):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        pickle.dump({b"data": x.reshape(len(x), -1), label_key.encode(): list(map(int, y)), b"batch_label": b"t"}, f, protocol=2)


def write_svhn_mat(path, x_nchw, y, images_key="X", labels_key="y"):
    path.parent.mkdir(parents=True, exist_ok=True)
    scipy.io.savemat(path, {images_key: x_nchw.transpose(2, 3, 1, 0), labels_key: np.asarray(y, np.uint8).reshape(-1, 1)})


def write_jpgs(folder, count, size=(20, 30), seed=0):
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        Image.fromarray(images(1, (*size, 3), seed + i)[0]).save(folder / f"img_{i:03d}.jpg")


# ---------------------------------------------------------------- MNIST family
def test_mnist_flat_gz_layout_train_test_and_all(root):
    x_train, x_test = images(6, (28, 28)), images(4, (28, 28), 1)
    write_mnist(root / "mnist", "train", x_train, [0, 1, 2, 3, 4, 5])
    write_mnist(root / "mnist", "test", x_test, [9, 8, 7, 6])
    train = load_dataset("mnist", root=root, verify=False)
    assert train.x.shape == (6, 1, 28, 28) and train.x.dtype == torch.float32
    assert torch.equal(train.x[2, 0], torch.from_numpy(x_train[2]).float() / 255)
    assert train.y.tolist() == [0, 1, 2, 3, 4, 5] and train.name == "mnist/train" and train.num_classes == 10
    both = load_dataset("mnist", root=root, split="all", verify=False)
    assert len(both) == 10 and both.y[6:].tolist() == [9, 8, 7, 6]
    raw = load_dataset("mnist", root=root, split="test", verify=False, dtype=torch.uint8)
    assert raw.x.dtype == torch.uint8 and torch.equal(raw.x[:, 0], torch.from_numpy(x_test))


def test_mnist_torchvision_raw_layout_uncompressed(root):
    write_mnist(root / "mnist" / "MNIST" / "raw", "test", images(3, (28, 28)), [1, 2, 3], gz=False)
    assert load_dataset("mnist", root=root, split="test", verify=False).y.tolist() == [1, 2, 3]


def test_fashion_mnist_from_settings_folder(root, monkeypatch):
    debian = root / "usr-share-datasets-fashion-mnist"
    write_mnist(debian, "test", images(2, (28, 28)), [9, 0])
    with pytest.raises(DatasetNotFoundError):
        load_dataset("fashion-mnist", root=root, split="test", verify=False)
    monkeypatch.setenv("FEDLEARN_FASHION_MNIST_ROOT", str(debian))
    loaded = load_dataset("fashion-mnist", root=root, split="test", verify=False)
    assert loaded.y.tolist() == [9, 0] and loaded.classes[9] == "Ankle boot"


def test_emnist_balanced_is_transposed_upright(root):
    x = images(2, (28, 28))
    folder = root / "emnist" / "gzip"; folder.mkdir(parents=True)
    write_idx(folder / "emnist-balanced-test-images-idx3-ubyte.gz", x)
    write_idx(folder / "emnist-balanced-test-labels-idx1-ubyte.gz", np.array([46, 10], np.uint8))
    loaded = load_dataset("emnist", root=root, split="test", verify=False, dtype=torch.uint8)
    assert torch.equal(loaded.x[0, 0], torch.from_numpy(x[0].T.copy()))
    assert loaded.num_classes == 47 and loaded.classes[10] == "A" and loaded.classes[46] == "t"


# ---------------------------------------------------------------- CIFAR, STL-10, SVHN, USPS
def test_cifar10_python_batches(root):
    folder = root / "cifar10" / "cifar-10-batches-py"
    for i in range(1, 6): write_cifar_batch(folder / f"data_batch_{i}", images(2, (3, 32, 32), i), [i, i + 1])
    test_x = images(3, (3, 32, 32), 9)
    write_cifar_batch(folder / "test_batch", test_x, [0, 9, 5])
    with open(folder / "batches.meta", "wb") as f:
        pickle.dump({b"label_names": [b"airplane", b"automobile", b"bird", b"cat", b"deer", b"dog", b"frog", b"horse", b"ship", b"truck"]}, f, protocol=2)
    train = load_dataset("cifar10", root=root, verify=False)
    assert train.x.shape == (10, 3, 32, 32) and train.y.tolist() == [1, 2, 2, 3, 3, 4, 4, 5, 5, 6]
    test = load_dataset("cifar10", root=root, split="test", verify=False, dtype=torch.uint8)
    assert torch.equal(test.x, torch.from_numpy(test_x)) and test.classes[1] == "automobile"


def test_cifar10_missing_batch_is_named(root):
    folder = root / "cifar10" / "cifar-10-batches-py"
    for i in (1, 2, 4, 5): write_cifar_batch(folder / f"data_batch_{i}", images(1, (3, 32, 32)), [0])
    with pytest.raises(DatasetNotFoundError, match="data_batch_3"):
        load_dataset("cifar10", root=root, verify=False)


def test_cifar10_npz_subset_layout_carries_a_note(root):
    (root / "cifar10").mkdir()
    np.savez(root / "cifar10" / "cifar10_train_1000perclass.npz", x=images(4, (32, 32, 3)), y=np.array([0, 1, 2, 3], np.uint8),
             classes=np.array(["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]))
    loaded = load_dataset("cifar10", root=root, verify=False)
    assert loaded.x.shape == (4, 3, 32, 32) and "JPEG" in loaded.note and "subset" in loaded.note


def test_cifar100_fine_labels_and_meta(root):
    folder = root / "cifar100" / "cifar-100-python"
    write_cifar_batch(folder / "test", images(3, (3, 32, 32)), [0, 99, 50], label_key="fine_labels")
    names = [f"name{i}" for i in range(100)]
    with open(folder / "meta", "wb") as f: pickle.dump({"fine_label_names": names, "coarse_label_names": []}, f)
    loaded = load_dataset("cifar100", root=root, split="test", verify=False)
    assert loaded.y.tolist() == [0, 99, 50] and loaded.classes == names


def test_cifar100_registry_class_names_without_meta(root):
    write_cifar_batch(root / "cifar100" / "cifar-100-python" / "train", images(1, (3, 32, 32)), [0], label_key="fine_labels")
    loaded = load_dataset("cifar100", root=root, verify=False)
    assert loaded.num_classes == 100 and loaded.classes[0] == "apple" and loaded.classes[-1] == "worm"


def test_stl10_binary_train_test_unlabeled(root):
    folder = root / "stl10" / "stl10_binary"; folder.mkdir(parents=True)
    pictures = images(3, (3, 96, 96))
    pictures.transpose(0, 1, 3, 2).tofile(folder / "train_X.bin")  # column-major, as published
    np.array([1, 5, 10], np.uint8).tofile(folder / "train_y.bin")
    pictures[:2].transpose(0, 1, 3, 2).tofile(folder / "unlabeled_X.bin")
    (folder / "class_names.txt").write_text("\n".join(DATASETS["stl10"].classes) + "\n")
    train = load_dataset("stl10", root=root, verify=False, dtype=torch.uint8)
    assert torch.equal(train.x, torch.from_numpy(pictures)) and train.y.tolist() == [0, 4, 9]
    unlabeled = load_dataset("stl10", root=root, split="unlabeled", verify=False)
    assert unlabeled.y.tolist() == [-1, -1] and unlabeled.class_counts().sum() == 0
    with pytest.raises(DatasetNotFoundError, match="test_X.bin"):
        load_dataset("stl10", root=root, split="test", verify=False)


def test_svhn_mat_maps_label_10_to_digit_0(root):
    x = images(3, (3, 32, 32))
    write_svhn_mat(root / "svhn" / "test_32x32.mat", x, [10, 1, 9])
    loaded = load_dataset("svhn", root=root, split="test", verify=False, dtype=torch.uint8)
    assert loaded.y.tolist() == [0, 1, 9] and torch.equal(loaded.x, torch.from_numpy(x))


def test_usps_libsvm_bz2_and_h5(root):
    folder = root / "usps"; folder.mkdir()
    line = lambda label, value: f"{label} " + " ".join(f"{i}:{value}" for i in range(1, 257))
    (folder / "usps.t.bz2").write_bytes(bz2.compress(f"{line(1, -1)}\n{line(10, 1)}\n".encode()))
    test = load_dataset("usps", root=root, split="test", verify=False, dtype=torch.uint8)
    assert test.x.shape == (2, 1, 16, 16) and test.y.tolist() == [0, 9]
    assert test.x[0].max() == 0 and test.x[1].min() == 255
    with h5py.File(folder / "usps.h5", "w") as store:  # used for the train split, whose .bz2 is absent
        store.create_dataset("train/data", data=np.linspace(0, 1, 3 * 256, dtype=np.float32).reshape(3, 256))
        store.create_dataset("train/target", data=np.array([3, 4, 5], np.int32))
    train = load_dataset("usps", root=root, verify=False)
    assert train.y.tolist() == [3, 4, 5] and abs(float(train.x[2, 0, 15, 15]) - 1.0) < 1e-6


def test_readers_agree_with_torchvision_where_it_reads_the_same_format(tmp_path):
    "torchvision as the reference: its IDX readers (uncompressed files only), and its SVHN and CIFAR-10 classes with their"
    "md5 checks bypassed (they refuse any file that is not the published one), read the arrays ours read."
    from unittest import mock
    import torchvision.datasets as tv
    from torchvision.datasets.mnist import read_image_file, read_label_file
    from fedlearn_nb.readers import read_cifar_batch, read_idx, read_svhn_mat
    pixels = images(5, (28, 28))
    assert np.array_equal(read_image_file(str(write_idx(tmp_path / "images", pixels))).numpy(), read_idx(tmp_path / "images"))
    assert np.array_equal(read_label_file(str(write_idx(tmp_path / "labels", np.array([3, 1, 4])))).numpy(), read_idx(tmp_path / "labels"))
    x = images(3, (3, 32, 32))
    write_svhn_mat(tmp_path / "svhn" / "test_32x32.mat", x, [10, 1, 9])
    with mock.patch.object(tv.SVHN, "_check_integrity", lambda self: True): theirs = tv.SVHN(str(tmp_path / "svhn"), split="test")
    ours = read_svhn_mat(tmp_path / "svhn" / "test_32x32.mat")
    assert np.array_equal(ours[0], theirs.data) and np.array_equal(ours[1], theirs.labels) and ours[1].tolist() == [0, 1, 9]
    folder = tmp_path / "cifar" / "cifar-10-batches-py"; folder.mkdir(parents=True)
    for i, name in enumerate(["data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5", "test_batch"]):
        with open(folder / name, "wb") as f:  # text keys: torchvision's class reads no other
            pickle.dump({"data": images(2, (3072,), i), "labels": [i, 9 - i]}, f, protocol=2)
    with open(folder / "batches.meta", "wb") as f: pickle.dump({"label_names": list("abcdefghij")}, f, protocol=2)
    with mock.patch("torchvision.datasets.cifar.check_integrity", lambda *a, **k: True): theirs = tv.CIFAR10(str(tmp_path / "cifar"), train=False)
    ours = read_cifar_batch(folder / "test_batch")
    assert np.array_equal(ours[0], theirs.data.transpose(0, 3, 1, 2)) and ours[1].tolist() == theirs.targets == [5, 4]


def test_usps_rounds_to_the_nearest_grey_level_where_torchvision_truncates(tmp_path):
    "(v + 1) / 2 * 255 for v = -0.8125 is 23.9: we read 24, torchvision's USPS 23; the ends -1 and 1 are 0 and 255 in both."
    import torchvision.datasets as tv
    from fedlearn_nb.readers import read_usps_libsvm
    values = np.array([-1, -0.8125, 0, 0.5, 1] + [-1] * 251)
    (tmp_path / "usps.t.bz2").write_bytes(bz2.compress(("3 " + " ".join(f"{i + 1}:{v:g}" for i, v in enumerate(values)) + "\n").encode()))
    ours, labels = read_usps_libsvm(tmp_path / "usps.t.bz2")
    theirs = tv.USPS(str(tmp_path), train=False)
    assert ours.reshape(-1)[:5].tolist() == [0, 24, 128, 191, 255] and labels.tolist() == theirs.targets == [2]
    assert theirs.data.reshape(-1)[:5].tolist() == [0, 23, 127, 191, 255]


# ---------------------------------------------------------------- MNIST-M, SynthDigits, Office-Caltech-10, DomainNet
def test_mnist_m_npz_with_subset_note(root):
    (root / "mnist_m").mkdir()
    np.savez(root / "mnist_m" / "mnist_m_train_first10000.npz", x=images(5, (32, 32, 3)), y=np.arange(5, dtype=np.uint8))
    loaded = load_dataset("mnist-m", root=root, verify=False)
    assert loaded.x.shape == (5, 3, 32, 32) and "first 5 of 59001" in loaded.note


def test_mnist_m_png_folder_layout(root):
    folder = root / "mnist_m" / "mnist_m" / "mnist_m_test"; folder.mkdir(parents=True)
    pixels = images(2, (32, 32, 3))
    for i in range(2): Image.fromarray(pixels[i]).save(folder / f"{i:08d}.png")
    (folder.parent / "mnist_m_test_labels.txt").write_text("00000000.png 7\n00000001.png 3\n")
    loaded = load_dataset("mnist_m", root=root, split="test", verify=False, dtype=torch.uint8)
    assert loaded.y.tolist() == [7, 3] and torch.equal(loaded.x, torch.from_numpy(pixels.transpose(0, 3, 1, 2).copy()))
    (folder / "00000001.png").unlink()
    with pytest.raises(DatasetNotFoundError, match="1 images listed"):
        load_dataset("mnist_m", root=root, split="test", verify=False)


def test_synth_digits_digit_five_and_ganin_formats(root):
    folder = root / "synth_digits"; folder.mkdir()
    scipy.io.savemat(folder / "syn_number.mat", {"train_data": images(3, (32, 32, 3)), "train_label": np.array([[1], [2], [10]]),
                                                 "test_data": images(2, (32, 32, 3)), "test_label": np.array([[4], [5]])})
    assert load_dataset("synth", root=root, verify=False).y.tolist() == [1, 2, 0]
    (folder / "syn_number.mat").unlink()
    write_svhn_mat(folder / "synth_test_32x32.mat", images(2, (3, 32, 32)), [6, 7])
    assert load_dataset("synthdigits", root=root, split="test", verify=False).y.tolist() == [6, 7]


def write_office_npz(folder, domain, counts, seed=0):
    folder.mkdir(parents=True, exist_ok=True)
    y = np.repeat(np.arange(10), counts).astype(np.uint8)
    np.savez(folder / f"{domain}_64x64.npz", x=images(len(y), (64, 64, 3), seed), y=y,
             classes=np.array(DATASETS["office_caltech10"].classes), files=np.array([f"f{i}.jpg" for i in range(len(y))]))


def test_office_npz_has_fixed_80_20_split(root):
    write_office_npz(root / "office_caltech10", "dslr", [10] * 10)
    train = load_dataset("office10", root=root, domain="dslr", verify=False)
    test = load_dataset("office10", root=root, domain="dslr", split="test", verify=False)
    assert train.class_counts().tolist() == [8] * 10 and test.class_counts().tolist() == [2] * 10
    assert train.image_shape == (3, 64, 64) and train.name == "office_caltech10/dslr/train"
    whole = load_dataset("office10", root=root, domain="dslr", split="all", verify=False, dtype=torch.uint8)
    assert len({bytes(img.numpy().tobytes()) for img in whole.x}) == 100  # train and test are disjoint


def test_office_jpg_folders_with_alias_names(root):
    folder = root / "office_caltech10" / "caltech10"
    write_jpgs(folder / "backpack", 5)
    write_jpgs(folder / "laptop", 5, seed=10)
    write_jpgs(folder / "not_a_class", 2)
    loaded = load_dataset("office_caltech10", root=root, domain="caltech", split="all", verify=False, image_size=16)
    assert loaded.x.shape == (10, 3, 16, 16) and loaded.class_counts().tolist() == [5, 0, 0, 0, 0, 5, 0, 0, 0, 0]


def test_domainnet_folders_and_split_lists(root):
    folder = root / "domainnet"
    write_jpgs(folder / "clipart" / "zebra", 2)
    write_jpgs(folder / "clipart" / "bird", 1)
    write_jpgs(folder / "clipart" / "aircraft_carrier", 1)  # not one of the 10 classes
    (folder / "txt").mkdir()
    (folder / "txt" / "clipart_train.txt").write_text(
        "clipart/aircraft_carrier/img_000.jpg 0\nclipart/zebra/img_000.jpg 344\nclipart/bird/img_000.jpg 23\nclipart/zebra/img_001.jpg 344\n")
    loaded = load_dataset("domainnet", root=root, domain="clipart", verify=False, image_size=24)
    assert loaded.y.tolist() == [9, 0, 9] and loaded.x.shape == (3, 3, 24, 24)
    with pytest.raises(DatasetNotFoundError, match="clipart_test.txt"):
        load_dataset("domainnet", root=root, domain="clipart", split="test", verify=False)


# ---------------------------------------------------------------- errors, checksums, downloads
@pytest.mark.parametrize("name", [n for n, info in DATASETS.items() if info.folder is not None])
def test_every_missing_dataset_says_what_and_where(root, name):
    info = DATASETS[name]
    with pytest.raises(DatasetNotFoundError) as caught:
        load_dataset(name, root=root, split=info.splits[-1], domain=info.domains[0] if info.domains else None)
    message = str(caught.value)
    assert isinstance(caught.value, FileNotFoundError)
    assert str(root / info.folder) in message and info.urls[0].split()[0] in message
    assert ("download = true" in message) == (info.downloader is not None)
    assert "Expected layout" in message and "data_root" in message


def test_unknown_names_list_the_known_ones():
    with pytest.raises(UnknownDatasetError, match="known datasets: .*mnist_m.*svhn"):
        load_dataset("mnist_n")
    with pytest.raises(ValueError, match="known benchmarks: digit5, office10, domainnet10, digits5lite"):
        load_benchmark("pacs")


def test_truncated_and_garbage_files_are_corrupt_errors(root):
    write_mnist(root / "mnist", "test", images(3, (28, 28)), [1, 2, 3])
    path = root / "mnist" / "t10k-images-idx3-ubyte.gz"
    path.write_bytes(gzip.compress(gzip.decompress(path.read_bytes())[:-5]))
    with pytest.raises(DatasetCorruptError, match="t10k-images-idx3-ubyte.gz is corrupt.*truncated"):
        load_dataset("mnist", root=root, split="test", verify=False)
    folder = root / "cifar100" / "cifar-100-python"; folder.mkdir(parents=True)
    (folder / "test").write_bytes(b"not a pickle")
    with pytest.raises(ValueError, match="cifar-100-python/test is corrupt"):
        load_dataset("cifar100", root=root, split="test", verify=False)


def test_checksums_are_checked_against_the_published_ones(root, monkeypatch):
    (root / "usps").mkdir()
    with h5py.File(root / "usps" / "usps.h5", "w") as store:
        for split in ("train", "test"):
            store.create_dataset(f"{split}/data", data=np.zeros((2, 256), np.float32))
            store.create_dataset(f"{split}/target", data=np.array([0, 1], np.int32))
    with pytest.raises(DatasetCorruptError, match="usps.h5 is corrupt.*checksum matches none.*sha256:734f88c5"):
        load_dataset("usps", root=root)
    digest = data.file_checksum(root / "usps" / "usps.h5", "sha256")
    monkeypatch.setitem(DATASETS, "usps", dataclasses.replace(DATASETS["usps"], checksums={"usps.h5": (f"sha256:{digest}",)}))
    assert len(load_dataset("usps", root=root)) == 2
    with monkeypatch.context() as patch:  # the second load does not hash the file again
        patch.setattr(hashlib, "new", lambda *a, **k: pytest.fail("re-hashed a file whose digest is cached"))
        assert len(load_dataset("usps", root=root, split="test")) == 2


def test_recompressed_gz_is_accepted_by_its_content_md5(root, monkeypatch):
    write_mnist(root / "mnist", "test", images(2, (28, 28)), [0, 1])
    folder = root / "mnist"
    content = {n: "md5:" + data.file_checksum(folder / f"{n}.gz", "md5", decompress=True)
               for n in ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}
    monkeypatch.setitem(DATASETS, "mnist", dataclasses.replace(DATASETS["mnist"], checksums={n: (c,) for n, c in content.items()}))
    assert load_dataset("mnist", root=root, split="test").y.tolist() == [0, 1]


def test_download_goes_through_torchvision_archives(root, monkeypatch):
    import torchvision
    from torchvision.datasets import utils
    calls = []
    def fake_download_and_extract(url, download_root, filename=None, md5=None, **kwargs):
        calls.append((url, filename, md5))
        folder = Path(download_root) / "cifar-10-batches-py"
        for i in range(1, 6): write_cifar_batch(folder / f"data_batch_{i}", images(1, (3, 32, 32)), [i])
        write_cifar_batch(folder / "test_batch", images(1, (3, 32, 32)), [0])
    monkeypatch.setattr(utils, "download_and_extract_archive", fake_download_and_extract)
    with pytest.raises(DatasetNotFoundError):
        load_dataset("cifar10", root=root, verify=False)  # download=False (the settings) never downloads
    assert calls == []
    monkeypatch.setenv("FEDLEARN_DOWNLOAD", "true")  # the setting turns downloads on
    assert load_dataset("cifar10", root=root, verify=False).y.tolist() == [1, 2, 3, 4, 5]
    assert calls == [(torchvision.datasets.CIFAR10.url, "cifar-10-python.tar.gz", "c58f30108f718f92721af3b95e74349a")]


def test_download_of_single_files_and_mnist_classes(root, monkeypatch):
    import torchvision
    from torchvision.datasets import utils
    def fake_download_url(url, folder, filename=None, md5=None, **kwargs):
        assert url.endswith("test_32x32.mat") and md5 == "eb5a983be6a315427106f1b164d9cef3"
        write_svhn_mat(Path(folder) / filename, images(1, (3, 32, 32)), [3])
    monkeypatch.setattr(utils, "download_url", fake_download_url)
    assert load_dataset("svhn", root=root, split="test", download=True, verify=False).y.tolist() == [3]

    class FakeMNIST:
        def __init__(self, root, download, **kwargs):
            assert download
            write_mnist(Path(root) / "MNIST" / "raw", "train", images(2, (28, 28)), [4, 2], gz=False)
    monkeypatch.setattr(torchvision.datasets, "MNIST", FakeMNIST)
    assert load_dataset("mnist", root=root, download=True, verify=False).y.tolist() == [4, 2]


def test_datasets_without_a_download_say_so(root):
    with pytest.raises(DatasetNotFoundError, match="download it by hand from http://yaroslav.ganin.net"):
        load_dataset("mnist_m", root=root, download=True)


# ---------------------------------------------------------------- benchmarks
def test_digit5_benchmark_from_generated_files(root):
    write_mnist(root / "mnist", "train", images(20, (28, 28)), np.arange(20) % 10)
    write_mnist(root / "mnist", "test", images(10, (28, 28)), np.arange(10))
    (root / "usps").mkdir()
    with h5py.File(root / "usps" / "usps.h5", "w") as store:
        for split, n in (("train", 20), ("test", 10)):
            store.create_dataset(f"{split}/data", data=np.random.default_rng(0).random((n, 256), dtype=np.float32))
            store.create_dataset(f"{split}/target", data=np.arange(n) % 10)
    for split, n in (("train", 20), ("test", 10)):
        write_svhn_mat(root / "svhn" / f"{split}_32x32.mat", images(n, (3, 32, 32)), np.arange(n) % 10 + 1)
        write_svhn_mat(root / "synth_digits" / f"synth_{split}_32x32.mat", images(n, (3, 32, 32)), np.arange(n) % 10)
        (root / "mnist_m").mkdir(exist_ok=True)
        np.savez(root / "mnist_m" / f"mnist_m_{split}.npz", x=images(n, (32, 32, 3)), y=(np.arange(n) % 10).astype(np.uint8))
    bench = load_benchmark("digit5", root=root, verify=False, max_train_per_domain=10, seed=3)
    assert bench.domain_names == ["mnist", "usps", "svhn", "synth", "mnistm"] and not bench.stand_in
    for domain in bench:
        assert domain.train.image_shape == (3, 32, 32) and len(domain.train) == 10 and len(domain.test) == 10
        assert domain.train.class_counts().tolist() == [1] * 10  # stratified: 10 of 20 balanced images
        assert 0 <= domain.train.x.min() and domain.train.x.max() <= 1
    assert torch.equal(bench["usps"].train.x[:, 0], bench["usps"].train.x[:, 2])  # greyscale repeated
    again = load_benchmark("digit5", root=root, verify=False, max_train_per_domain=10, seed=3)
    assert all(torch.equal(a.train.x, b.train.x) for a, b in zip(bench, again))


def test_office10_benchmark_skips_missing_domains_with_a_warning(root):
    for index, domain in enumerate(("amazon", "webcam")): write_office_npz(root / "office_caltech10", domain, [5] * 10, seed=index)
    with pytest.raises(DatasetNotFoundError, match="caltech"):
        load_benchmark("office10", root=root, verify=False)
    with pytest.warns(UserWarning, match="skipped domain\\(s\\) caltech, dslr"):
        bench = load_benchmark("office10", root=root, verify=False, missing="skip", image_size=32)
    assert bench.domain_names == ["amazon", "webcam"] and bench.image_shape == (3, 32, 32)
    assert bench["webcam"].train.x.shape == (40, 3, 32, 32) and bench.classes[0] == "back_pack"
    only = load_benchmark("office10", root=root, verify=False, domains=["webcam"])
    assert only.domain_names == ["webcam"] and only.image_shape == (3, 64, 64)


def test_domainnet10_benchmark_has_the_train_augmentation(root):
    folder = root / "domainnet"
    write_jpgs(folder / "sketch" / "tiger", 2)
    for split in ("train", "test"):
        (folder / f"sketch_{split}.txt").write_text(f"sketch/tiger/img_00{0 if split == 'train' else 1}.jpg 5\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bench = load_benchmark("domainnet10", root=root, verify=False, missing="skip", image_size=32)
    assert bench.domain_names == ["sketch"] and bench["sketch"].train.y.tolist() == [5]
    assert bench.train_augmentation is not None
    assert bench.train_augmentation(bench["sketch"].train.x).shape == (1, 3, 32, 32)


def test_digits5lite_is_deterministic_and_labelled_as_stand_in():
    data.make_digits5lite.cache_clear()
    first = data.make_digits5lite()
    data.make_digits5lite.cache_clear()
    second = data.make_digits5lite()
    assert all(np.array_equal(first[d], second[d]) for d in data.DIGITS5LITE_DOMAINS)
    bench = load_benchmark("digits5lite", train_per_class=5, test_per_class=5)
    assert bench.stand_in and "STAND-IN" in bench.note and "STAND-IN" in bench[0].train.note
    assert [len(d.train) for d in bench] == [50] * 5 and [len(d.test) for d in bench] == [50] * 5
    assert not torch.equal(bench["mnist_like"].test.x, bench["usps_like"].test.x)
    tests = [load_dataset("digits5lite", domain=d, split="test") for d in ("mnist_like", "usps_like")]
    assert torch.equal(tests[0].y, tests[1].y) and len(tests[0]) == 450  # every domain: the same images and split
