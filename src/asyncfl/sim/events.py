"""The server's inbox (docs/design.md "Training"): every event as (time, kind, order, job), ordered as
SimPy's `Environment.schedule` orders its events, by virtual time, then priority, then insertion
order within one priority; here the order within a kind is the event's own (an arrival's client and
dispatch index, a check-in's index), so that it never depends on when the event was scheduled.

At one virtual time: a client coming online first (a check-in or a dispatch at that time may go to
it), then a check-in, then the arrivals by client and dispatch, then a round's deadline (an arrival
at the deadline is in time), then a time-grid evaluation (of the model every other event at t left).
"""

import asyncio
from enum import IntEnum
from typing import NamedTuple

from asyncfl.sim.clock import sleep_until
from asyncfl.sim.state import Job


class Kind(IntEnum):
    """An event's priority among those at one virtual time."""

    WAKE = 0  # a client the server waits for comes online
    CHECK_IN = 1  # a Poisson check-in (arrivals: poisson)
    ARRIVAL = 2  # a dispatch ends: its update arrives, or it is lost
    DEADLINE = 3  # the open synchronous round's deadline
    EVALUATE = 4  # a time-grid evaluation (eval_every_seconds): the model as every event at t left it


class Event(NamedTuple):
    time: float
    kind: Kind
    order: tuple[int, ...] = ()  # an arrival's (client, dispatch index), a check-in's (index,)
    job: Job | None = None  # an arrival's dispatch

    @classmethod
    def arrival(cls, job: Job) -> "Event":
        return cls(job.arrival_time, Kind.ARRIVAL, (job.client, job.dispatch_index), job)


class EventQueue:
    """The inbox and the asyncio tasks that fill it: each event waits, as a task on the virtual clock,
    until its time, then joins the inbox, which the engine serves in `Event` order.

    Attributes:
        inbox: the events due, in `Event` order.
        tasks: the tasks of the events still pending (clients in flight, the server's own events).
    """

    def __init__(self) -> None:
        self.inbox: asyncio.PriorityQueue[Event] = asyncio.PriorityQueue()
        self.tasks: set[asyncio.Task] = set()

    def at(self, event: Event) -> None:
        """Schedule `event` at its virtual time."""

        async def due() -> None:
            await sleep_until(event.time)
            self.inbox.put_nowait(event)

        task = asyncio.get_running_loop().create_task(due())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def next(self) -> Event:
        return await self.inbox.get()

    async def stop(self) -> None:
        """Cancel every event still pending."""
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
