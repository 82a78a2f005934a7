"""The model and client datasets APPFL's agents load by file and function name (its configs'
`model_path`/`model_name` and `dataset_path`/`dataset_name`), from the comparison's exported work."""

import torch
from common import loaded
from torch.utils.data import TensorDataset


def cnn(folder: str) -> torch.nn.Module:
    return loaded(folder).model()


def client_data(folder: str, client: int) -> tuple[TensorDataset, TensorDataset]:
    """The client's training samples, and no validation set (the test set is evaluated after the run)."""
    images, labels = loaded(folder).client_data(client)
    return TensorDataset(images, labels), TensorDataset(images[:0], labels[:0])


def accuracy(y_true, y_pred) -> float:
    """The training metric APPFL's trainer logs every epoch (it requires one)."""
    return float((y_pred.argmax(axis=1) == y_true).mean())
