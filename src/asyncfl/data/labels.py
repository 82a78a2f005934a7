"""Where each dataset lives by default, and its training labels alone: what `asyncfl partition` reads.
numpy only for digits, MNIST and Fashion-MNIST (a partition job then starts in a fraction of a second,
not the seconds torch's import takes); CIFAR-10's labels sit in the pickled batches torchvision's class
reads, so they come with the whole dataset."""

from pathlib import Path

import numpy as np

from asyncfl.data.digits import DIGITS_FILE, digits_arrays
from asyncfl.data.idx_files import IDX_DATASETS, idx_train_labels
from asyncfl.planning.layout import DATA_DIR
from asyncfl.settings.errors import InputError
from asyncfl.settings.names import DATASETS


def default_root(name: str) -> Path:
    """Where the pipeline keeps a dataset: resources/data/{name}."""
    return Path(DATA_DIR) / name


def dataset_root(name: str, root: Path | None) -> Path:
    """The folder a known dataset is read from: `root`, else its default; an unknown name is one line."""
    if name not in DATASETS:
        raise InputError(f"unknown dataset {name!r}; choose one of {', '.join(DATASETS)}")
    return Path(root) if root is not None else default_root(name)


def train_labels(name: str, root: Path | None = None) -> np.ndarray:
    """The training set's labels (int64), in the order of the training set `load_dataset` gives."""
    root = dataset_root(name, root)
    if name == "digits":
        arrays = digits_arrays(root / DIGITS_FILE)
        return arrays["labels"][arrays["train"]]
    if name in IDX_DATASETS:
        return idx_train_labels(name, root)
    from asyncfl.data.torchvision_sets import load_cifar10  # torch and torchvision: CIFAR-10's pickled batches

    return load_cifar10(root, download=False).train_labels.numpy()
