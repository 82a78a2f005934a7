"""Datasets as whole tensors, loaded once: torchvision's classes, downloads and MD5s; scikit-learn's digits.

Images stay uint8 (N×C×H×W) until they reach the training device; `normalize` turns
them into floats there. Nothing here ever iterates over samples in Python.
"""

import contextlib
import hashlib
import io
import sys
import tempfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn
from urllib.error import URLError

import numpy as np
import torch

from asyncfl.data.vision import import_torchvision
from asyncfl.files import write_json, write_npz
from asyncfl.spec.errors import InputError
from asyncfl.spec.layout import DATA_DIR
from asyncfl.spec.names import DATASETS


@dataclass(frozen=True)
class DatasetInfo:
    """What models and the trainer need to know about a dataset."""

    name: str
    classes: tuple[str, ...]
    channels: int
    size: tuple[int, int]  # height, width
    mean: tuple[float, ...]  # per channel, of pixels scaled to [0, 1]
    std: tuple[float, ...]
    pixel_max: float  # the raw pixel value that scales to 1.0

    @property
    def num_classes(self) -> int:
        return len(self.classes)


@dataclass(frozen=True)
class Dataset:
    """A whole dataset in memory: uint8 images N×C×H×W and int64 labels."""

    train_images: torch.Tensor
    train_labels: torch.Tensor
    test_images: torch.Tensor
    test_labels: torch.Tensor
    info: DatasetInfo


# The usual per-dataset normalisation constants (pixels in [0, 1]).
NORMALISATION = {
    "mnist": ((0.1307,), (0.3081,)),
    "fashion-mnist": ((0.2860,), (0.3530,)),
    "cifar10": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
}
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
DIGITS_TEST_FRACTION = 0.2
# `asyncfl data --dataset digits` keeps the digits and their fixed split in ROOT/digits.npz, so that
# the pipeline's jobs need not import scikit-learn (about 1.7 s per process). The file is read only
# when its SHA-256 is this one, what scikit-learn's bundled data and the split give (as torchvision's
# MD5s vouch for MNIST); any other file is passed over and scikit-learn is asked again.
DIGITS_FILE = "digits.npz"
DIGITS_FILE_SHA256 = "504cc6b3911317d98e034085b6304274404ea17da31f27634c07a1fbc3fbaeab"


def default_root(name: str) -> Path:
    """Where the pipeline keeps a dataset: resources/data/{name}."""
    return Path(DATA_DIR) / name


def load_dataset(name: str, root: Path | None = None, download: bool = False) -> Dataset:
    """Load a whole dataset; `download` allows fetching missing files (login nodes only).

    `root` holds the dataset in torchvision's layout (ROOT/MNIST/raw/*.gz,
    ROOT/cifar-10-batches-py/) or, for the IDX datasets, the original archives directly
    (e.g. Debian's /usr/share/datasets/fashion-mnist). Every file is MD5-checked
    against torchvision's published sums before it is read.
    """
    if name not in DATASETS:
        raise InputError(f"unknown dataset {name!r}; choose one of {', '.join(DATASETS)}")
    root = Path(root) if root is not None else default_root(name)
    if name == "digits":
        return load_digits(root / DIGITS_FILE, download)
    if name == "cifar10":
        return load_cifar10(root, download)
    return load_idx(name, root, download)


def normalize(images: torch.Tensor, info: DatasetInfo) -> torch.Tensor:
    """uint8 images → normalised float32, on whatever device `images` lives."""
    shape = (1, -1, 1, 1)
    mean = torch.tensor(info.mean, device=images.device).view(shape)
    std = torch.tensor(info.std, device=images.device).view(shape)
    return (images.float() / info.pixel_max - mean) / std


def digits_from_sklearn() -> dict[str, np.ndarray]:
    """scikit-learn's bundled 8×8 digits and a fixed stratified train/test split (sorted indices)."""
    from sklearn.datasets import load_digits as sklearn_digits
    from sklearn.model_selection import train_test_split

    bunch = sklearn_digits()
    train_idx, test_idx = train_test_split(
        np.arange(len(bunch.target)), test_size=DIGITS_TEST_FRACTION, stratify=bunch.target, random_state=0
    )
    return {
        "images": bunch.images.astype(np.uint8),
        "labels": bunch.target.astype(np.int64),
        "train": np.sort(train_idx).astype(np.int64),
        "test": np.sort(test_idx).astype(np.int64),
    }


def read_prepared_digits(path: Path) -> dict[str, np.ndarray] | None:
    """The prepared digits at `path`, or None where there is no file or not the expected one."""
    if not path.is_file():
        return None
    content = path.read_bytes()  # read once: hashed, then parsed
    if hashlib.sha256(content).hexdigest() != DIGITS_FILE_SHA256:
        return None
    with np.load(io.BytesIO(content), allow_pickle=False) as npz:
        return {key: npz[key] for key in ("images", "labels", "train", "test")}


def load_digits(prepared: Path, download: bool = False) -> Dataset:
    """The digits from the prepared file when it is the expected one, else from scikit-learn (which
    `asyncfl data`, the pipeline's `download`, then writes to the prepared file)."""
    arrays = read_prepared_digits(prepared)
    if arrays is None:
        arrays = digits_from_sklearn()
        if download:
            write_npz(prepared, arrays)
    images = torch.from_numpy(arrays["images"]).unsqueeze(1)
    labels = torch.from_numpy(arrays["labels"])
    train_idx, test_idx = torch.from_numpy(arrays["train"]), torch.from_numpy(arrays["test"])
    pixel_max = 16.0
    train_pixels = images[train_idx].double() / pixel_max
    info = DatasetInfo(
        name="digits",
        classes=tuple(str(c) for c in range(10)),
        channels=1,
        size=(8, 8),
        mean=(round(train_pixels.mean().item(), 4),),
        std=(round(train_pixels.std().item(), 4),),
        pixel_max=pixel_max,
    )
    return Dataset(images[train_idx], labels[train_idx], images[test_idx], labels[test_idx], info)


def load_idx(name: str, root: Path, download: bool) -> Dataset:
    """MNIST / Fashion-MNIST: four verified IDX files, read by torchvision's class."""
    cls = getattr(import_torchvision().datasets, IDX_DATASETS[name])
    files = {filename: read_idx_file(cls, root, filename, md5) for filename, md5 in cls.resources}
    if None in files.values() and download:
        names = ", ".join(filename for filename, _ in cls.resources)
        run_download(
            name, f"{names} into {root / cls.__name__ / 'raw'}", lambda: cls(str(root), train=True, download=True)
        )
        files = {filename: read_idx_file(cls, root, filename, md5) for filename, md5 in cls.resources}
    missing = [filename for filename, content in files.items() if content is None]
    if missing:
        raise InputError(
            f"{name}: {', '.join(missing)} not found in {root / cls.__name__ / 'raw'} or {root}; run "
            f"`asyncfl data --dataset {name} --root {root}` where there is internet, or copy those files there"
        )
    # torchvision reads from ROOT/<Class>/raw; a scratch copy of the verified bytes keeps
    # read-only sources (Debian's) usable and never lets an unverified extract through.
    with tempfile.TemporaryDirectory(prefix="asyncfl-") as stage:
        raw_dir = Path(stage) / cls.__name__ / "raw"
        raw_dir.mkdir(parents=True)
        for filename, content in files.items():
            (raw_dir / filename.removesuffix(".gz")).write_bytes(content)
        train, test = cls(stage, train=True), cls(stage, train=False)
    mean, std = NORMALISATION[name]
    info = DatasetInfo(name, tuple(train.classes), 1, tuple(train.data.shape[1:]), mean, std, 255.0)
    return Dataset(
        train.data.unsqueeze(1).contiguous(),
        train.targets.long(),
        test.data.unsqueeze(1).contiguous(),
        test.targets.long(),
        info,
    )


def read_idx_file(cls: type, root: Path, filename: str, archive_md5: str) -> bytes | None:
    """The verified, uncompressed bytes of one IDX file, or None if no copy is present.

    Looks in torchvision's layout, then directly in `root`, for the archive, then for the
    extracted file. An archive passes with torchvision's archive MD5; a re-compressed one
    (Debian repacks its copy) or an extracted file passes with the published MD5 of the content.
    """
    name = filename.removesuffix(".gz")
    raw_dir = root / cls.__name__ / "raw"
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
    if hashlib.md5(content).hexdigest() != IDX_CONTENT_MD5[cls.__name__][name]:
        raise_corrupt(path, other_dataset(cls.__name__, name, content))
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


def load_cifar10(root: Path, download: bool) -> Dataset:
    """CIFAR-10's python batches; each is unpickled only after its MD5 matched."""
    cls = import_torchvision().datasets.CIFAR10
    batch_dir = root / cls.base_folder
    files = cls.train_list + cls.test_list + [[cls.meta["filename"], cls.meta["md5"]]]
    present = [(batch_dir / f, md5) for f, md5 in files if (batch_dir / f).is_file()]
    for path, md5 in present:
        require_md5(path, md5)
    if len(present) < len(files):
        archive = root / cls.filename
        if archive.is_file():
            require_md5(archive, cls.tgz_md5)
        elif not download:
            raise InputError(
                f"cifar10: {batch_dir} is incomplete and {archive} is missing; run "
                f"`asyncfl data --dataset cifar10 --root {root}` where there is internet, or put {cls.filename} there"
            )
        run_download("cifar10", f"{cls.filename} into {root}", lambda: cls(str(root), train=True, download=True))
    train = cls(str(root), train=True)
    test = cls(str(root), train=False)
    mean, std = NORMALISATION["cifar10"]
    info = DatasetInfo("cifar10", tuple(train.classes), 3, (32, 32), mean, std, 255.0)
    return Dataset(
        channels_first(train.data),
        torch.tensor(train.targets),
        channels_first(test.data),
        torch.tensor(test.targets),
        info,
    )


def channels_first(images: np.ndarray) -> torch.Tensor:
    """N×H×W×C uint8 (torchvision's CIFAR layout) → N×C×H×W tensor."""
    return torch.from_numpy(images).permute(0, 3, 1, 2).contiguous()


def require_md5(path: Path, expected: str) -> None:
    """Refuse a file whose MD5 is not the published one."""
    if not import_torchvision().datasets.utils.check_integrity(str(path), expected):
        raise_corrupt(path)


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


def run_download(name: str, what_where: str, fetch: Callable[[], object]) -> None:
    """Run torchvision's download (progress to stderr); a network failure becomes one clear line."""
    try:
        with contextlib.redirect_stdout(sys.stderr):
            fetch()
    except (RuntimeError, URLError, OSError) as error:
        reason = str(error).strip().splitlines()[-1]
        raise InputError(
            f"{name}: download failed ({reason}); offline? put {what_where}, or point --root at an existing copy"
        ) from None


def prepare_dataset(name: str, root: Path | None, summary: Path | None = None) -> list[str]:
    """`asyncfl data`: download when needed, verify, and describe a dataset (also as JSON to `summary`)."""
    root = root or default_root(name)
    dataset = load_dataset(name, root, download=True)
    info = dataset.info
    train_per_class = np.bincount(dataset.train_labels.numpy(), minlength=info.num_classes)
    if summary:
        write_json(
            summary,
            {
                "dataset": info.name,
                "root": str(root),
                "train": len(dataset.train_labels),
                "test": len(dataset.test_labels),
                "classes": list(info.classes),
                "train_per_class": train_per_class.tolist(),
                "checksums_verified": True,
            },
        )
    return [
        f"{info.name}: ready in {root} (checksums verified)",
        f"  train {len(dataset.train_labels)}  test {len(dataset.test_labels)}  "
        f"images {info.channels}×{info.size[0]}×{info.size[1]}  classes {info.num_classes}",
        f"  train samples per class: {' '.join(str(c) for c in train_per_class)}",
    ]
