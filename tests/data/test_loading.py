"""Datasets: small IDX and CIFAR files read through torchvision's code, digits, Debian's Fashion-MNIST."""

import gzip
import hashlib
import os
import pickle
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch

from asyncfl.cli import main
from asyncfl.data import digits
from asyncfl.data.dataset import normalize
from asyncfl.data.idx_files import IDX_CONTENT_MD5
from asyncfl.data.labels import train_labels
from asyncfl.data.loading import digits_dataset, load_dataset
from asyncfl.data.torchvision_sets import NORMALISATION
from asyncfl.data.vision import import_torchvision
from asyncfl.files import sha256, write_npz
from asyncfl.settings.errors import InputError
from conftest import skip_unless

datasets = import_torchvision().datasets

IDX_SPLITS = {"train": 50, "t10k": 20}
OFFLINE = {**os.environ, "http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9"}
DEBIAN_FASHION = Path("/usr/share/datasets/fashion-mnist")


def md5(content: bytes) -> str:
    return hashlib.md5(content).hexdigest()


def idx_bytes(array: np.ndarray) -> bytes:
    """The IDX format: magic (0, 0, 0x08 = uint8, ndim), big-endian dimensions, then the raw bytes."""
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    return header + array.astype(np.uint8).tobytes()


def make_idx_files(rng: np.random.Generator) -> dict[str, bytes]:
    """Uncompressed IDX contents of a tiny MNIST, by torchvision's file names."""
    files = {}
    for split, n in IDX_SPLITS.items():
        files[f"{split}-images-idx3-ubyte"] = idx_bytes(rng.integers(0, 256, (n, 28, 28)))
        files[f"{split}-labels-idx1-ubyte"] = idx_bytes(np.arange(n) % 10)
    return files


@pytest.fixture
def tiny_mnist(tmp_path, monkeypatch):
    """Tiny MNIST archives in torchvision's layout; the checksum tables point at them."""
    contents = make_idx_files(np.random.default_rng(0))
    archives = {f"{name}.gz": gzip.compress(content, mtime=0) for name, content in contents.items()}
    monkeypatch.setattr(datasets.MNIST, "resources", [(f, md5(a)) for f, a in archives.items()])
    monkeypatch.setitem(IDX_CONTENT_MD5, "MNIST", {name: md5(c) for name, c in contents.items()})
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for filename, archive in archives.items():
        (raw / filename).write_bytes(archive)
    return tmp_path, contents


def test_idx_files_load_through_torchvision(tiny_mnist):
    root, contents = tiny_mnist
    dataset = load_dataset("mnist", root)
    images = np.frombuffer(contents["train-images-idx3-ubyte"], np.uint8, offset=16).reshape(-1, 1, 28, 28)
    assert dataset.train_images.dtype == torch.uint8 and dataset.train_labels.dtype == torch.int64
    assert np.array_equal(dataset.train_images.numpy(), images)
    assert dataset.train_labels.tolist() == [i % 10 for i in range(IDX_SPLITS["train"])]
    assert dataset.test_images.shape == (IDX_SPLITS["t10k"], 1, 28, 28)
    info = dataset.info
    assert (info.channels, info.size, info.num_classes, info.pixel_max) == (1, (28, 28), 10, 255.0)


def test_the_labels_alone_are_the_whole_datasets_training_labels(tiny_mnist):
    """What `asyncfl partition` reads without torch (the labels file, checked by its content's MD5) is what
    torchvision's class reads; digits and Debian's Fashion-MNIST likewise."""
    root, _ = tiny_mnist
    expected = load_dataset("mnist", root).train_labels.numpy()
    labels = train_labels("mnist", root)
    assert labels.dtype == np.int64 and np.array_equal(labels, expected)
    assert np.array_equal(train_labels("digits"), load_dataset("digits").train_labels.numpy())
    skip_unless(DEBIAN_FASHION.is_dir(), f"Debian's dataset-fashion-mnist is not installed ({DEBIAN_FASHION})")
    fashion = train_labels("fashion-mnist", DEBIAN_FASHION)
    assert np.array_equal(fashion, load_dataset("fashion-mnist", DEBIAN_FASHION).train_labels.numpy())


def test_a_missing_or_damaged_labels_file_is_one_line_from_partition(tiny_mnist, capsys):
    root, _ = tiny_mnist
    labels = root / "MNIST" / "raw" / "train-labels-idx1-ubyte.gz"
    partition = ["partition", "--dataset", "mnist", "--root", str(root), "--clients", "2", "--alpha", "1"]
    partition += ["--seed", "0"]
    good = labels.read_bytes()
    labels.write_bytes(good[:-5])
    assert main([*partition, "--out", str(root / "p.npz")]) == 1
    err = capsys.readouterr().err
    assert "train-labels-idx1-ubyte.gz is corrupt or truncated" in err and len(err.strip().splitlines()) == 1, err
    labels.unlink()
    assert main([*partition, "--out", str(root / "p.npz")]) == 1
    err = capsys.readouterr().err
    assert "mnist: train-labels-idx1-ubyte.gz not found in" in err and "asyncfl data --dataset mnist" in err, err
    assert not (root / "p.npz").exists()


def test_flat_recompressed_copy_is_accepted_by_content_checksum(tiny_mnist, tmp_path_factory):
    """Debian re-gzips its copy: archive MD5s differ, the contents' MD5s still match."""
    _, contents = tiny_mnist
    flat = tmp_path_factory.mktemp("flat")
    for name, content in contents.items():
        (flat / f"{name}.gz").write_bytes(gzip.compress(content, mtime=1234567))
    dataset = load_dataset("mnist", flat)
    assert len(dataset.train_labels) == IDX_SPLITS["train"]


def test_truncated_archive_is_reported_and_kept(tiny_mnist):
    root, _ = tiny_mnist
    archive = root / "MNIST" / "raw" / "train-images-idx3-ubyte.gz"
    truncated = archive.read_bytes()[:1000]
    archive.write_bytes(truncated)
    with pytest.raises(InputError, match="train-images-idx3-ubyte.gz is corrupt or truncated"):
        load_dataset("mnist", root)
    assert archive.read_bytes() == truncated  # never deleted or overwritten


@pytest.mark.parametrize("offsets", [(100,), (5000,), (3,)], ids=["byte100", "byte5000", "header3"])
def test_gzip_corruption_is_one_line_from_the_command(tiny_mnist, capsys, offsets):
    """Flipped bytes that gzip's zlib layer reports (not only truncation): the CLI's one error line."""
    root, _ = tiny_mnist
    archive = root / "MNIST" / "raw" / "train-images-idx3-ubyte.gz"
    content = bytearray(archive.read_bytes())
    for offset in offsets:
        content[offset] ^= 0xFF
    archive.write_bytes(bytes(content))
    assert main(["data", "--dataset", "mnist", "--root", str(root)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("asyncfl data: error: ") and len(err.strip().splitlines()) == 1, err
    assert "train-images-idx3-ubyte.gz is corrupt or truncated" in err


def test_altered_extracted_file_is_reported(tiny_mnist):
    root, contents = tiny_mnist
    raw = root / "MNIST" / "raw"
    (raw / "t10k-labels-idx1-ubyte.gz").unlink()
    altered = bytearray(contents["t10k-labels-idx1-ubyte"])
    altered[-1] ^= 1
    (raw / "t10k-labels-idx1-ubyte").write_bytes(altered)
    with pytest.raises(InputError, match="t10k-labels-idx1-ubyte is corrupt"):
        load_dataset("mnist", root)


def test_missing_files_without_download_say_what_to_run(tmp_path):
    with pytest.raises(InputError, match=r"asyncfl data --dataset mnist"):
        load_dataset("mnist", tmp_path)


@pytest.mark.subprocess
def test_offline_without_copy_is_one_clear_line(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "asyncfl", "data", "--dataset", "fashion-mnist", "--root", str(tmp_path)],
        capture_output=True,
        text=True,
        env=OFFLINE,
        timeout=300,
    )
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert "Traceback" not in result.stderr
    assert lines[-1].startswith("asyncfl data: error: fashion-mnist: download failed")
    assert "train-images-idx3-ubyte.gz" in lines[-1] and str(tmp_path / "FashionMNIST" / "raw") in lines[-1]


def offline(monkeypatch):
    for key, value in OFFLINE.items():
        if key.endswith("_proxy"):
            monkeypatch.setenv(key, value)


def test_a_failed_download_into_a_new_root_leaves_no_folder(tmp_path, monkeypatch):
    offline(monkeypatch)
    root = tmp_path / "new" / "datasets"
    for name in ("fashion-mnist", "cifar10"):
        with pytest.raises(InputError, match=f"{name}: download failed"):
            load_dataset(name, root, download=True)
        assert not root.exists(), name  # an empty tree would read as a copy to the next check
    assert (tmp_path / "new").is_dir()  # the user's folder above the root is left as it was


def test_a_failed_download_keeps_what_was_there_and_removes_only_its_own(tmp_path, monkeypatch):
    offline(monkeypatch)
    raw = tmp_path / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)
    (raw / "notes.txt").write_text("mine")
    (tmp_path / "MNIST").mkdir()
    with pytest.raises(InputError, match="fashion-mnist: download failed"):
        load_dataset("fashion-mnist", tmp_path, download=True)
    assert sorted(p.name for p in raw.iterdir()) == ["notes.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["FashionMNIST", "MNIST"]
    with pytest.raises(InputError, match="cifar10: download failed"):
        load_dataset("cifar10", tmp_path, download=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["FashionMNIST", "MNIST"]


class Tripwire:
    """Unpickling this creates a marker file: proof that a file was unpickled."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return open, (str(self.marker), "w")


@pytest.fixture
def tiny_cifar(tmp_path, monkeypatch):
    """Tiny CIFAR-10 python batches and their tar.gz; torchvision's checksum tables point at them."""
    rng = np.random.default_rng(1)
    batches = {}
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {"data": rng.integers(0, 256, (8, 3072), dtype=np.uint8), "labels": list(rng.integers(0, 10, 8))}
        batches[name] = pickle.dumps(batch)
    batches["batches.meta"] = pickle.dumps({"label_names": [f"class{i}" for i in range(10)]})
    batch_dir = tmp_path / "cifar-10-batches-py"
    batch_dir.mkdir()
    for name, content in batches.items():
        (batch_dir / name).write_bytes(content)
    cls = datasets.CIFAR10
    monkeypatch.setattr(cls, "train_list", [[f"data_batch_{i}", md5(batches[f"data_batch_{i}"])] for i in range(1, 6)])
    monkeypatch.setattr(cls, "test_list", [["test_batch", md5(batches["test_batch"])]])
    monkeypatch.setattr(cls, "meta", {**cls.meta, "md5": md5(batches["batches.meta"])})
    return tmp_path, batches


def test_cifar_batches_load_channels_first(tiny_cifar):
    root, batches = tiny_cifar
    dataset = load_dataset("cifar10", root)
    first = pickle.loads(batches["data_batch_1"])
    assert dataset.train_images.shape == (40, 3, 32, 32) and dataset.test_images.shape == (8, 3, 32, 32)
    assert np.array_equal(dataset.train_images[:8].numpy(), first["data"].reshape(8, 3, 32, 32))
    assert dataset.train_labels[:8].tolist() == [int(x) for x in first["labels"]]
    assert dataset.info.classes[0] == "class0" and dataset.info.channels == 3


def test_cifar_batch_is_unpickled_only_after_its_md5_matched(tiny_cifar, tmp_path_factory):
    root, _ = tiny_cifar
    marker = tmp_path_factory.mktemp("marker") / "unpickled"
    (root / "cifar-10-batches-py" / "data_batch_3").write_bytes(pickle.dumps(Tripwire(marker)))
    with pytest.raises(InputError, match="data_batch_3 is corrupt"):
        load_dataset("cifar10", root)
    assert not marker.exists()


def test_cifar_archive_is_verified_and_extracted_offline(tiny_cifar, tmp_path_factory, monkeypatch):
    root, _ = tiny_cifar
    good, bad = tmp_path_factory.mktemp("good"), tmp_path_factory.mktemp("bad")
    with tarfile.open(good / datasets.CIFAR10.filename, "w:gz") as tar:
        tar.add(root / "cifar-10-batches-py", arcname="cifar-10-batches-py")
    archive = (good / datasets.CIFAR10.filename).read_bytes()
    monkeypatch.setattr(datasets.CIFAR10, "tgz_md5", md5(archive))
    assert len(load_dataset("cifar10", good).train_labels) == 40
    (bad / datasets.CIFAR10.filename).write_bytes(archive[:-100])
    with pytest.raises(InputError, match="cifar-10-python.tar.gz is corrupt"):
        load_dataset("cifar10", bad)


def test_digits_split_is_stratified_and_deterministic():
    first, second = load_dataset("digits"), load_dataset("digits")
    assert torch.equal(first.train_images, second.train_images) and torch.equal(first.test_labels, second.test_labels)
    assert (len(first.train_labels), len(first.test_labels)) == (1437, 360)
    test_share = torch.bincount(first.test_labels) / (
        torch.bincount(first.test_labels) + torch.bincount(first.train_labels)
    )
    assert torch.allclose(test_share, torch.full((10,), 0.2), atol=0.01)
    assert first.train_images.shape[1:] == (1, 8, 8) and first.info.pixel_max == 16.0


def test_prepared_digits_are_scikit_learns_and_a_changed_copy_is_passed_over(tmp_path):
    """`asyncfl data` writes the digits and their split to ROOT/digits.npz; read back, they are exactly
    what scikit-learn gives. A copy whose bytes differ is not read (scikit-learn is asked again)."""
    assert main(["data", "--dataset", "digits", "--root", str(tmp_path)]) == 0
    prepared = tmp_path / digits.DIGITS_FILE
    assert sha256(prepared) == digits.DIGITS_FILE_SHA256
    fresh, cached = digits_dataset(digits.digits_arrays(tmp_path / "absent.npz")), load_dataset("digits", tmp_path)
    for name in ("train_images", "train_labels", "test_images", "test_labels"):
        assert torch.equal(getattr(fresh, name), getattr(cached, name)), name
    assert fresh.info == cached.info
    tampered = dict(np.load(prepared))
    tampered["labels"] = (tampered["labels"] + 1) % 10
    write_npz(prepared, tampered)
    assert digits.read_prepared_digits(prepared) is None
    assert torch.equal(load_dataset("digits", tmp_path).train_labels, fresh.train_labels)


def test_normalize_standardises_training_pixels():
    dataset = load_dataset("digits")
    pixels = normalize(dataset.train_images, dataset.info)
    assert pixels.dtype == torch.float32
    assert abs(pixels.mean().item()) < 1e-3 and abs(pixels.std().item() - 1) < 1e-3


def test_unknown_dataset_is_named():
    with pytest.raises(InputError, match="unknown dataset 'svhn'"):
        load_dataset("svhn")


def test_real_fashion_mnist_from_debian():
    skip_unless(DEBIAN_FASHION.is_dir(), f"{DEBIAN_FASHION} missing: apt-get install dataset-fashion-mnist")
    dataset = load_dataset("fashion-mnist", DEBIAN_FASHION)
    assert (len(dataset.train_labels), len(dataset.test_labels)) == (60000, 10000)
    assert torch.bincount(dataset.train_labels).tolist() == [6000] * 10
    assert torch.bincount(dataset.test_labels).tolist() == [1000] * 10
    assert dataset.info.classes[0] == "T-shirt/top"
    assert NORMALISATION["fashion-mnist"][0][0] == pytest.approx(
        dataset.train_images.float().mean().item() / 255, abs=1e-3
    )


def test_the_wrong_dataset_name_for_a_real_copy_says_which_it_is(tmp_path):
    """--dataset mnist pointed at Fashion-MNIST: the file is not corrupt, and is not to be deleted."""
    skip_unless(DEBIAN_FASHION.is_dir(), f"{DEBIAN_FASHION} missing: apt-get install dataset-fashion-mnist")
    with pytest.raises(InputError, match="is fashion-mnist's, not this dataset's; pass --dataset fashion-mnist"):
        load_dataset("mnist", DEBIAN_FASHION)
    assert not list(DEBIAN_FASHION.glob("*/raw"))  # nothing written into the read-only copy
