"""MNIST, Fashion-MNIST and CIFAR-10 through torchvision's classes, every file checked against
torchvision's published MD5 before it is read."""

import contextlib
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from urllib.error import URLError

import numpy as np
import torch

from asyncfl.data.dataset import Dataset, DatasetInfo
from asyncfl.data.idx_files import IDX_DATASETS, raise_corrupt, read_idx_file
from asyncfl.data.vision import import_torchvision
from asyncfl.settings.errors import InputError

# The usual per-dataset normalisation constants (pixels in [0, 1]).
NORMALISATION = {
    "mnist": ((0.1307,), (0.3081,)),
    "fashion-mnist": ((0.2860,), (0.3530,)),
    "cifar10": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
}


def load_idx(name: str, root: Path, download: bool) -> Dataset:
    """MNIST / Fashion-MNIST: four verified IDX files, read by torchvision's class."""
    cls = getattr(import_torchvision().datasets, IDX_DATASETS[name])
    files = {filename: read_idx_file(cls.__name__, root, filename, md5) for filename, md5 in cls.resources}
    if None in files.values() and download:
        names = ", ".join(filename for filename, _ in cls.resources)
        raw_dir = root / cls.__name__ / "raw"
        writes = [root, root / cls.__name__, raw_dir]
        writes += [raw_dir / f for filename, _ in cls.resources for f in (filename, filename.removesuffix(".gz"))]
        run_download(name, f"{names} into {raw_dir}", lambda: cls(str(root), train=True, download=True), writes)
        files = {filename: read_idx_file(cls.__name__, root, filename, md5) for filename, md5 in cls.resources}
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
        writes = [root, archive, batch_dir]
        run_download(
            "cifar10", f"{cls.filename} into {root}", lambda: cls(str(root), train=True, download=True), writes
        )
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


def run_download(name: str, what_where: str, fetch: Callable[[], object], writes: list[Path]) -> None:
    """Run torchvision's download (progress to stderr); a network failure becomes one clear line.

    `writes` are the folders and files the download may create: those it created are removed when it
    fails, so a failed download leaves no empty folder tree or partial archive that a later run (or
    another dataset's check) would take for a copy; what was there before is never touched.
    """
    created = [path for path in writes if not path.exists() and not path.is_symlink()]
    try:
        with contextlib.redirect_stdout(sys.stderr):
            fetch()
    except (RuntimeError, URLError, OSError) as error:
        remove_created(created)
        reason = str(error).strip().splitlines()[-1]
        raise InputError(
            f"{name}: download failed ({reason}); offline? put {what_where}, or point --root at an existing copy"
        ) from None


def remove_created(created: list[Path]) -> None:
    """Remove what a failed download created of `created` (paths absent before it), outermost first."""
    for path in sorted(created, key=lambda p: len(p.parts)):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        elif path.exists() or path.is_symlink():
            path.unlink(missing_ok=True)
