"""The simulation checks itself while it runs (docs/world.md "The clients' world"): cheap tests of what
must hold at every event, so that a bug in the engine, or in a strategy or system model added later,
stops the run with one line naming the broken invariant and the event, before any result is written
as finished. None of them changes a number the run computes.
"""

import math
from dataclasses import dataclass

from asyncfl.fl.strategy import Strategy
from asyncfl.settings.errors import InputError
from asyncfl.sim.client_system import ClientSystem
from asyncfl.sim.network import Links
from asyncfl.sim.state import Job, SimulationState
from asyncfl.sim.world import OFFLINE

TOLERANCE = 1e-9  # of a sum of coefficients, which rounding moves by a few ulps


class InvariantViolated(InputError):
    """An invariant of the simulation does not hold: a bug, never a user's mistake."""


def violated(invariant: str, event: str) -> None:
    raise InvariantViolated(
        f"self-check failed: {invariant} does not hold at {event}; nothing was written as finished "
        "(this is a bug of the engine or of a strategy: please report it with the command line)"
    )


@dataclass
class SelfCheck:
    """What a run must keep true, checked as it goes.

    Attributes:
        max_in_flight: M, the clients a strategy may keep in flight (J for synchronous rounds).
        convex: the strategy's new model is a convex combination of the old one and the updates, so its
            coefficients sum to at most 1 (FedBuff's step on the mean update is not).
        dispatched, aggregated, unaggregated: the run's own counts of dispatches, of aggregated updates
            and of dispatches that will never be (lost, discarded, rejected: `outcomes`), kept apart
            from the engine's state so that a job the engine loses track of is noticed.
        now, version: the virtual time and global version the checks last saw.
        progress_bound, since_aggregation: the most dispatches a live run makes between two
            aggregations (`outcomes.progress_bound`), and those made since the last one.
    """

    max_in_flight: int
    convex: bool
    progress_bound: int
    dispatched: int = 0
    aggregated: int = 0
    unaggregated: int = 0
    now: float = 0.0
    version: int = 0
    since_aggregation: int = 0

    @classmethod
    def of(cls, state: SimulationState, strategy: Strategy, bound: int) -> "SelfCheck":
        """The checks of a run starting (or resuming) at `state` (at a checkpoint nothing is buffered),
        with at most `bound` dispatches between aggregations (`outcomes.progress_bound`)."""
        unaggregated = state.dropped + state.discarded + state.rejected
        counts = (state.dispatched, state.aggregated(0), unaggregated, state.now, state.version)
        return cls(strategy.most_in_flight, strategy.convex, bound, *counts)

    def on_dispatch(self, job: Job, in_flight: int, online: bool) -> None:
        self.dispatched += 1
        self.since_aggregation += 1
        event = f"the dispatch of client {job.client} at t = {job.dispatch_time!r} ({in_flight} in flight)"
        if in_flight > self.max_in_flight:
            violated(f"in flight ≤ M = {self.max_in_flight}", event)
        if not online:
            violated("only online clients are dispatched", event)
        if self.since_aggregation > self.progress_bound:
            violated(
                f"progress: an aggregation, or a stated reason to stop, within {self.progress_bound} dispatches", event
            )

    def on_booking(self, job: Job, peak: float, capacity: float) -> None:
        """After a dispatch's transfers were booked on the shared server link: never more than its capacity."""
        if peak > capacity * (1 + TOLERANCE):
            event = f"the dispatch of client {job.client} at t = {job.dispatch_time!r}"
            violated(f"the server link's booked rate ≤ its capacity ({peak!r} > {capacity!r} bit/s)", event)

    def on_unaggregated(self, count: int = 1) -> None:
        self.unaggregated += count

    def on_arrival(self, job: Job, system: ClientSystem, size: int) -> None:
        event = f"the arrival of client {job.client} (dispatch {job.dispatch_index}) at t = {job.arrival_time!r}"
        if job.arrival_time < self.now:
            violated(f"the clock never goes back (it was at {self.now!r})", event)
        if job.samples is not None and not 0 < job.samples < system.local_epochs * size:  # partial work
            violated(f"partial work trains some but not all of its {system.local_epochs * size} samples", event)
        phases = system.job_phases(job, size)
        if not all(math.isfinite(value) and value >= 0 for value in vars(phases).values()):
            violated(f"every phase finite and ≥ 0 ({phases})", event)
        if job.transfers is not None and system.server is not None and isinstance(system.links, Links):
            fastest = system.server.fastest(system.links, job.client)
            # a transfer's seconds are a difference of two instants of the clock: a few of their ulps off,
            # which a nanosecond transfer late in a run feels (a 3.5e-9 s upload at t = 102 s: 1e-6 of it)
            slack = 4 * math.ulp(job.arrival_time)
            if any(took < least * (1 - TOLERANCE) - slack for took, least in zip(job.transfers, fastest, strict=True)):
                violated(f"no transfer faster than its link alone allows ({job.transfers} against {fastest})", event)
        if job.lost == OFFLINE:  # lost when its client went offline, before its upload completed
            if not job.dispatch_time <= job.arrival_time < job.dispatch_time + phases.uploaded:
                violated(
                    f"an offline loss before its upload ended ({job.dispatch_time!r} + {phases.uploaded!r})", event
                )
        elif job.arrival_time != job.dispatch_time + phases.total:
            violated(f"arrival = dispatch + its phases ({job.dispatch_time!r} + {phases.total!r})", event)
        self.now = job.arrival_time

    def on_aggregation(self, version: int, coefficients: list[float], buffered: int, in_flight: int) -> None:
        event = f"the aggregation that made version {version}"
        if version != self.version + 1:
            violated(f"version + 1 per aggregation (it was {self.version})", event)
        if not all(math.isfinite(c) and c >= 0 for c in coefficients):
            violated(f"aggregation coefficients finite and ≥ 0 ({coefficients})", event)
        if self.convex and sum(coefficients) > 1 + TOLERANCE:
            violated(f"coefficients of a convex combination summing to at most 1 ({sum(coefficients)!r})", event)
        self.version, self.aggregated = version, self.aggregated + len(coefficients)
        self.since_aggregation = 0
        if self.dispatched != self.aggregated + buffered + in_flight + self.unaggregated:
            violated(
                f"every dispatch accounted for ({self.dispatched} dispatched, {self.aggregated} aggregated, "
                f"{buffered} buffered, {in_flight} in flight, {self.unaggregated} lost, discarded or rejected)",
                event,
            )
