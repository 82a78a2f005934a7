"""Synthetic runs of the real engine for the bench: equal clients of random images (speed does not
depend on the values), trained by `Simulation` in a folder the caller gives; and the engine's own
overhead, measured by timing-only runs (`trainer: none`), which train nothing."""

import contextlib
import csv
import io
import time
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch

from asyncfl.data.dataset import Dataset, DatasetInfo
from asyncfl.data.partition import Partition
from asyncfl.planning.layout import TIMINGS
from asyncfl.settings.config import make_config
from asyncfl.settings.names import TIMING_ONLY
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


class RunWalls(NamedTuple):
    """A synthetic run's wall-clock seconds: setting it up (`Simulation`'s construction), and from its
    start to each of its rounds (its timings.csv)."""

    setup: float
    rounds: list[float]

    def training_rounds(self) -> list[float]:
        """Each round's own wall from the second to the one before the last: the first pays warm-up
        (and CUDA graph captures), the last the run's only evaluation (whose full-batch gradient alone
        took 13 s of a resnet20 paper round); what is left is training."""
        return [float(seconds) for seconds in np.diff(self.rounds)[:-1]]


def synthetic_run(dataset: Dataset, partition: Partition, settings: dict[str, Any], out: Path) -> RunWalls:
    """An AFL run of `settings` into `out`, quietly, evaluated (without the full-batch gradient, which no
    measure reports; a timing-only run scores nothing) and checkpointed at its last round only."""
    from asyncfl.sim.engine import Simulation

    rounds = settings["rounds"]
    once = {"eval_every": rounds, "checkpoint_every": rounds}
    if settings.get("trainer") != TIMING_ONLY:
        once["eval_gradient"] = False
    config = make_config({"algorithm": "afl", **once, **settings})
    configure_process(config.precision)
    with contextlib.redirect_stdout(io.StringIO()):
        started = time.perf_counter()
        simulation = Simulation(config, dataset, partition, out)
        setup = time.perf_counter() - started
        simulation.run()
    with open(Path(out) / TIMINGS) as stream:
        return RunWalls(setup, [float(row["wall_seconds"]) for row in csv.DictReader(stream)])


# Every part of the clients' world on (docs/world.md "The clients' world"), for the engine's measure:
# links and the server's shared link, on/off periods, failures and Poisson check-ins at about the rate
# M clients in flight finish
WORLD = {
    "bandwidth_median": 20.0,
    "server_bandwidth": 1000.0,
    "availability": "lognormal",
    "failure_probability": 0.05,
    "arrivals": "poisson",
    "checkin_rate": 100.0,
}


# Beyond this many clients the engine measure's clients hold their sizes only: their images (two 8×8 each,
# 12.8 GB at 10^8) would not fit a 24 GB machine beside the engine, and a timing-only run never reads them
MOST_CLIENTS_WITH_DATA = 10_000_000


def engine_data(clients: int) -> tuple[Dataset, Partition]:
    """The engine measure's clients: two 8×8 images each (what they hold does not matter to it), or over
    MOST_CLIENTS_WITH_DATA two samples each by count alone (`Partition.of_sizes`), beside 256 images."""
    if clients <= MOST_CLIENTS_WITH_DATA:
        return synthetic_data("engine", (1, 8, 8), clients, 2)
    dataset, _ = synthetic_data("engine", (1, 8, 8), 128, 2)
    return dataset, Partition.of_sizes(np.full(clients, 2, dtype=np.int64), "engine")


def engine_overhead(
    clients: int,
    per_round: int,
    rounds: int,
    out: Path,
    world: bool = False,
    data: tuple[Dataset, Partition] | None = None,
) -> dict:
    """Arrivals per second of the event loop, sampling and aggregation for `clients` clients, cnn-sized
    state: a timing-only synthetic run into `out` (`trainer: none`); with `world`, every part of the
    clients' world on (`WORLD`) and M = `per_round` clients in flight at most. `data`: the clients'
    data made beforehand (`engine_data`), or None: made here."""
    dataset, partition = data or engine_data(clients)
    settings = {"clients_per_round": per_round, "rounds": rounds, "local_epochs": 1, "device": "cpu"}
    settings["trainer"] = TIMING_ONLY
    walls = synthetic_run(dataset, partition, settings | (WORLD if world else {}), out)
    wall = walls.rounds
    # between the first round (the loop's start) and the last (the run's end): the engine alone
    timed_rounds = rounds - 2
    seconds, arrivals = wall[-2] - wall[0], timed_rounds * per_round
    return {
        "clients": clients,
        "clients_per_round": per_round,
        "world": world,
        "rounds": timed_rounds,
        "seconds": round(seconds, 3),
        "arrivals_per_second": round(arrivals / seconds, 1),
        "seconds_per_round": round(seconds / timed_rounds, 5),
        "first_round_seconds": round(walls.setup + wall[0], 3),
    }
