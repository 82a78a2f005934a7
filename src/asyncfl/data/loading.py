"""The datasets asyncfl reads, whole and once: where each lives and which reader loads it
(`digits`, `torchvision_sets`), and `asyncfl data`."""

from pathlib import Path

import numpy as np
import torch

from asyncfl.data.dataset import Dataset, DatasetInfo
from asyncfl.data.digits import DIGITS_FILE, digits_arrays
from asyncfl.data.labels import dataset_root, default_root
from asyncfl.data.torchvision_sets import load_cifar10, load_idx
from asyncfl.files import write_json


def load_dataset(name: str, root: Path | None = None, download: bool = False) -> Dataset:
    """Load a whole dataset; `download` allows fetching missing files (login nodes only).

    `root` holds the dataset in torchvision's layout (ROOT/MNIST/raw/*.gz,
    ROOT/cifar-10-batches-py/) or, for the IDX datasets, the original archives directly
    (e.g. Debian's /usr/share/datasets/fashion-mnist). Every file is MD5-checked
    against torchvision's published sums before it is read.
    """
    root = dataset_root(name, root)
    if name == "digits":
        return digits_dataset(digits_arrays(root / DIGITS_FILE, download))
    if name == "cifar10":
        return load_cifar10(root, download)
    return load_idx(name, root, download)


def digits_dataset(arrays: dict[str, np.ndarray]) -> Dataset:
    """The digits' `Dataset`: their fixed split, pixels 0–16, normalised by the training images' statistics."""
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
