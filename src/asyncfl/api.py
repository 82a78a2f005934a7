"""asyncfl from Python (docs/cli.md "From Python"): a partition, one run, several runs stepped together,
each through the very code the command line runs (`asyncfl partition`, `asyncfl train`, `asyncfl
train-many`), so a run made here has the bytes the command makes of it, resumes from its checkpoint the
same way and is not trained again once finished.

    from asyncfl import api

    api.partition("digits", clients=10, alpha=0.5, seed=0, out="p.npz")
    run = api.train("digits", "p.npz", "runs/afl", {"algorithm": "afl", "rounds": 20, "local_epochs": 2})
    run.metrics.plot(x="virtual_time", y="test_accuracy")
"""

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from asyncfl.cli import os_error_line
from asyncfl.cli.arguments import machine_cpus
from asyncfl.data.partition import DirichletSplit, make_partition
from asyncfl.launch import PlannedRun, TrainedFolder, train_run, train_together
from asyncfl.planning.layout import EVALUATIONS, EVENTS, METRICS
from asyncfl.settings.config import make_config, with_paths_from
from asyncfl.settings.errors import InputError

PathLike = str | Path


@dataclass(frozen=True)
class RunResult:
    """A finished run: its folder and its run.json, its logs read on demand as DataFrames.

    Attributes:
        folder: the run folder (metrics.csv, events.csv, timings.csv, model.pt, run.json).
        record: run.json's content (the settings, the environment, the outputs' hashes).
        already_finished: the folder held this very run, finished: nothing was trained.
    """

    folder: Path
    record: dict
    already_finished: bool = False

    @property
    def metrics(self) -> pd.DataFrame:
        """metrics.csv: one row per aggregation (docs/outputs.md "Run folders")."""
        return pd.read_csv(self.folder / METRICS)

    @property
    def events(self) -> pd.DataFrame:
        """events.csv: one row per client update aggregated (and per dispatch set aside, where any can be)."""
        return pd.read_csv(self.folder / EVENTS)

    @property
    def evaluations(self) -> pd.DataFrame | None:
        """evaluations.csv, the time grid's (`eval_every_seconds`); None for a run without one."""
        path = self.folder / EVALUATIONS
        return pd.read_csv(path) if path.is_file() else None


def partition(
    dataset: str,
    clients: int,
    alpha: float,
    seed: int,
    out: PathLike,
    *,
    equal_sizes: bool = False,
    root: PathLike | None = None,
) -> Path:
    """`asyncfl partition`: the Dirichlet split of `dataset`'s training set into `clients` clients
    (`equal_sizes`: ⌊n/C⌋ samples each), written to `out` (FILE.npz, its statistics beside as FILE.json)."""
    split = DirichletSplit(
        whole("clients", clients, 1),
        number("alpha", alpha),
        whole("seed", seed, 0),
        equal_sizes=flag("equal_sizes", equal_sizes),
    )
    with disk_errors_as_lines():
        make_partition(dataset, optional_path("root", root), split, path("out", out))
    return Path(out)


def checked_settings(settings: Mapping[str, Any] | None, source: str) -> Any:
    """`asyncfl train`'s settings from a mapping: validated as the command validates its --settings
    (a relative file path read against the current folder)."""
    if settings is not None and not isinstance(settings, Mapping):
        raise InputError(
            f"{source}: settings must be a mapping of setting names to values, got {type(settings).__name__}"
        )
    return make_config(with_paths_from(dict(settings or {}), Path.cwd()), source)


def train(
    dataset: str,
    partition: PathLike,
    out: PathLike,
    settings: Mapping[str, Any] | None = None,
    *,
    root: PathLike | None = None,
    threads: int | None = None,
    force: bool = False,
) -> RunResult:
    """One run of `settings` (any `asyncfl train` setting; config/README.md lists them) on `dataset`'s
    `partition`, into `out`: `asyncfl train`'s code path (`launch.train_run`). A folder that holds
    another run is refused unless `force` moves its outputs aside."""
    config = checked_settings(settings, "settings")
    threads, force = checked_threads(threads), flag("force", force)
    with disk_errors_as_lines():
        outcome = train_run(config, dataset, optional_path("root", root), path("partition", partition),
                            path("out", out), threads, force)  # fmt: skip
    return result(Path(out), outcome)


def train_many(
    dataset: str,
    runs: Sequence[tuple[PathLike, PathLike, Mapping[str, Any]]],
    *,
    root: PathLike | None = None,
    threads: int | None = None,
) -> list[RunResult]:
    """Several runs, each (partition, out, settings), stepped together in this process: `asyncfl
    train-many`'s code path (`launch.train_together`), every run's bytes those it makes alone. Every
    run's settings are checked before the first trains; a run that fails raises once the others end."""
    if isinstance(runs, str | bytes | Mapping) or not isinstance(runs, Sequence):
        raise InputError(f"runs must be a list of (partition, out, settings) triples, got {type(runs).__name__}")
    for index, entry in enumerate(runs):
        if isinstance(entry, str | bytes | Mapping) or not isinstance(entry, Sequence) or len(entry) != 3:
            raise InputError(f"runs[{index}] must be a (partition, out, settings) triple, got {entry!r:.80}")
    planned = [
        PlannedRun(
            checked_settings(settings, f"runs[{index}]"),
            path(f"runs[{index}]'s partition", partition),
            path(f"runs[{index}]'s out", out),
            None,
        )
        for index, (partition, out, settings) in enumerate(runs)
    ]
    threads = checked_threads(threads)
    if len({run.out.resolve() for run in planned}) != len(planned):
        raise InputError("runs: two runs share an out folder; give each run its own")
    with disk_errors_as_lines():
        outcomes = train_together(planned, dataset, optional_path("root", root), threads, lambda run, done: None)
    results = []
    for index, (run, outcome) in enumerate(zip(planned, outcomes, strict=True)):
        if isinstance(outcome, InputError):  # the first run that failed, after every run ended, named
            raise InputError(f"runs[{index}] ({run.out}): {outcome}; the other runs finished") from outcome
        if isinstance(outcome, BaseException):
            raise outcome
        results.append(result(run.out, outcome))
    return results


def result(folder: Path, outcome: TrainedFolder) -> RunResult:
    return RunResult(folder, outcome.summary, outcome.already_finished)


# The arguments that are not settings, checked as the command line's types check them (`cli.arguments`):
# one line naming the argument, before anything is read or written


def whole(name: str, value: object, lowest: int, highest: int | None = None, why: str = "") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < lowest:
        raise InputError(f"{name} must be an integer ≥ {lowest}, got {value!r}")
    if highest is not None and value > highest:
        raise InputError(f"{name} must be ≤ {highest}{why}, got {value!r}")
    return value


def number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(f"{name} must be a number, got {value!r}")
    return float(value)


def flag(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise InputError(f"{name} must be True or False, got {value!r}")
    return value


def path(name: str, value: object) -> Path:
    if not isinstance(value, str | Path) or not str(value):
        raise InputError(f"{name} must be a path (str or pathlib.Path), got {value!r}")
    return Path(value)


def optional_path(name: str, value: object) -> Path | None:
    return None if value is None else path(name, value)


def checked_threads(threads: object) -> int | None:
    """`threads`: None (torch's choice) or 1 to the CPUs this process may use, as `--threads`."""
    return None if threads is None else whole("threads", threads, 1, machine_cpus(), ", the CPUs this process may use")


@contextmanager
def disk_errors_as_lines() -> Iterator[None]:
    """The disk's errors (full, read-only, a file where a folder goes) as the command line words them."""
    try:
        yield
    except OSError as error:
        raise InputError(os_error_line(error)) from None
