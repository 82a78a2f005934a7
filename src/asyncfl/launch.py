"""`asyncfl train`: one run folder, from the command line's pieces to its finished outputs.

The folder is owned by one process at a time (`folder.owned`). A folder that already holds this
very run, finished and intact, is not trained again; one that holds another run is refused unless
`force` moves its outputs aside first. So run.json never sits beside CSVs of another run.
"""

import functools
from pathlib import Path
from typing import NamedTuple

import torch

from asyncfl.data.dataset import Dataset
from asyncfl.data.loading import load_dataset
from asyncfl.data.partition import load_partition
from asyncfl.files import sha256
from asyncfl.runs.folder import clear_unfinished, finished_run, move_aside, owned
from asyncfl.runs.record import run_identity
from asyncfl.sim.engine import Simulation
from asyncfl.spec.config import TrainConfig
from asyncfl.training.runtime import configure_process


class TrainedFolder(NamedTuple):
    """What `asyncfl train` did to its folder."""

    summary: dict  # run.json's content
    already_finished: bool  # the folder held this run, finished: nothing was trained
    moved_to: Path | None  # where --force moved the folder's old outputs


@functools.cache
def dataset_once(dataset: str, root: Path | None) -> Dataset:
    """The dataset, loaded once per process however many runs `asyncfl train-many` trains on it (the
    engine only reads it)."""
    return load_dataset(dataset, root)


def train_run(
    config: TrainConfig,
    dataset: str,
    root: Path | None,
    partition_path: Path,
    out: Path,
    threads: int | None = None,
    force: bool = False,
) -> TrainedFolder:
    """Run (or resume) the training that `config` describes into `out`."""
    out = Path(out)
    partition = load_partition(partition_path)
    partition_sha256 = sha256(partition_path)
    with owned(out):
        moved_to = move_aside(out) if force else None
        finished = finished_run(out, run_identity(config, dataset, partition_sha256))
        if finished:
            return TrainedFolder(finished, True, None)
        clear_unfinished(out)
        if threads:
            torch.set_num_threads(threads)  # the job's CPUs, and the same reduction order everywhere
        configure_process(config.precision)
        data = dataset_once(dataset, root)
        return TrainedFolder(Simulation(config, data, partition, out, partition_sha256).run(), False, moved_to)
