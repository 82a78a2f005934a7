"""Who is dispatched when (docs/design.md "Training"): the clients the server sends out, their
arrivals scheduled on the virtual clock, and the server's own events (a client coming online, a
Poisson check-in), each with its handler. The engine (`engine.Simulation`) serves what arrives.
"""

import math
from collections import Counter

import numpy as np

from asyncfl.fl.algorithms.fedcompass import FedCompassParameters
from asyncfl.settings.errors import InputError
from asyncfl.sim.availability import NEVER
from asyncfl.sim.clients import ClientTasks
from asyncfl.sim.context import RunContext
from asyncfl.sim.events import Event, EventQueue, Kind
from asyncfl.sim.invariants import SelfCheck
from asyncfl.sim.network import Links
from asyncfl.sim.partial_work import samples_after, samples_that_fit
from asyncfl.sim.rounds import task_of, whole_steps
from asyncfl.sim.sampling import ClientPicker
from asyncfl.sim.state import Job, SimulationState
from asyncfl.training.interface import LocalResult


class Dispatcher:
    """The dispatching side of one run, over its context and state: the one owner of the dispatch
    counters (the jobs outstanding, in flight per client, and waiting for an online client).

    Attributes:
        buffer: the engine's arrived updates not yet aggregated (shared: they count as dispatched).
        in_flight: per client in flight, its jobs dispatched and not yet arrived or lost.
        picker: who a dispatch may go to, and the draw of them (`sampling.ClientPicker`).
        events: the arrivals and the server's own events, scheduled on the virtual clock.
        wakeups: times a client comes online that the loop will wake at.
    """

    def __init__(
        self,
        context: RunContext,
        state: SimulationState,
        buffer: list[tuple[Job, LocalResult]],
        check: SelfCheck,
        events: EventQueue,
        clients: ClientTasks | None = None,
    ):
        """`clients`: on the real clock, where each dispatch's client runs as an asyncio task."""
        self.context, self.state, self.buffer, self.check = context, state, buffer, check
        self.clients = clients
        self.in_flight: Counter[int] = Counter()
        self.picker = ClientPicker(context, state, self.in_flight, buffer)
        self.events = events
        self.desk = CheckInDesk(self)
        self.wakeups: set[float] = set()

    def request(self, count: int) -> None:
        """Dispatch `count` more clients, and those still waiting, to online clients now; what finds no
        online client waits, and the loop wakes when the next one comes online."""
        wanted = count + self.state.waiting
        chosen = [int(client) for client in self.picker.sample(wanted)]
        if self.state.compass is not None:  # FedCompass assigns the fastest first, as APPFL's scheduler does
            chosen = self.state.compass.by_speed(chosen)
        work = self.round_work(chosen)
        for client in chosen:
            self.dispatch(client, work.get(client))
        self.state.waiting = wanted - len(chosen)
        if self.state.waiting:
            self.wake_when_online()

    def round_work(self, clients: list[int]) -> dict[int, tuple[int, float]]:
        """Where the strategy budgets its dispatches' work (FedQueue), each client's local steps and
        learning-rate factor, from its steps per virtual second at its median compute (the rate a warm-up
        measures) and its local epochs' steps; nothing otherwise."""
        if not self.context.strategy.budgets_work or not clients:
            return {}
        config, system = self.context.config, self.context.system
        sizes = [int(self.context.sizes[client]) for client in clients]
        whole = [whole_steps(config, size) for size in sizes]
        rates = [
            steps / system.median_phases(client, size).compute
            for client, size, steps in zip(clients, sizes, whole, strict=True)
        ]
        work = self.context.strategy.dispatch_work(clients, self.state.server_memory, rates, whole)
        return dict(zip(clients, work, strict=True))

    def wake_when_online(self) -> None:
        candidates = self.picker.candidates()
        comes_online = self.context.world.next_online(candidates, self.state.now)
        if comes_online == NEVER and not self.state.outstanding:
            no_client_online(self.state.now, len(candidates), len(self.context.sizes))
        if comes_online not in self.wakeups and comes_online != NEVER:
            self.wakeups.add(comes_online)
            self.events.at(Event(comes_online, Kind.WAKE))

    def dispatch(self, client: int, work: tuple[int, float] | None = None) -> None:
        """Send `client` the current model (`work`: its local steps and learning-rate factor, where the
        strategy budgets them)."""
        state = self.state
        opened = state.compass.next_group if state.compass is not None else 0
        job = next_job(self.context, state, client, state.aggregated(len(self.buffer)), work)
        if state.compass is not None and state.compass.next_group != opened:  # it opened an arrival group
            self.events.at(Event(state.compass.groups[opened].deadline, Kind.DEADLINE, (opened,)))
        if self.context.strategy.clients_load_global_model and not job.lost:
            state.start_models.setdefault(job.version, state.global_model)
        if not job.lost and job.version not in state.sent_memories:
            sent = self.context.strategy.dispatch_snapshot(state.server_memory)
            if sent:
                state.sent_memories[job.version] = sent
        self.state.outstanding[job.key] = job
        self.check.on_dispatch(job, len(state.outstanding), self.context.world.is_online(client, state.now))
        if state.link is not None and self.context.system.server is not None:
            self.check.on_booking(job, state.link.peak(), self.context.system.server.capacity)
        self.spawn(job)

    def spawn(self, job: Job) -> None:
        """A dispatch in flight: its arrival scheduled, its request for the global model mid-training where
        the strategy merges one (its client's task then starts at the request, the merge known), and on
        the real clock its client's task."""
        self.in_flight[job.client] += 1
        if job.arrival_time != math.inf:  # measured durations: its client schedules it once trained
            self.events.at(Event.arrival(job))  # the client: busy for its virtual duration, then it reports
        untrained = not job.lost and job.key not in self.state.results
        asks = untrained and self.context.strategy.merges_fresh_model and job.key not in self.state.merges
        if asks:
            self.events.at(Event(self.request_time(job), Kind.FETCH, (job.client, job.dispatch_index), job))
        if self.clients is not None and untrained and not asks:
            self.clients.spawn(job, task_of(self.context, self.state, job))

    def request_time(self, job: Job) -> float:
        """When the dispatch asks for the global model: after its download and the share of its compute
        that its first `Strategy.merge_after` steps take."""
        size = int(self.context.sizes[job.client])
        steps = whole_steps(self.context.config, size)
        phases = self.context.system.job_phases(job, size)
        return job.dispatch_time + phases.download + phases.compute * self.context.strategy.merge_after(steps) / steps

    def on_fetch(self, event: Event) -> bool:
        """A client mid-training asked for the global model: where it moved on since the dispatch, the
        version it gets and its merge weight are the job's (`SimulationState.merges`), and on the real clock
        its client's task starts (never the run's end)."""
        state, job = self.state, event.job
        assert job is not None  # a fetch's event carries its dispatch
        if job.key not in state.outstanding:
            return False
        state.now = event.time
        weight = 0.0
        if state.version != job.version:
            weight = self.context.strategy.merge_weight(job.client, job.version, state.version, state.server_memory)
            state.start_models.setdefault(state.version, state.global_model)
        state.merges[job.key] = (state.version, weight)
        if self.clients is not None:
            self.clients.spawn(job, task_of(self.context, state, job))
        return False

    def arrived(self, job: Job, ended: float | None = None) -> None:
        """A dispatch that ended (its update arrived, or it was lost, or its round closed at `ended`): no
        longer outstanding, its client free, its client's busy time counted."""
        del self.state.outstanding[job.key]
        self.in_flight[job.client] -= 1
        if not self.in_flight[job.client]:
            del self.in_flight[job.client]
        self.state.busy_seconds += (job.arrival_time if ended is None else ended) - job.dispatch_time
        self.state.uploads += ended is None and not job.lost  # its update reached the server

    def withdraw(self) -> list[Job]:
        """Close the round on its dispatches still out (they are returned: their clients are free, their
        results to be ignored, their work counted until now, as a server that cancels them would) and on
        those still waiting for an online client (never made)."""
        jobs = list(self.state.outstanding.values())
        for job in jobs:
            self.arrived(job, min(job.arrival_time, self.state.now))
        self.state.waiting = 0
        return jobs

    def closed_loop(self, count: int) -> int:
        """The replacement dispatches to make now for `count` more open slots in a closed loop: none where
        clients check in by themselves; none until at least O slots are open (`redistribution_threshold`),
        then all of them at once, every one from the current version."""
        if self.context.world.open_loop:
            return 0
        self.state.held += count
        if self.state.held < self.context.config.redistribution_threshold:
            return 0
        count, self.state.held = self.state.held, 0
        return count

    def start_round(self, count: int) -> None:
        """Dispatch `count` clients as `request` does; under a round deadline, a new round begins now
        and ends at the deadline at the latest."""
        deadline = self.context.strategy.round_deadline
        if deadline is None:
            self.request(count)
            return
        self.state.deadline_at = ends = self.state.now + deadline  # known to the dispatches: partial work
        self.request(count)
        self.events.at(Event(ends, Kind.DEADLINE))

    def start(self) -> None:
        """The events a fresh or resumed run begins with: its clients in flight, the first dispatches or
        the next check-in, and a wake-up where dispatches wait for a client to come online."""
        state, checkins = self.state, self.context.world.checkins
        for job in state.outstanding.values():  # a resumed run's clients in flight
            self.spawn(job)
        if checkins is not None:
            self.events.at(Event(checkins.time(state.checkins), Kind.CHECK_IN, (state.checkins,)))
        elif state.dispatched == 0:
            self.start_round(self.context.strategy.initial_clients)
        elif state.deadline_at is not None:  # a resumed run's open round
            self.events.at(Event(state.deadline_at, Kind.DEADLINE))
        elif state.compass is not None:  # a resumed run's arrival groups (FedCompass)
            for number, group in state.compass.groups.items():
                self.events.at(Event(group.deadline, Kind.DEADLINE, (number,)))
        if state.waiting:
            self.wake_when_online()

    def on_wake(self, event: Event) -> bool:
        """A client came online: dispatch what waits for one (never the run's end)."""
        self.state.now = event.time
        self.wakeups.discard(event.time)
        self.request(0)
        return False

    def on_check_in(self, event: Event) -> bool:
        """A client checked in (`CheckInDesk`; never the run's end)."""
        self.state.now = event.time
        self.wakeups.discard(event.time)
        self.desk.serve(event)
        return False


class CheckInDesk:
    """Open arrivals (`arrivals: poisson`): a check-in is dispatched while fewer than M are in flight,
    and turned away otherwise, as is one that finds no online idle client."""

    def __init__(self, dispatcher: Dispatcher):
        self.dispatcher, self.state = dispatcher, dispatcher.state
        self.checkins, self.world = dispatcher.context.world.checkins, dispatcher.context.world
        self.cap = dispatcher.context.strategy.initial_clients

    def serve(self, event: Event) -> None:
        """Dispatch the check-in's client, or turn it away; schedule the next check-in that can matter."""
        assert self.checkins is not None  # a check-in happens only under arrivals: poisson
        room = len(self.state.outstanding) < self.cap
        chosen = self.dispatcher.picker.sample(1) if room else np.zeros(0, dtype=np.int64)
        for client in chosen:
            self.dispatcher.dispatch(int(client))
        (index,) = event.order
        following = index + 1 if len(chosen) else self.next_useful(index + 1)
        self.state.checkins = following
        self.dispatcher.events.at(Event(self.checkins.time(following), Kind.CHECK_IN, (following,)))

    def next_useful(self, index: int) -> int:
        """After a check-in was turned away, the first from `index` on that can be dispatched: nothing
        changes for a check-in before the next arrival (which it precedes at an equal time) or the next
        idle client coming online (which it follows at an equal time), so those in between, turned away
        alike and drawing nothing, are skipped in one step. One no client will ever take ends the run."""
        assert self.checkins is not None
        now = self.state.now
        arrival = min((job.arrival_time for job in self.state.outstanding.values()), default=NEVER)
        online = NEVER  # with M in flight, only an arrival frees a place
        if len(self.state.outstanding) < self.cap:
            online = self.world.next_eligible(self.dispatcher.picker.candidates(), now)
        if arrival == NEVER and online == NEVER:
            no_client_online(now, len(self.dispatcher.picker.candidates()), len(self.dispatcher.context.sizes))
        return self.checkins.first_after(index, arrival, online)


def no_client_online(now: float, candidates: int, clients: int) -> None:
    """The run waits for a client that will never come: one line instead of a hang. Where it may draw
    only some clients (in a synchronous round, those that reported are not drawn again), it says so:
    a round can wait forever while others are online."""
    fix = "extend the trace, or set max_virtual_time before its end"
    if candidates == clients:
        raise InputError(f"no client is online after virtual time {now!r} (an availability trace that ends?); {fix}")
    raise InputError(
        f"none of the {candidates} of {clients} clients the run may still draw (idle, and in a synchronous round "
        f"not yet reported) comes online after virtual time {now!r}, though others may be (a trace that ends?); {fix}"
    )


def next_job(
    context: RunContext, state: SimulationState, client: int, updates: int, work: tuple[int, float] | None = None
) -> Job:
    """The client's next dispatch, now, from the current version, after `updates` client updates were
    aggregated: its arrival time and learning rates, and under partial work the samples it trains;
    `work`: its local steps and learning-rate factor where the strategy budgets them (FedQueue)."""
    system, size = context.system, int(context.sizes[client])
    index = state.count_dispatch(client)
    samples = None if state.compass is None else scheduled_samples(context, state, client, size)
    if work is not None and work[0] < whole_steps(context.config, size):
        samples = samples_after(work[0], size, context.config.batch_size)
    phases, transfers = system.phases(client, size, index, samples), None
    if system.server is not None and isinstance(system.links, Links) and state.link is not None:
        transfers = system.server.book_transfers(state.link, system.links, client, state.now, phases.compute)
        phases = system.phases(client, size, index, samples, transfers)
    if context.strategy.partial_work and state.deadline_at is not None:
        config = context.config
        samples = samples_that_fit(phases, state.now, state.deadline_at, size, config.batch_size, config.local_epochs)
        samples = samples or None  # none fits: it trains whole and is discarded at the deadline
        if samples is not None:
            phases = system.phases(client, size, index, samples)
    duration = phases.total
    lrs = context.strategy.learning_rates(state.version, updates, system.delay(client, duration))
    if work is not None:
        lrs = tuple(lr * work[1] for lr in lrs)
    ends, lost = context.world.fate(client, index, state.now, state.now + phases.uploaded, state.now + duration)
    trained_at = None
    if context.config.client_freed == "after_training":  # free again once its training ends
        trained_at = min(ends, state.now + phases.download + phases.compute)
    if context.config.durations == "measured":  # known when its training ends (`clients.ClientTasks`)
        ends = math.inf
    return Job(client, index, state.version, state.now, ends, lrs, lost, samples, transfers, trained_at)


def scheduled_samples(context: RunContext, state: SimulationState, client: int, size: int) -> int | None:
    """FedCompass: the samples of the local steps its scheduler gives the client's dispatch now (None: its
    whole local epochs, Q_max), the client now in its arrival group (`sim/compass.py`)."""
    parameters = getattr(context.strategy, "parameters", None)
    assert state.compass is not None and isinstance(parameters, FedCompassParameters)
    config = context.config
    whole = whole_steps(config, size)
    given = state.compass.assign(client, state.now, parameters.step_bounds(whole), parameters.latest_time_factor)
    return None if given.steps == whole else samples_after(given.steps, size, config.batch_size)
