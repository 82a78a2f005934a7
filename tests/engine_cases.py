"""A tiny dataset and partitions shared by the engine, check and theory tests (not a test module)."""

import csv
import dataclasses
import io
from pathlib import Path

import numpy as np
import pytest
import torch

from asyncfl.data.dataset import Dataset, DatasetInfo
from asyncfl.data.partition import Partition
from asyncfl.settings.config import make_config
from asyncfl.sim.engine import Simulation


def tiny_dataset(n: int, seed: int = 0) -> Dataset:
    generator = torch.Generator().manual_seed(seed)
    images = torch.randint(0, 256, (n, 1, 8, 8), dtype=torch.uint8, generator=generator)
    labels = torch.arange(n) % 4
    info = DatasetInfo("tiny", ("a", "b", "c", "d"), 1, (8, 8), (0.5,), (0.25,), 255.0)
    return Dataset(images, labels, images[:16], labels[:16], info)


def contiguous_partition(sizes: list[int]) -> Partition:
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    return Partition(np.arange(offsets[-1], dtype=np.int64), offsets, "tiny")


def fixed_clients(latency: float, seconds_per_sample: float) -> dict:
    """Settings under which a dispatch takes exactly I·n·seconds_per_sample + latency: every client at
    speed 1 with the same latency, so durations can be computed by hand (one local epoch)."""
    return dict(
        speed_distribution="constant",
        latency_distribution="constant",
        latency_median=latency,
        seconds_per_sample=seconds_per_sample,
        local_epochs=1,
    )


class Recording:
    """The run's own trainer, with every task it was given and the result it returned kept."""

    def __init__(self, trainer, fail_on_call: int | None = None):
        self.trainer, self.calls, self.fail_on_call = trainer, [], fail_on_call

    def train(self, tasks):
        if len(self.calls) == self.fail_on_call:
            raise RuntimeError("injected crash")
        results = self.trainer.train(tasks)
        self.calls.append(list(zip(tasks, results, strict=True)))
        return results


def recorded_simulation(out: Path, sizes: list[int], fail_on_call=None, **settings) -> tuple[Simulation, Recording]:
    simulation = Simulation(make_config(settings), tiny_dataset(sum(sizes)), contiguous_partition(sizes), out)
    recording = Recording(simulation.context.trainer, fail_on_call)
    simulation.context = dataclasses.replace(simulation.context, trainer=recording)
    return simulation, recording


def resumed_alike(out: Path, sizes: list[int], fail_on_call: int, **settings) -> dict:
    """A run crashed at its trainer's `fail_on_call`-th call and resumed (under `out`/resumed), its outputs
    checked equal to those of one that never stopped (`out`/whole); the checkpoint it resumed from."""
    whole, _ = recorded_simulation(out / "whole", sizes, **settings)
    whole.run()
    crashed, _ = recorded_simulation(out / "resumed", sizes, fail_on_call=fail_on_call, **settings)
    with pytest.raises(RuntimeError, match="injected crash"):
        crashed.run()
    payload = (out / "resumed" / "checkpoint.pt").read_bytes().partition(b"\n")[2]
    checkpoint = torch.load(io.BytesIO(payload), weights_only=True)
    resumed, _ = recorded_simulation(out / "resumed", sizes, **settings)
    resumed.run()
    for name in ("metrics.csv", "events.csv", "model.pt"):
        assert (out / "resumed" / name).read_bytes() == (out / "whole" / name).read_bytes(), name
    return checkpoint


def read_csv(path: Path) -> list[dict]:
    with open(path) as stream:
        return list(csv.DictReader(stream))
