"""The model and client datasets APPFL's agents load by file and function name (its configs'
`model_path`/`model_name` and `dataset_path`/`dataset_name`), from the comparison's exported work."""

import functools
from pathlib import Path

import torch
from common import Work
from torch.utils.data import TensorDataset


@functools.cache
def work(folder: str) -> Work:
    """Loaded once per process, however many agents ask."""
    return Work.load(Path(folder))


def cnn(folder: str) -> torch.nn.Module:
    return work(folder).model()


def client_data(folder: str, client: int) -> tuple[TensorDataset, TensorDataset]:
    """The client's training samples, and no validation set (the test set is evaluated after the run)."""
    images, labels = work(folder).client_data(client)
    return TensorDataset(images, labels), TensorDataset(images[:0], labels[:0])


def accuracy(y_true, y_pred) -> float:
    """The training metric APPFL's trainer logs every epoch (it requires one)."""
    return float((y_pred.argmax(axis=1) == y_true).mean())
