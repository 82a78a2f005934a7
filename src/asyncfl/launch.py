"""`asyncfl train`: one run folder, from the command line's pieces to its finished outputs.

The folder is owned by one process at a time (`folder.owned`). A folder that already holds this
very run, finished and intact, is not trained again; one that holds another run is refused unless
`force` moves its outputs aside first. So run.json never sits beside CSVs of another run.
"""

import functools
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import torch

from asyncfl.data.dataset import Dataset
from asyncfl.data.loading import load_dataset
from asyncfl.data.partition import load_partition
from asyncfl.files import sha256
from asyncfl.models import build_model
from asyncfl.runs.folder import clear_unfinished, finished_run, keep_finished, move_aside, owned, restore_finished
from asyncfl.runs.record import run_identity
from asyncfl.settings.config import TrainConfig
from asyncfl.settings.errors import InputError
from asyncfl.sim.checks import checked_parts
from asyncfl.sim.engine import Simulation
from asyncfl.sim.lockstep import Lockstep
from asyncfl.sim.network import state_bytes
from asyncfl.training.interface import TrainerPool
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


def check_planned_run(config: TrainConfig, dataset: str, root: Path | None, partition_path: Path, where: str) -> None:
    """Every check a run makes as it starts (`checks.checked_parts`), made without training, one line
    naming the run: `asyncfl train-many` checks all of its runs before the first trains, so a bad one
    never leaves the others half done."""
    try:
        partition = load_partition(partition_path)
        data = dataset_once(dataset, root)
        model_bytes = state_bytes(build_model(config.model, data.info, config.seed))
        checked_parts(config, data, partition, torch.device("cpu"), model_bytes)
    except InputError as error:
        raise InputError(f"{where}: {error}") from None


def train_run(
    config: TrainConfig,
    dataset: str,
    root: Path | None,
    partition_path: Path,
    out: Path,
    threads: int | None = None,
    force: bool = False,
    tuned: dict | None = None,
    pool: TrainerPool | None = None,
) -> TrainedFolder:
    """Run (or resume) the training that `config` describes into `out`; `tuned`, the settings in it
    that a tuning stage chose (run.json records them under "tuned"); `pool`, where runs stepped
    together share their trainers (`lockstep.Lockstep`)."""
    out = Path(out)
    partition = load_partition(partition_path)
    partition_sha256 = sha256(partition_path)
    with owned(out):
        moved_to = move_aside(out) if force else None
        identity = run_identity(config, dataset, partition_sha256, tuned)
        if not force:
            restore_finished(out, identity)  # a finished run a failed job's cleanup deleted
        finished = finished_run(out, identity)
        if finished:
            keep_finished(out)
            return TrainedFolder(finished, True, None)
        clear_unfinished(out)
        if threads:
            torch.set_num_threads(threads)  # the job's CPUs, and the same reduction order everywhere
        configure_process(config.precision)
        data = dataset_once(dataset, root)
        summary = Simulation(config, data, partition, out, partition_sha256, tuned=tuned, pool=pool).run()
        keep_finished(out)
        return TrainedFolder(summary, False, moved_to)


def set_aside_other_runs(runs: list["PlannedRun"], dataset: str) -> list[Path]:
    """Move into its replaced/ folder (as `--force` does) the outputs of every run folder among `runs`
    that holds a run other than the planned one, finished or damaged; the folders moved from. For
    folders a command owns but no workflow declared: the points a tuning search adds, where an earlier
    config's search may have trained another run under the same point's name (the grid's folders are
    the tuning job's outputs, which Snakemake clears itself). Nothing is deleted."""
    moved = []
    for run in runs:
        identity = run_identity(run.config, dataset, sha256(run.partition), run.tuned)
        with owned(run.out):
            try:
                finished_run(run.out, identity)  # None, or this very run: it stays
            except InputError:
                move_aside(run.out)
                moved.append(run.out)
    return moved


class PlannedRun(NamedTuple):
    """One run of `asyncfl train-many`'s plan, its settings checked."""

    config: TrainConfig
    partition: Path
    out: Path
    tuned: dict | None  # the settings a tuning stage chose for it


def train_together(
    runs: list[PlannedRun],
    dataset: str,
    root: Path | None,
    threads: int | None,
    report: Callable[[PlannedRun, TrainedFolder], None],
    at_once: int | None = None,
) -> list[TrainedFolder | BaseException]:
    """Train the runs stepped together in this process (`lockstep.Lockstep`): each run's clients join
    the other runs' in one trainer call, each folder gets the bytes `train_run` makes of it alone.
    Runs on the real clock (`clock: real`) are not stepped: each trains alone, first, on its own event
    loop with its own client workers (a run that sleeps until its events are due would stall the others).
    `report` is called as each run ends; a run that fails leaves the others to finish, and its error
    is its outcome. `at_once`: the most runs stepped at once (`Lockstep.at_once`; None: all)."""
    if threads:
        torch.set_num_threads(threads)  # this thread trains every run's clients: the runs' thread count
    outcomes: dict[int, TrainedFolder | BaseException] = {}
    for index, run in enumerate(runs):
        if run.config.clock == "real":
            try:
                trained = train_run(run.config, dataset, root, run.partition, run.out, threads, tuned=run.tuned)
            except Exception as error:  # the others go on, as in the lockstep
                outcomes[index] = error
                continue
            outcomes[index] = trained
            report(run, trained)
    lockstep = Lockstep(at_once)

    def job(run: PlannedRun) -> TrainedFolder:
        outcome = train_run(run.config, dataset, root, run.partition, run.out, threads, tuned=run.tuned, pool=lockstep)
        report(run, outcome)
        return outcome

    stepped = [index for index in range(len(runs)) if index not in outcomes]
    outcomes.update(zip(stepped, lockstep.run([functools.partial(job, runs[index]) for index in stepped]), strict=True))
    return [outcomes[index] for index in range(len(runs))]
