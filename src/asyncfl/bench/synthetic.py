"""Synthetic runs of the real engine for the bench: equal clients of random images (speed does not
depend on the values), trained by `Simulation` in a folder the caller gives."""

import contextlib
import csv
import io
from pathlib import Path
from typing import Any

import numpy as np
import torch

from asyncfl.data.dataset import Dataset, DatasetInfo
from asyncfl.data.partition import Partition
from asyncfl.spec.config import make_config
from asyncfl.spec.layout import TIMINGS
from asyncfl.training.interface import Trainer
from asyncfl.training.runtime import configure_process


def synthetic_data(name: str, shape: tuple[int, int, int], clients: int, samples: int) -> tuple[Dataset, Partition]:
    """`clients` clients of `samples` random 8-bit images of `shape` each, ten classes, equal shares."""
    generator = torch.Generator().manual_seed(0)
    n = clients * samples
    channels, height, width = shape
    images = torch.randint(0, 256, (n, *shape), dtype=torch.uint8, generator=generator)
    labels = torch.randint(0, 10, (n,), generator=generator)
    info = DatasetInfo(
        name, tuple(map(str, range(10))), channels, (height, width), (0.5,) * channels, (0.25,) * channels, 255.0
    )
    partition = Partition(np.arange(n, dtype=np.int64), np.arange(0, n + 1, samples, dtype=np.int64), name)
    return Dataset(images, labels, images[:256], labels[:256], info), partition


def synthetic_run(
    dataset: Dataset, partition: Partition, settings: dict[str, Any], out: Path, trainer: Trainer | None = None
) -> list[float]:
    """An AFL run of `settings` (evaluated and checkpointed at its last round only) into `out`, quietly;
    the wall seconds at each of its rounds, from its timings.csv."""
    from asyncfl.sim.engine import Simulation

    rounds = settings["rounds"]
    config = make_config({"algorithm": "afl", "eval_every": rounds, "checkpoint_every": rounds, **settings})
    configure_process(config.precision)
    with contextlib.redirect_stdout(io.StringIO()):
        Simulation(config, dataset, partition, out, trainer=trainer).run()
    with open(Path(out) / TIMINGS) as stream:
        return [float(row["wall_seconds"]) for row in csv.DictReader(stream)]
