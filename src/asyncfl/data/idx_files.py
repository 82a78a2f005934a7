"""The IDX files of MNIST and Fashion-MNIST, checked against their published MD5s before they are read:
numpy and the standard library only, so a command that needs only the labels (`asyncfl partition`) never
imports torch (torchvision's classes read the images: data/torchvision_sets.py)."""

import hashlib
import zlib
from pathlib import Path
from typing import NoReturn

import numpy as np

from asyncfl.settings.errors import InputError

IDX_DATASETS = {"mnist": "MNIST", "fashion-mnist": "FashionMNIST"}  # torchvision's class of each
# Published MD5s of the uncompressed IDX files: they identify the data whatever gzip made the archive.
IDX_CONTENT_MD5 = {
    "MNIST": {
        "train-images-idx3-ubyte": "6bbc9ace898e44ae57da46a324031adb",
        "train-labels-idx1-ubyte": "a25bea736e30d166cdddb491f175f624",
        "t10k-images-idx3-ubyte": "2646ac647ad5339dbf082846283269ea",
        "t10k-labels-idx1-ubyte": "27ae3e4e09519cfbb04c329615203637",
    },
    "FashionMNIST": {
        "train-images-idx3-ubyte": "f4a8712d7a061bf5bd6d2ca38dc4d50a",
        "train-labels-idx1-ubyte": "9018921c3c673c538a1fc5bad174d6f9",
        "t10k-images-idx3-ubyte": "8181f5470baa50b63fa0f6fddb340f0a",
        "t10k-labels-idx1-ubyte": "15d484375f8d13e6eb1aabb0c3f46965",
    },
}
# Bytes of each uncompressed IDX file (the same for both datasets): decompression stops past them,
# so a small archive that inflates to gigabytes is refused without filling memory.
IDX_SIZES = {
    "train-images-idx3-ubyte": 47_040_016,
    "train-labels-idx1-ubyte": 60_008,
    "t10k-images-idx3-ubyte": 7_840_016,
    "t10k-labels-idx1-ubyte": 10_008,
}


def read_idx_file(class_name: str, root: Path, filename: str, archive_md5: str) -> bytes | None:
    """The verified, uncompressed bytes of one IDX file, or None if no copy is present.

    Looks in torchvision's layout, then directly in `root`, for the archive, then for the
    extracted file. An archive passes with torchvision's archive MD5; a re-compressed one
    (Debian repacks its copy) or an extracted file passes with the published MD5 of the content.
    """
    name = filename.removesuffix(".gz")
    raw_dir = root / class_name / "raw"
    path = next((p for p in (raw_dir / filename, root / filename, raw_dir / name, root / name) if p.is_file()), None)
    if path is None:
        return None
    if path.stat().st_size > 2 * IDX_SIZES[name]:  # no copy of this file, compressed or not, is this large
        raise_corrupt(path)
    content = path.read_bytes()
    if path.suffix == ".gz":
        archive_matches = hashlib.md5(content).hexdigest() == archive_md5
        content = bounded_gunzip(content, IDX_SIZES[name], path)
        if archive_matches:
            return content
    if hashlib.md5(content).hexdigest() != IDX_CONTENT_MD5[class_name][name]:
        raise_corrupt(path, other_dataset(class_name, name, content))
    return content


def bounded_gunzip(data: bytes, size: int, path: Path) -> bytes:
    """The gzip stream `data` decompressed, refused as corrupt if it would exceed `size` bytes."""
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        content = inflater.decompress(data, size + 1)
    except zlib.error:  # zlib reports flipped bytes inside the stream
        raise_corrupt(path)
    if len(content) > size or not inflater.eof:
        raise_corrupt(path)
    return content


def other_dataset(class_name: str, name: str, content: bytes) -> str:
    """Which other IDX dataset `content` is, when it is one (a --dataset pointed at the wrong copy)."""
    digest = hashlib.md5(content).hexdigest()
    for other, sums in IDX_CONTENT_MD5.items():
        if other != class_name and sums[name] == digest:
            return {class_name: key for key, class_name in IDX_DATASETS.items()}[other]
    return ""


def raise_corrupt(path: Path, actual_dataset: str = "") -> NoReturn:
    """One line naming the bad file; the file stays in place for the user to inspect."""
    if actual_dataset:
        raise InputError(
            f"{path} is {actual_dataset}'s, not this dataset's; pass --dataset {actual_dataset} or another --root"
        )
    raise InputError(
        f"{path} is corrupt or truncated (its MD5 is not the published one); "
        "delete it and run `asyncfl data` again to fetch a fresh copy"
    )


TRAIN_LABELS = "train-labels-idx1-ubyte"
IDX_LABELS_HEADER = 8  # bytes: the magic number and the count, then one byte a label


def idx_train_labels(name: str, root: Path) -> np.ndarray:
    """The training labels of an IDX dataset (int64), read from its verified labels file alone."""
    class_name = IDX_DATASETS[name]
    content = read_idx_file(class_name, root, f"{TRAIN_LABELS}.gz", archive_md5="")  # passes on its content's MD5
    if content is None:
        raise InputError(
            f"{name}: {TRAIN_LABELS}.gz not found in {root / class_name / 'raw'} or {root}; run "
            f"`asyncfl data --dataset {name} --root {root}` where there is internet, or copy the dataset's files there"
        )
    return np.frombuffer(content, dtype=np.uint8, offset=IDX_LABELS_HEADER).astype(np.int64)
