"""The simulation's own event loop (docs/design.md "Training"), SimPy's core as the model: a heap of
scheduled events, `at` to schedule one, `next` to step the virtual clock to the next, and the engine
holds a handler per event kind. Time jumps from event to event: a run costs only its compute.

Events are ordered as SimPy's `Environment.schedule` orders its events, by virtual time, then
priority, then an order of their own (an arrival's client and dispatch index, a check-in's index), so
that it never depends on when the event was scheduled. At one virtual time: a client coming online
first (a check-in or a dispatch at that time may go to it), then a check-in, then a client's request
for the global model mid-training (a client whose training ends at t asks before it reports), then the
arrivals by client and dispatch, then a server's step (Pisces), then a round's deadline (an arrival at
the deadline is in time), then a time-grid evaluation (of the model every other event at t left).

The clock steps as the asyncio loop this replaced stepped (so every run's bytes are unchanged): it
jumps to the earliest scheduled time and makes due, as one batch, every event scheduled before
`RESOLUTION` past it; an event scheduled while a batch is served joins a later batch, even at the
same time. Far out (from about 1e7 s), where adding `RESOLUTION` rounds to the time itself, the clock
goes one float past it, so a step always makes progress; nothing scheduled with work still waiting is
a deadlock, an error rather than a hang.

`PacedQueue` is the same queue on the real clock (`clock: real`), as SimPy's `RealtimeEnvironment` is its
`Environment` paced: before a batch is made due, the server's asyncio task sleeps until the wall clock
reaches the batch's virtual time × `time_scale` past where the run (or its resume) began. The order of
events stays the virtual clock's, so a paced run makes the virtual run's outputs; a batch the run reaches
after its wall time (the machine did not keep up) is served at once and counted as late.
"""

import asyncio
import contextlib
import heapq
import itertools
import math
import time
from collections.abc import Callable
from enum import IntEnum
from typing import NamedTuple

from asyncfl.sim.state import Job

# The clock resolution asyncio read from time.monotonic: events within it of the clock form one batch
RESOLUTION = time.get_clock_info("monotonic").resolution


class SimulationDeadlock(RuntimeError):
    """The engine waits for an event and none is scheduled."""


class Kind(IntEnum):
    """An event's priority among those at one virtual time; each has a handler in the engine."""

    WAKE = 0  # a client the server waits for comes online
    CHECK_IN = 1  # a Poisson check-in (arrivals: poisson)
    FETCH = 2  # a client mid-training asks for the global model (FedASMU), before the arrivals at t
    ARRIVAL = 3  # a dispatch ends: its update arrives, or it is lost
    STEP = 4  # a server's step (Pisces): it sees every arrival at t
    DEADLINE = 5  # the open synchronous round's deadline
    EVALUATE = 6  # a time-grid evaluation (eval_every_seconds): the model as every event at t left it


class Event(NamedTuple):
    time: float
    kind: Kind
    order: tuple[int, ...] = ()  # an arrival's or a fetch's (client, dispatch index), a check-in's (index,)
    job: Job | None = None  # an arrival's or a fetch's dispatch

    @classmethod
    def arrival(cls, job: Job) -> "Event":
        return cls(job.arrival_time, Kind.ARRIVAL, (job.client, job.dispatch_index), job)


class EventQueue:
    """The scheduled events of one run and its virtual clock.

    Attributes:
        now: the clock: the time of the batch being served.
        scheduled: events not yet due, as (time, insertion count, event).
        due: the batch being served, in `Event` order.
    """

    def __init__(self, start: float) -> None:
        self.now = start
        self.scheduled: list[tuple[float, int, Event]] = []
        self.due: list[Event] = []
        self.count = itertools.count()

    def at(self, event: Event) -> None:
        """Schedule `event` at its virtual time (one already past is due in the next batch)."""
        heapq.heappush(self.scheduled, (event.time, next(self.count), event))

    def next(self) -> Event:
        """The next event in order, the clock stepped to its batch where the current one is served."""
        if not self.due:
            self.step()
        return heapq.heappop(self.due)

    def step(self) -> None:
        """Jump the clock to the earliest scheduled time and make its batch due."""
        if not self.scheduled:
            raise SimulationDeadlock("the simulation waits for an event and none is scheduled")
        first = self.scheduled[0][0]
        self.now = max(self.now, first if first < first + RESOLUTION else math.nextafter(first, math.inf))
        end = self.now + RESOLUTION
        while self.scheduled and self.scheduled[0][0] < end:
            heapq.heappush(self.due, heapq.heappop(self.scheduled)[2])

    def __len__(self) -> int:
        """Events scheduled or due, not yet served."""
        return len(self.scheduled) + len(self.due)


# How far past its wall time a batch may be served and still count as on time: the sleep's own overshoot
LATE_AFTER = 0.01


class PacedQueue(EventQueue):
    """An `EventQueue` paced by the wall clock (`clock: real`): `paced_next` is `next` awaited on the run's
    asyncio loop, so the clients in flight (`clients.ClientTasks`) train while the server waits.

    Attributes:
        time_scale: wall seconds per virtual second.
        began: the wall clock (time.monotonic) and the virtual clock where pacing began.
        late: batches served more than `LATE_AFTER` after their wall time, and the most behind one was.
    """

    def __init__(self, start: float, time_scale: float) -> None:
        super().__init__(start)
        self.time_scale = time_scale
        self.began = (time.monotonic(), start)
        self.late, self.most_behind = 0, 0.0
        self.woken = asyncio.Event()  # set when an event is scheduled, or a client failed

    def at(self, event: Event) -> None:
        super().at(event)
        self.wake()

    def wake(self) -> None:
        """Wake the server waiting in `paced_next`: something was scheduled (or a client failed)."""
        self.woken.set()

    def restart(self) -> None:
        """Pacing begins now, at the current virtual time (after the clients' workers warmed up)."""
        self.began = (time.monotonic(), self.now)

    def wall_time(self, virtual: float) -> float:
        """The wall clock (time.monotonic) at which the virtual time `virtual` is due."""
        wall, start = self.began
        return wall + (virtual - start) * self.time_scale

    async def paced_next(self, unscheduled: Callable[[], int] = lambda: 0) -> Event:
        """The next event in order; a new batch is made due no earlier than its wall time, and counted as
        late where the machine reached it more than `LATE_AFTER` after. While nothing is scheduled but
        `unscheduled()` clients will schedule their arrivals (measured durations), it waits for them; an
        event scheduled meanwhile, earlier than the one it waited for, is taken in its turn."""
        yielded = False
        while not self.due:
            waiting = unscheduled()
            if not self.scheduled and not waiting:
                break  # `next` finds nothing: a deadlock, an error rather than a hang
            timeout = None
            if self.scheduled:
                behind = time.monotonic() - self.wall_time(self.scheduled[0][0])
                if behind >= 0 and waiting and not yielded:  # a client ready to report goes first
                    await asyncio.sleep(0)
                    yielded = True
                    continue
                if behind >= 0:
                    if behind > LATE_AFTER:
                        self.late += 1
                        self.most_behind = max(self.most_behind, behind)
                    break
                timeout = -behind
            self.woken.clear()
            with contextlib.suppress(asyncio.TimeoutError):  # its wall time came (or nearly: looked at again)
                await asyncio.wait_for(self.woken.wait(), timeout)
        return self.next()

    def record(self) -> dict[str, float | int]:
        """run.json's `clock`: the pace and how well the machine kept it."""
        return {
            "time_scale": self.time_scale,
            "late_batches": self.late,
            "most_behind_seconds": round(self.most_behind, 3),
        }


def event_queue(clock: str, start: float, time_scale: float) -> EventQueue:
    """The run's queue on its clock (`clock` setting): virtual, or paced by the wall clock."""
    return PacedQueue(start, time_scale) if clock == "real" else EventQueue(start)
