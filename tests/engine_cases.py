"""A tiny dataset and partitions shared by the engine, check and theory tests (not a test module)."""

import numpy as np
import torch

from asyncfl.data.dataset import Dataset, DatasetInfo
from asyncfl.data.partition import Partition


def tiny_dataset(n: int, seed: int = 0) -> Dataset:
    generator = torch.Generator().manual_seed(seed)
    images = torch.randint(0, 256, (n, 1, 8, 8), dtype=torch.uint8, generator=generator)
    labels = torch.arange(n) % 4
    info = DatasetInfo("tiny", ("a", "b", "c", "d"), 1, (8, 8), (0.5,), (0.25,), 255.0)
    return Dataset(images, labels, images[:16], labels[:16], info)


def contiguous_partition(sizes: list[int]) -> Partition:
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    return Partition(np.arange(offsets[-1], dtype=np.int64), offsets, "tiny")
