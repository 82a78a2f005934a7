"""A dataset in memory and what the models and trainers know of it.

Images stay uint8 (N×C×H×W) until they reach the training device; `normalize` turns
them into floats there. Nothing here ever iterates over samples in Python.
"""

import hashlib
from dataclasses import dataclass, field

import numpy as np
import torch


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
    on_devices: dict[str, tuple[torch.Tensor, torch.Tensor]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    held_on_devices: dict[tuple[str, str], tuple[torch.Tensor, torch.Tensor]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def normalized(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """The training and test images normalised on `device`, made once per device: the runs of one
        process (train-many's, stepped together) only read them, so they share one copy, not one each."""
        if str(device) not in self.on_devices:
            train, test = self.train_images.to(device), self.test_images.to(device)
            self.on_devices[str(device)] = normalize(train, self.info), normalize(test, self.info)
        return self.on_devices[str(device)]

    def held_out(self, device: torch.device, positions: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """The normalised training images and labels at `positions` (a validation split) on `device`,
        made once per device and split: the runs of one partition stepped together share one copy
        (Fashion-MNIST's 6,000 validation images are 19 MB, which 80 runs held 80 times). The split is
        known by its positions' bytes, so two partitions with the same split share it and no other does."""
        key = (str(device), hashlib.sha256(np.ascontiguousarray(positions, dtype=np.int64).tobytes()).hexdigest())
        if key not in self.held_on_devices:
            images, _ = self.normalized(device)
            held = torch.from_numpy(np.asarray(positions, dtype=np.int64)).to(device)
            self.held_on_devices[key] = images[held], self.train_labels.to(device)[held]
        return self.held_on_devices[key]


def normalize(images: torch.Tensor, info: DatasetInfo) -> torch.Tensor:
    """uint8 images → normalised float32, on whatever device `images` lives; in place after the one
    conversion, so that a large training set costs one float copy at its peak, not three."""
    shape = (1, -1, 1, 1)
    mean = torch.tensor(info.mean, device=images.device).view(shape)
    std = torch.tensor(info.std, device=images.device).view(shape)
    return images.to(torch.float32, copy=True).div_(info.pixel_max).sub_(mean).div_(std)
