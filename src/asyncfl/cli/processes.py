"""A train-many plan spread over several processes (`--processes`): a job given several CPUs trains
its runs on all of them. Runs share nothing but the dataset's files, and each run's folder holds the
bytes `asyncfl train` writes of it alone (whichever runs share its process, `launch.train_together`),
so the split changes only the wall time: the outputs are those of one process."""

import json
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from asyncfl.spec.errors import InputError
from asyncfl.spec.layout import run_name

if TYPE_CHECKING:
    from asyncfl.launch import PlannedRun

GRACE_SECONDS = 2  # for a child to stop on a Ctrl-C of its own before it is sent one
STOP_SECONDS = 120  # for an interrupted child to stop before it is killed


def process_shares(processes: int, threads: int | None, runs: int) -> tuple[int, int | None]:
    """The processes to start and each one's torch threads: at most one process per run and per
    thread of the job (`--threads` counts the whole job's), the threads shared out evenly."""
    count = max(1, min(processes, runs, threads or processes))
    return count, (threads // count if threads else None)


def train_in_processes(
    plan: list[dict],
    runs: list["PlannedRun"],
    count: int,
    each: int | None,
    dataset: str,
    root: Path | None,
) -> None:
    """Train `plan`'s runs (`runs`: the same, checked, a tuning's choice applied) in `count` child
    `asyncfl train-many` processes of `each` threads (`process_shares`), the runs dealt out in turn (a
    plan lists each run name's seeds together, so every process gets a mix of costs). Every child
    finishes what it can; a child that fails (its error is on stderr, above) fails the whole. An
    interrupted parent interrupts its children, which stop at their last checkpoint; none outlives it."""
    with tempfile.TemporaryDirectory(prefix="asyncfl-plan-") as folder:
        commands = []
        for index in range(count):
            part = Path(folder) / f"plan{index}.json"
            part.write_text(json.dumps(plan[index::count]))
            command = [sys.executable, "-m", "asyncfl", "train-many", "--dataset", dataset, "--plan", str(part)]
            command += ["--root", str(root)] if root else []
            command += ["--threads", str(each)] if each else []
            chosen = choices_of(runs[index::count])
            if chosen:
                (Path(folder) / f"chosen{index}.json").write_text(json.dumps({"chosen": chosen}))
                command += ["--chosen", str(Path(folder) / f"chosen{index}.json")]
            commands.append(command)
        codes = run_all(commands)
    failed = [code for code in codes if code != 0]
    if failed:
        raise InputError(
            f"{len(failed)} of {count} training processes failed (exit status {', '.join(map(str, failed))}); "
            "each one's error is above; the runs of the others finished"
        )


def choices_of(runs: list["PlannedRun"]) -> dict[str, dict]:
    """The tuning's choice of each run name among `runs`: a child's own, as `--chosen` refuses a
    choice for a name its plan does not train (its share may hold only some of the job's names)."""
    return {run_name(run.out): run.tuned for run in runs if run.tuned is not None}


def run_all(commands: list[list[str]]) -> list[int]:
    """Start every command, wait for all; their exit statuses. On any exception here (Ctrl-C, which a
    terminal sends the children too) each child gets GRACE_SECONDS to stop on its own, then SIGINT,
    the signal `asyncfl` stops on, then is killed after STOP_SECONDS: none outlives this process."""
    children: list[subprocess.Popen] = []
    try:
        for command in commands:
            children.append(subprocess.Popen(command))
        return [child.wait() for child in children]
    finally:
        for child in children:
            for stop, seconds in ((None, GRACE_SECONDS), (signal.SIGINT, STOP_SECONDS), (signal.SIGKILL, None)):
                if child.poll() is not None:
                    break
                if stop is not None:
                    child.send_signal(stop)
                try:
                    child.wait(timeout=seconds)
                except subprocess.TimeoutExpired:
                    continue
