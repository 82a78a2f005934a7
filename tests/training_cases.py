"""Small models and data shared by the trainer tests (not a test module)."""

import torch

from asyncfl.data.dataset import DatasetInfo
from asyncfl.models import build_model
from asyncfl.settings.random_streams import shuffle_key
from asyncfl.training.interface import LocalTask

OFFSETS = [0, 40, 104, 176, 240]  # unequal clients: 40, 64, 72, 64 samples; batches of 16 leave partial ones


def model_info(channels: int) -> DatasetInfo:
    return DatasetInfo("t", tuple("abcdefghij"), channels, (8, 8), (0.5,) * channels, (0.25,) * channels, 255.0)


def make_case(name: str, channels: int):
    """A seeded model, 240 labelled random images (a little class signal) and the model's start state."""
    torch.manual_seed(0)
    model = build_model(name, model_info(channels))
    generator = torch.Generator().manual_seed(1)
    labels = torch.randint(0, 10, (240,), generator=generator)
    images = torch.randn(240, channels, 8, 8, generator=generator) + labels.view(-1, 1, 1, 1) * 0.3
    start = {k: v.clone() for k, v in model.state_dict().items()}
    return model, images, labels, start


def client_tasks(start, lrs: tuple[float, ...], clients: int, device=None) -> list[LocalTask]:
    """The first `clients` clients of OFFSETS, each on its first dispatch from `start` at rates `lrs`."""
    return [
        LocalTask(start, torch.arange(OFFSETS[c], OFFSETS[c + 1], device=device), lrs, shuffle_key(0, c, 0))
        for c in range(clients)
    ]


def relative_difference(result, reference, start) -> float:
    """‖θ_vec − θ_plain‖ / ‖θ_plain − θ_start‖ over floating entries: how far apart the two updates are."""
    keys = [k for k in start if start[k].is_floating_point()]
    apart = sum(((result.state[k].double() - reference.state[k].double()) ** 2).sum() for k in keys)
    moved = sum(((reference.state[k].double() - start[k].double()) ** 2).sum() for k in keys)
    return float((apart / moved).sqrt())
