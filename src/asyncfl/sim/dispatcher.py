"""Who is dispatched when (docs/design.md "Training"): the clients the server sends out, the asyncio
tasks that stand for them on the virtual clock, and the server's own events (a client coming online,
a Poisson check-in). The engine (`engine.Simulation`) serves what arrives.
"""

import asyncio

import numpy as np

from asyncfl.sim.arrivals import CheckIns
from asyncfl.sim.availability import NEVER
from asyncfl.sim.clock import sleep_until
from asyncfl.sim.context import RunContext
from asyncfl.sim.invariants import SelfCheck
from asyncfl.sim.state import Job, SimulationState
from asyncfl.spec.errors import InputError
from asyncfl.training.interface import LocalResult

# The server's own events in the inbox, beside arrivals keyed (time, client, dispatch): they sort before
# an arrival at the same time, and a client coming online before a check-in; a round's deadline sorts
# after every arrival at its time, which is in time
WAKE, CHECK_IN, DEADLINE = -2, -1, 1 << 62


class Dispatcher:
    """The dispatching side of one run, over its context and state.

    Attributes:
        buffer: the engine's arrived updates not yet aggregated (shared: they count as dispatched).
        in_flight: per client, its jobs dispatched and not yet arrived or lost.
        tasks: the asyncio tasks of the clients in flight and of the server's own pending events.
        inbox: arrivals and server events in (time, client, dispatch) order.
        wakeups: times a client comes online that the loop will wake at.
    """

    def __init__(
        self, context: RunContext, state: SimulationState, buffer: list[tuple[Job, LocalResult]], check: SelfCheck
    ):
        self.context, self.state, self.buffer, self.check = context, state, buffer, check
        self.in_flight = np.zeros(len(context.sizes), dtype=np.int64)
        self.tasks: set[asyncio.Task] = set()
        self.inbox: asyncio.PriorityQueue = asyncio.PriorityQueue()
        self.wakeups: set[float] = set()

    def candidates(self) -> np.ndarray:
        """The clients a dispatch may go to, online or not: all of them with replacement; otherwise the
        idle ones, and in a synchronous round only those that have not reported in it, since a round
        draws its clients without replacement (Algorithm 1): a lost dispatch's replacement never trains
        a reported client again from the same model. One always remains (reported and in flight are
        fewer than J ≤ C when a replacement is asked for); a client whose dispatch was lost may be
        drawn again, having contributed nothing."""
        if self.context.config.replacement:
            return np.arange(len(self.context.sizes))
        idle = self.in_flight == 0
        if self.context.strategy.synchronous:
            idle[[job.client for job, _ in self.buffer]] = False
        return np.flatnonzero(idle)

    def sample_clients(self, count: int) -> np.ndarray:
        """Uniform draw of up to `count` online clients: idle ones without replacement, any with it."""
        pool = self.context.world.online(self.candidates(), self.state.now)
        take = min(count, len(pool))
        if not take:
            return pool[:0]
        if self.context.config.replacement:
            return pool[self.state.rng.integers(len(pool), size=take)]
        return self.state.rng.choice(pool, size=take, replace=False)

    def request(self, count: int) -> None:
        """Dispatch `count` more clients, and those still waiting, to online clients now; what finds no
        online client waits, and the loop wakes when the next one comes online."""
        wanted = count + self.state.waiting
        chosen = self.sample_clients(wanted)
        for client in chosen:
            self.dispatch(int(client))
        self.state.waiting = wanted - len(chosen)
        if self.state.waiting:
            self.wake_when_online()

    def wake_when_online(self) -> None:
        comes_online = self.context.world.next_online(self.candidates(), self.state.now)
        if comes_online == NEVER and not self.state.outstanding:
            raise InputError(
                f"no client is online after virtual time {self.state.now!r} (an availability trace that ends?); "
                "extend the trace, or set max_virtual_time before its end"
            )
        if comes_online not in self.wakeups and comes_online != NEVER:
            self.wakeups.add(comes_online)
            self.later((comes_online, WAKE, 0))

    def later(self, key: tuple[float, int, int]) -> None:
        """An event of the server's own (a client coming online, a check-in) at virtual time key[0]."""

        async def event() -> None:
            await sleep_until(key[0])
            self.inbox.put_nowait((key, None))

        self.track(asyncio.get_running_loop().create_task(event()))

    def dispatch(self, client: int) -> None:
        state = self.state
        job = next_job(self.context, state, client, state.aggregated(len(self.buffer)))
        if self.context.strategy.clients_load_global_model and not job.lost:
            state.start_models.setdefault(job.version, state.global_model)
        self.state.outstanding[job.key] = job
        self.check.on_dispatch(job, len(state.outstanding), self.context.world.is_online(client, state.now))
        self.spawn(job)

    def spawn(self, job: Job) -> None:
        self.in_flight[job.client] += 1
        self.track(asyncio.get_running_loop().create_task(self.client(job)))

    def track(self, task: asyncio.Task) -> None:
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def client(self, job: Job) -> None:
        """A client: busy for its virtual duration, then hands its update to the server."""
        await sleep_until(job.arrival_time)
        self.inbox.put_nowait((job.key, job))

    def closed_loop(self, count: int) -> int:
        """`count` replacement dispatches in a closed loop; none where clients check in by themselves."""
        return 0 if self.context.world.open_loop else count

    def start_round(self, count: int) -> None:
        """Dispatch `count` clients as `request` does; under a round deadline, a new round begins now
        and ends at the deadline at the latest."""
        self.request(count)
        deadline = self.context.strategy.round_deadline
        if deadline is not None:
            self.state.deadline_at = self.state.now + deadline
            self.later((self.state.deadline_at, DEADLINE, 0))

    def start(self) -> None:
        """The events a fresh or resumed run begins with: its clients in flight, the first dispatches or
        the next check-in, and a wake-up where dispatches wait for a client to come online."""
        state, checkins = self.state, self.context.world.checkins
        for job in state.outstanding.values():  # a resumed run's clients in flight
            self.spawn(job)
        if checkins is not None:
            self.later((checkins.time(state.checkins), CHECK_IN, state.checkins))
        elif state.dispatched == 0:
            self.start_round(self.context.strategy.initial_clients)
        elif state.deadline_at is not None:  # a resumed run's open round
            self.later((state.deadline_at, DEADLINE, 0))
        if state.waiting:
            self.wake_when_online()

    def on_server_event(self, key: tuple[float, int, int]) -> None:
        """A client came online (dispatch what waits), or one checked in (dispatch it while fewer than
        M are in flight; otherwise it is turned away)."""
        self.state.now = key[0]
        self.wakeups.discard(key[0])
        checkins = self.context.world.checkins
        if key[1] == CHECK_IN and checkins is not None:
            room = len(self.state.outstanding) < self.context.strategy.initial_clients
            chosen = self.sample_clients(1) if room else np.zeros(0, dtype=np.int64)
            for client in chosen:  # else turned away, as is one that finds no online idle client
                self.dispatch(int(client))
            following = key[2] + 1 if len(chosen) else self.next_useful_checkin(checkins, key[2] + 1)
            self.state.checkins = following
            self.later((checkins.time(following), CHECK_IN, following))
        else:
            self.request(0)

    def next_useful_checkin(self, checkins: CheckIns, index: int) -> int:
        """After a check-in was turned away, the first from `index` on that can be dispatched: nothing
        changes for a check-in before the next arrival (which it precedes at an equal time) or the next
        idle client coming online (which it follows at an equal time), so those in between, turned away
        alike and drawing nothing, are skipped in one step. One no client will ever take ends the run."""
        world, now = self.context.world, self.state.now
        arrival = min((job.arrival_time for job in self.state.outstanding.values()), default=NEVER)
        online = NEVER  # with M in flight, only an arrival frees a place
        if len(self.state.outstanding) < self.context.strategy.initial_clients:
            online = now if world.availability is None else world.next_online(self.candidates(), now)
        if arrival == NEVER and online == NEVER:
            raise InputError(
                f"no client is online after virtual time {self.state.now!r} (an availability trace that ends?); "
                "extend the trace, or set max_virtual_time before its end"
            )
        return checkins.first_after(index, arrival, online)

    async def stop(self) -> None:
        """Cancel every client and server event still pending."""
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


def next_job(context: RunContext, state: SimulationState, client: int, updates: int) -> Job:
    """The client's next dispatch, now, from the current version, after `updates` client updates were
    aggregated: its arrival time and learning rates."""
    system = context.system
    index = int(state.dispatch_counts[client])
    state.dispatch_counts[client] += 1
    phases = system.phases(client, int(context.sizes[client]), index)
    duration = phases.total
    lrs = context.strategy.learning_rates(state.version, updates, system.delay(client, duration))
    ends, lost = context.world.fate(client, index, state.now, state.now + phases.uploaded, state.now + duration)
    return Job(client, index, state.version, state.now, ends, lrs, lost)
