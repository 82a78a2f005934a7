"""The clients on the real clock (`clock: real`, docs/clocks.md "The real clock"): each dispatch an asyncio
task on the server's event loop, as the paper's code runs its clients, but training off the loop.

A client's task waits out its download on the wall clock, then trains in a worker thread (torch releases
the GIL, so workers train at once; each has a model of its own, while the loop's scores the global one),
and its update is the server's when the engine serves its arrival. The engine keeps the virtual clock's
order: an arrival whose training is not done by then waits for it and is counted as late, never
reordered. A client's result depends only on its task (`training.interface.LocalTask`), so the outputs
are the virtual run's whichever worker trained it and when.

With measured durations (`durations: measured`) a dispatch's compute is what its training took: its
client, once trained, waits out its slowness against the fastest client, and only then schedules its
arrival (after its drawn upload and latency), so the order of arrivals is the machine's.
"""

import asyncio
import copy
import csv
import dataclasses
import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from asyncfl.models import ModelState
from asyncfl.planning.layout import WALL
from asyncfl.settings.errors import InputError
from asyncfl.sim.context import RunContext
from asyncfl.sim.events import LATE_AFTER, Event, PacedQueue
from asyncfl.sim.state import Job, SimulationState
from asyncfl.training.interface import LocalResult, LocalSettings, LocalTask, LocalTrainer, Trainer

# wall.csv: each training of this process, in wall seconds since the run (or its resume) began
WALL_COLUMNS = ("client", "dispatch_index", "worker", "downloaded", "trained_from", "trained_to", "served")


class ClientFailed(InputError):
    """A client's training raised: the run stops in one line naming the client, its dispatch and the error."""


class ClientTasks:
    """The clients in flight of one real-clock run.

    Attributes:
        tasks: the asyncio task of each dispatch in flight that trains, by its job's key.
        wall: per training, its `WALL_COLUMNS` (the served column filled when the server takes it).
        late: arrivals served after their wall time because their training had not ended, and the first.
    """

    def __init__(self, context: RunContext, state: SimulationState, queue: PacedQueue, workers: int):
        self.context, self.state, self.queue = context, state, queue
        self.workers = workers
        self.measures = context.config.durations == "measured"
        speed = context.system.speed
        self.slowness = speed.max() / speed  # measured: each client's compute × this (the fastest: 1)
        self.pool = ThreadPoolExecutor(workers, thread_name_prefix="client-worker")
        self.own = threading.local()  # each worker's trainer
        self.tasks: dict[tuple, asyncio.Task[LocalResult]] = {}
        self.wall: dict[tuple, list] = {}
        self.late, self.first_late = 0, (0, 0)
        self.failure: Exception | None = None  # measured: a client's error, raised to the waiting server

    def spawn(self, job: Job, task: LocalTask) -> None:
        """Start the dispatch's client: an asyncio task on the running loop."""
        self.tasks[job.key] = asyncio.get_running_loop().create_task(self.client(job, task))

    async def client(self, job: Job, task: LocalTask) -> LocalResult:
        """Wait out the download, then train on a worker; with measured durations, wait out the client's
        slowness and schedule the arrival."""
        downloaded = self.queue.wall_time(job.dispatch_time + self.download_seconds(job))
        await until(downloaded)
        try:
            result = await asyncio.get_running_loop().run_in_executor(self.pool, self.train, job, task, downloaded)
        except Exception as error:  # the server awaits this task's arrival (paced) or its scheduling (measured)
            self.failure = error
            self.queue.wake()
            raise
        if self.measures:
            began, ended = self.wall[job.key][4:6]
            computed = ended + (float(self.slowness[job.client]) - 1) * (ended - began)
            await until(self.queue.began[0] + computed)
            self.arrive(job, (computed + self.queue.began[0] - downloaded) / self.queue.time_scale, result)
        return result

    def arrive(self, job: Job, compute: float, result: LocalResult) -> None:
        """Measured durations: the trained dispatch's compute known, its arrival scheduled and its update
        the server's (a dispatch withdrawn with its round meanwhile is dropped)."""
        self.tasks.pop(job.key, None)
        if job.key not in self.state.outstanding:
            return
        timed = self.timed(job, compute)
        if timed.arrival_time < self.queue.now:  # the server was busy past it: it takes the update now
            timed = self.timed(job, compute + self.queue.now - timed.arrival_time)
            while timed.arrival_time < self.queue.now:  # the float sum a few ulps short
                timed = self.timed(job, math.nextafter(timed.compute or 0.0, math.inf))
        del self.state.outstanding[job.key]
        self.state.outstanding[timed.key] = timed
        self.state.results[timed.key] = result
        self.wall[timed.key] = self.wall.pop(job.key)
        self.queue.at(Event.arrival(timed))

    def timed(self, job: Job, compute: float) -> Job:
        """The job with its measured compute, and the arrival its phases then make."""
        timed = dataclasses.replace(job, compute=compute)
        phases = self.context.system.job_phases(timed, int(self.context.sizes[job.client]))
        return dataclasses.replace(timed, arrival_time=job.dispatch_time + phases.total)

    def unscheduled(self) -> int:
        """Dispatches whose arrival their training has still to schedule (measured durations only); a
        client's failure is raised here, to the server waiting for them."""
        if self.failure is not None:
            raise self.failure
        return sum(key in self.state.outstanding for key in self.tasks) if self.measures else 0

    def download_seconds(self, job: Job) -> float:
        """The virtual seconds of the dispatch's download (0 where the clients have no links)."""
        system, size = self.context.system, int(self.context.sizes[job.client])
        return system.phases(job.client, size, job.dispatch_index, job.samples, job.transfers).download

    def train(self, job: Job, task: LocalTask, downloaded: float) -> LocalResult:
        """On a worker thread: the task trained by this worker's own trainer, its wall interval logged."""
        trainer = getattr(self.own, "trainer", None) or self.worker_trainer()
        began = time.monotonic()
        try:
            (result,) = trainer.train([task])
        except Exception as error:
            raise ClientFailed(
                f"client {job.client}'s dispatch {job.dispatch_index} (virtual time {job.dispatch_time}) failed "
                f"in training: {type(error).__name__}: {error}"
            ) from error
        origin, worker = self.queue.began[0], threading.current_thread().name
        ended = time.monotonic()
        self.wall[job.key] = [
            job.client,
            job.dispatch_index,
            worker,
            downloaded - origin,
            began - origin,
            ended - origin,
            None,
        ]
        return result

    def warm_up(self, start: ModelState) -> None:
        """Before the clock starts: each worker makes its trainer and trains once (a client's first epoch
        from `start`, thrown away), paying torch's one-off set-up of a thread (seconds on a CPU) outside
        any client's time. A barrier holds each worker to one, so every thread is warmed."""
        if not self.context.trains:
            return
        task = LocalTask(start, self.context.client_indices(0), (self.context.config.gamma0,), (0,))
        barrier = threading.Barrier(self.workers)

        def warm() -> None:
            barrier.wait()
            (getattr(self.own, "trainer", None) or self.worker_trainer()).train([task])

        for future in [self.pool.submit(warm) for _ in range(self.workers)]:
            future.result()

    def worker_trainer(self) -> Trainer:
        """This worker's trainer: the run's kind of trainer over a copy of its model (one model a thread);
        a trainer that holds no model (a timing-only run's, or one a caller passed) is shared."""
        context, trainer = self.context, self.context.trainer
        if isinstance(trainer, LocalTrainer):
            model, settings = copy.deepcopy(context.model), LocalSettings.of(context.config)
            trainer = type(trainer)(model, context.train_images, context.train_labels, settings)
        self.own.trainer = trainer
        return trainer

    async def result(self, job: Job) -> None:
        """Before the server serves `job`'s arrival: its client's update, awaited (counted late if its
        training had not ended at the arrival's wall time), into the state's results; clients whose
        dispatches ended otherwise (withdrawn with their round) are cancelled."""
        state = self.state
        for key in [key for key in self.tasks if key not in state.outstanding]:
            self.tasks.pop(key).cancel()
        task = self.tasks.pop(job.key, None)
        if task is not None:  # None: lost on its way, trained before a resume, or measured (in the results)
            if not task.done():
                behind = time.monotonic() - self.queue.wall_time(job.arrival_time)
                if behind > LATE_AFTER:
                    self.late += 1
                    self.first_late = self.first_late or (job.client, job.dispatch_index)
            state.results[job.key] = await task
        if job.key in self.wall:
            self.wall[job.key][-1] = time.monotonic() - self.queue.began[0]

    def record(self) -> dict:
        """run.json's `clock` entries of the clients: how many arrivals waited for their training."""
        first = list(self.first_late) if self.late else None
        return {"client_workers": self.workers, "late_dispatches": self.late, "first_late_dispatch": first}

    async def close(self) -> None:
        """Cancel every client still in flight and wait for the workers (no thread outlives the run)."""
        for task in self.tasks.values():
            task.cancel()
        await asyncio.gather(*self.tasks.values(), return_exceptions=True)
        self.tasks.clear()
        self.pool.shutdown(wait=True, cancel_futures=True)

    def write_wall(self, out: Path) -> None:
        """Append this process's trainings to the run folder's wall.csv (header where it is new)."""
        path = out / WALL
        new = not path.exists()
        with path.open("a", newline="") as handle:
            writer = csv.writer(handle)
            if new:
                writer.writerow(WALL_COLUMNS)
            for row in sorted(self.wall.values(), key=lambda row: (row[4], row[0], row[1])):
                writer.writerow([*row[:3], *(None if value is None else round(value, 6) for value in row[3:])])


async def until(wall: float) -> None:
    """Sleep until the wall clock (time.monotonic) reaches `wall` (asyncio may wake a timer early)."""
    while (wait := wall - time.monotonic()) > 0:
        await asyncio.sleep(wait)
