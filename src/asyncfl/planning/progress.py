"""What a run's job asks for when it is submitted again: the rest of its work at the pace its checkpoint
recorded, or, where the run failed on its own, nothing more.

A run's first job asks for an estimate (`cluster.JobBudget`); a job killed at its time limit leaves a
checkpoint and, beside it, `progress.json`: the share of its work done and the wall seconds that took.
Its next job, a retry in the same `snakemake` or a new invocation alike, asks for the rest at that pace
× the safety factor: a seven-times-short estimate costs one more job, not a doubling per attempt. A job
killed before its first checkpoint knows no pace: it asks for twice its time (`cluster.attempt_minutes`).
Snakemake retries every failed job alike (snakemake#2441); only a time limit, a lost node or preemption
can end otherwise the next time. A run that fails on its own (asyncfl's error: its input, a diverged loss)
fails the same way again, runs being deterministic: it records the cause in `failed.json`, and a retry in
the same invocation asks for a minute and ends at once with that cause (`asyncfl train --attempt`). A new
invocation's first attempt trains again. Torch-free: the workflow reads it while it submits.
"""

import contextlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

from asyncfl.planning.cluster import attempt_minutes
from asyncfl.planning.layout import FAILED, PROGRESS


@dataclass(frozen=True)
class Progress:
    """A killed run's pace: the share of its work `done` (0 < done ≤ 1) in `wall_seconds`, resumes included."""

    done: float
    wall_seconds: float

    def remaining_seconds(self) -> float:
        return self.wall_seconds * (1 - self.done) / self.done


def read_progress(folder: Path) -> Progress | None:
    """The run folder's recorded pace, or None where there is none to trust (no file, not JSON, fields
    missing or out of range): the job then asks for what it would without it."""
    try:
        recorded = json.loads((folder / PROGRESS).read_text())
        done, seconds = float(recorded["done"]), float(recorded["wall_seconds"])
    except (OSError, ValueError, TypeError, KeyError, OverflowError):  # a 400-digit int overflows float()
        return None
    if not (0 < done <= 1 and math.isfinite(seconds) and seconds >= 0):
        return None
    return Progress(done, seconds)


def run_job_minutes(folder: Path, planned: int, attempt: int, cap: int, safety: float) -> tuple[int, Progress | None]:
    """The minutes the job of the one run in `folder` asks for on its `attempt`: the rest at its recorded
    pace × `safety` and a minute to start, where it has one (any attempt: a new invocation's too), within
    `cap`; otherwise `planned`, doubled after each time limit; a minute for a retry of a run that failed
    on its own. The pace used, or None."""
    if attempt > 1 and recorded_failure(folder) is not None:
        return 1, None
    progress = read_progress(folder)
    if progress is None:
        return attempt_minutes(planned, attempt, cap), None
    return min(cap, 1 + math.ceil(safety * progress.remaining_seconds() / 60)), progress


def pace_line(folder: str, pace: Progress, minutes: int) -> str:
    """What the workflow says where a run's job asks for the rest at its recorded pace."""
    return (
        f"{folder} resumes at its recorded pace: {pace.done:.0%} of its work in {pace.wall_seconds:.0f} s; "
        f"its job asks for {minutes} min"
    )


def recorded_failure(folder: Path) -> str | None:
    """The cause a run folder's earlier attempt recorded of its own failure, or None."""
    try:
        cause = json.loads((folder / FAILED).read_text())["cause"]
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return cause if isinstance(cause, str) else None


def record_failure(folder: Path, cause: str) -> None:
    """Record the run's own failure (`cause`, asyncfl's one-line error) for its retries, in its run folder
    where one exists (the workflow makes it before the job; a command refused before it ran leaves none)."""
    if folder.is_dir():
        with contextlib.suppress(OSError):  # the cause is still said; only the retries' shortcut is lost
            (folder / FAILED).write_text(json.dumps({"cause": cause}) + "\n")


def clear_failure(folder: Path) -> None:
    """A new invocation's first attempt trains again: an earlier one's record goes."""
    if folder.is_dir():
        (folder / FAILED).unlink(missing_ok=True)
