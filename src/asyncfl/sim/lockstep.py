"""Several runs stepped together in one process, their clients trained in shared calls (docs/gpu.md
"Many runs in one process").

A run trains lazily (`rounds.local_result`): its simulation steps until it needs a client's result,
then hands every untrained dispatch to its trainer in one call. Here each run's simulation is a
thread, and only one thread runs at a time: a run that needs results hands its tasks to the
`Lockstep` and waits; when every run still going waits, the lockstep trains all their tasks, one call
per kind of trainer (the same model, data, device and local settings: `context.trainer_key`), so
8 runs × 5 clients in flight are 40 clients in one call, which fills a GPU as one run's 5 cannot.

Each run's bytes are those it makes alone: a trainer's result for a task depends on the task alone
(`training.interface`), the runs never run at the same moment (so no process-wide state is shared
by two steps at once), and each keeps its own event loop, state, logs and checkpoints. Threads
here are coroutines, not parallelism: the simulations stay as they are written, and the training
they wait for is where the time goes.
"""

import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from asyncfl.training.interface import LocalResult, LocalTask, Trainer

Outcome = TypeVar("Outcome")


class Cancelled(BaseException):
    """Raised in a waiting run's thread when the lockstep stops (Ctrl-C): it unwinds like an interrupt,
    closing its logs and releasing its folder, and keeps its last checkpoint."""


class Turn(Generic[Outcome]):
    """One run's thread and the baton it passes to the lockstep and back."""

    def __init__(self, job: Callable[[], Outcome]):
        self.job = job
        self.resume, self.yielded = threading.Semaphore(0), threading.Semaphore(0)
        self.thread = threading.Thread(target=self.body, daemon=True)
        self.request: tuple[Hashable, list[LocalTask]] | None = None
        self.results: list[LocalResult] = []
        self.outcome: Outcome | None = None
        self.error: BaseException | None = None
        self.finished = self.cancelled = False

    def body(self) -> None:
        self.resume.acquire()
        try:
            if not self.cancelled:
                self.outcome = self.job()
        except BaseException as error:  # noqa: BLE001  # handed to the lockstep, which raises it
            self.error = error
        finally:
            self.finished = True
            self.yielded.release()

    def step(self) -> None:
        """Let the run go on until it asks for training or ends."""
        if not self.thread.is_alive() and not self.finished:
            self.thread.start()
        self.resume.release()
        self.yielded.acquire()

    def wait_for_training(self, key: Hashable, tasks: list[LocalTask]) -> list[LocalResult]:
        """In the run's thread: hand over the tasks, wait for the lockstep to train them."""
        self.request = (key, tasks)
        self.yielded.release()
        self.resume.acquire()
        if self.cancelled:
            raise Cancelled
        results, self.results = self.results, []
        return results

    def cancel(self) -> None:
        """Unwind the run where it waits (or before it starts), and wait for its thread to end."""
        if self.finished:
            return
        self.cancelled = True
        self.step()
        self.thread.join()


class Port:
    """A run's trainer in a lockstep: its calls join those of the other runs of its kind."""

    def __init__(self, turn: Turn, key: Hashable):
        self.turn, self.key = turn, key

    def train(self, tasks: list[LocalTask]) -> list[LocalResult]:
        return self.turn.wait_for_training(self.key, tasks)


class Lockstep:
    """Runs jobs (each a whole run) as turns of one process, training their clients together.

    Attributes:
        trainers: the trainer of each kind: the first run of that kind's own, which trains every run's
            tasks of that kind.
        calls: the number of tasks of every training call made, in order (how full the calls were).
        at_once: the most runs going at once (None: all), in run order, the next starting as one ends:
            a run's model, clients in flight and state stay in memory until it ends, so this caps the
            process's memory; each run's bytes are the same at any cap.
    """

    def __init__(self, at_once: int | None = None) -> None:
        self.trainers: dict[Hashable, Trainer] = {}
        self.calls: list[int] = []
        self.current: Turn | None = None
        self.at_once = at_once

    def port(self, trainer: Trainer, key: Hashable) -> Trainer:
        """The trainer a run of kind `key` is given in place of its own (`trainer`), in the run's thread."""
        assert self.current is not None, "a port is made by a run the lockstep runs"
        self.trainers.setdefault(key, trainer)
        return Port(self.current, key)

    def run(self, jobs: list[Callable[[], Outcome]]) -> list[Outcome | BaseException]:
        """Run every job to its end; each one's outcome, or the error it ended with (the others go on).
        An interrupt of this thread (Ctrl-C) unwinds every run, then propagates."""
        turns = [Turn(job) for job in jobs]
        try:
            while going := [turn for turn in turns if not turn.finished][: self.at_once]:
                for turn in going:
                    self.current = turn
                    turn.step()
                self.current = None
                self.train([turn for turn in going if not turn.finished])
        finally:
            for turn in turns:
                turn.cancel()
        return [turn.error if turn.error is not None else turn.outcome for turn in turns]  # type: ignore[misc]

    def train(self, waiting: list[Turn]) -> None:
        """Train every waiting run's tasks, one call per kind of trainer, in run order."""
        kinds: dict[Hashable, list[Turn]] = {}
        for turn in waiting:
            assert turn.request is not None, "a run that has not ended waits for training"
            kinds.setdefault(turn.request[0], []).append(turn)
        for key, turns in kinds.items():
            tasks = [task for turn in turns for task in turn.request[1]]  # type: ignore[index]
            results = self.trainers[key].train(tasks)
            self.calls.append(len(tasks))
            start = 0
            for turn in turns:
                count = len(turn.request[1])  # type: ignore[index]
                turn.results, turn.request = results[start : start + count], None
                start += count
