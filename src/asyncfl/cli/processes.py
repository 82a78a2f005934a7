"""A train-many plan spread over several processes (`--processes`): a job given several CPUs trains
its runs on all of them. Runs share nothing but the dataset's files, and each run's folder holds the
bytes `asyncfl train` writes of it alone (whichever runs share its process, `launch.train_together`),
so the split changes only the wall time: the outputs are those of one process."""

import ctypes
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from asyncfl.planning.layout import run_name
from asyncfl.settings.errors import InputError

if TYPE_CHECKING:
    from asyncfl.launch import PlannedRun

GRACE_SECONDS = 2  # for a child to stop on a Ctrl-C of its own before it is sent one
STOP_SECONDS = 120  # for an interrupted child to stop before it is killed
# What `kill`, `timeout`, SLURM's time limit, a supervisor and a closed terminal send, besides Ctrl-C's SIGINT
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
PARENT = "ASYNCFL_PARENT_PID"  # set for a child of run_all: the parent it dies with (`die_with_parent`)
PR_SET_PDEATHSIG = 1  # Linux's prctl option: a signal for this process when its parent dies


class Stopped(KeyboardInterrupt):
    """A stop signal other than SIGINT, raised where the process is, so that it stops as on Ctrl-C:
    its children stopped, its runs at their last checkpoint, the command's one line (exit status 130)."""


def raise_stopped(signum: int, frame: FrameType | None) -> None:
    raise Stopped(signal.Signals(signum).name)


@contextmanager
def stopped_by_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP raise `Stopped` for the block (Python's default is to die at once, leaving
    the children training and holding their folders' locks)."""
    previous = {stop: signal.signal(stop, raise_stopped) for stop in STOP_SIGNALS}
    try:
        yield
    finally:
        for stop, handler in previous.items():
            signal.signal(stop, handler)


def die_with_parent() -> None:
    """In a child of `run_all`: be sent SIGINT, and stop at the last checkpoint, when the parent dies,
    however it dies (SIGKILL included, which no handler of the parent sees: Linux's PR_SET_PDEATHSIG);
    a child whose parent died before this stops now."""
    parent = os.environ.pop(PARENT, None)
    if parent is None:
        return
    # a child of a shell's background job inherits SIGINT ignored: it must stop on its parent's SIGINT
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGINT)
    if str(os.getppid()) != parent:
        raise KeyboardInterrupt


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
    numbers: list[int],
    at_once: int | None = None,
) -> None:
    """Train `plan`'s runs (`runs`: the same, checked, a tuning's choice applied) in `count` child
    `asyncfl train-many` processes of `each` threads (`process_shares`), each with at most `at_once`
    runs going at once (None: all of its share), the runs dealt out in turn (a
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
            command += ["--at-once", str(at_once)] if at_once else []
            command += ["--plan-numbers", ",".join(map(str, numbers[index::count]))]  # named as the plan numbers them
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
    """The tuning's choice of each run name among `runs`, as the parent checked and applied it: a
    child's own `--chosen`."""
    return {run_name(run.out): run.tuned for run in runs if run.tuned is not None}


def run_all(commands: list[list[str]]) -> list[int]:
    """Start every command, wait for all; their exit statuses. However this process is stopped, its
    children stop: on Ctrl-C, which a terminal sends them too, each gets GRACE_SECONDS to stop on its
    own; on SIGTERM or SIGHUP, sent to this process alone (`stopped_by_signals`), each is sent SIGINT,
    the signal `asyncfl` stops on, at once; either way one still running is killed after STOP_SECONDS;
    and where this process is killed, each dies with it (`die_with_parent`)."""
    children: list[subprocess.Popen] = []
    environment = {**os.environ, PARENT: str(os.getpid())}
    try:
        with stopped_by_signals():
            for command in commands:
                children.append(subprocess.Popen(command, env=environment))
            return [child.wait() for child in children]
    except Stopped:  # unlike Ctrl-C, it reached this process alone: the children are told at once
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGINT)
        raise
    finally:
        # a second signal must not cut the stopping short: until every child is stopped, they are ignored
        ignored = {stop: signal.signal(stop, signal.SIG_IGN) for stop in (*STOP_SIGNALS, signal.SIGINT)}
        try:
            for child in children:
                stop_child(child)
        finally:
            for stop, handler in ignored.items():
                signal.signal(stop, handler)


def stop_child(child: subprocess.Popen) -> None:
    for stop, seconds in ((None, GRACE_SECONDS), (signal.SIGINT, STOP_SECONDS), (signal.SIGKILL, None)):
        if child.poll() is not None:
            return
        if stop is not None:
            child.send_signal(stop)
        try:
            child.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            continue
