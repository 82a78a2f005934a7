"""What becomes of the dispatches that never join the global model (docs/design.md "Stragglers"), and
the per-round counts the logs keep of them, so that both budgets add up: every dispatch is aggregated,
buffered, in flight, or one of these.

- lost (`world.OFFLINE`, `world.FAILED`): its client went offline, or the dispatch failed;
- DISCARDED: a synchronous round closed without it (its J first arrivals were in, or its deadline
  passed): a late result, which the server ignores;
- ABANDONED: its synchronous round reached its deadline with too few reports, and was dropped whole;
- REJECTED: an asynchronous update staler than `max_staleness`, under `stale_updates: drop`.
"""

import csv
import io
from collections.abc import Callable
from dataclasses import dataclass, field

from asyncfl.fl.strategy import Strategy
from asyncfl.settings.config import TrainConfig
from asyncfl.settings.errors import InputError
from asyncfl.sim.invariants import SelfCheck
from asyncfl.sim.state import Job, SimulationState
from asyncfl.sim.world import FAILED, OFFLINE

DISCARDED, ABANDONED, REJECTED = "discarded", "abandoned", "rejected"
# metrics.csv's per-round count of each fate, by the fate's name in events.csv's `lost`
COUNT_COLUMN = {
    OFFLINE: "dropped",
    FAILED: "dropped",
    DISCARDED: "discarded",
    ABANDONED: "discarded",
    REJECTED: "rejected",
}
# A run whose every round is abandoned would never end: it stops after this many in a row
MAX_ABANDONED_IN_A_ROW = 1000
# A run whose every dispatch is lost would never end: it stops after this many lost in a row (a world
# where a dispatch gets through once in a thousand is a setting's mistake, not an experiment)
MAX_LOST_IN_A_ROW = 1000
# A client is reported as starved by the staleness cap once this many of its updates, all, were rejected
STARVED_AFTER = 3


@dataclass
class Unaggregated:
    """The dispatches that did not join the model since the last aggregation, which logs them, set
    aside in the run's state and its self-check (the dispatcher withdraws a closed round's).

    Attributes:
        jobs: each with its fate and, for a rejected update, its staleness τ.
        abandoned_rounds: synchronous rounds abandoned since the last aggregation.
        kept_over_cap: asynchronous updates staler than the cap that were aggregated (`stale_updates: keep`).
    """

    state: SimulationState
    check: SelfCheck
    withdraw: Callable[[], list[Job]]  # the dispatcher's: closes the round on its dispatches still out
    jobs: list[tuple[Job, str, int | None]] = field(default_factory=list)
    abandoned_rounds: int = 0
    kept_over_cap: int = 0

    def set_aside(self, jobs: list[Job], fate: str, staleness: int | None = None) -> None:
        """Dispatches that will never be aggregated: counted in the state and the self-check, logged later."""
        state = self.state
        for job in jobs:
            self.jobs.append((job, fate, staleness))
            state.results.pop(job.key, None)  # trained before its fate was known: never used
            if fate in (OFFLINE, FAILED):
                state.dropped += 1
            elif fate == REJECTED:
                state.rejected += 1
            else:
                state.discarded += 1
        self.check.on_unaggregated(len(jobs))

    def discard(self, fate: str) -> None:
        """Close the round on its dispatches still out: their clients are free, their results ignored,
        and its dispatches still waiting for an online client are not made."""
        self.set_aside(self.withdraw(), fate)

    def abandon(self, arrived: list[Job]) -> None:
        """A round that missed its reports: every dispatch of it, `arrived` or not, discarded."""
        self.discard(ABANDONED)
        self.set_aside(arrived, ABANDONED)
        self.abandoned_rounds += 1

    def counts(self, columns: tuple[str, ...], dispatched: int) -> dict[str, int]:
        """metrics.csv's accounting cells of the round being logged (`columns`: the run's own)."""
        counts = dict.fromkeys(columns, 0)
        for _, fate, _ in self.jobs:
            counts[COUNT_COLUMN[fate]] += 1
        counts.update(dispatched_total=dispatched, abandoned=self.abandoned_rounds, over_cap_kept=self.kept_over_cap)
        return {column: counts[column] for column in columns}

    def clear(self) -> None:
        self.jobs.clear()
        self.abandoned_rounds = self.kept_over_cap = 0


def accounting_columns(strategy: Strategy, config_caps: bool, loses: bool) -> tuple[str, ...]:
    """metrics.csv's accounting columns of a run: the dispatches so far (the work budget), then per round
    the counts of the fates the run can have: dispatches `dropped` by the world (`loses`), `discarded`
    by rounds that closed without them, `abandoned` rounds, updates `rejected` or, under `stale_updates:
    keep`, aggregated over the cap (`config_caps`: a max_staleness is set). None where no fate applies,
    so a run without these features keeps its columns."""
    fates = {
        "dropped": loses,
        "discarded": strategy.closes_rounds,
        "abandoned": strategy.round_deadline is not None,
        "rejected": strategy.drops_stale,
        "over_cap_kept": config_caps and not strategy.drops_stale,
    }
    columns = tuple(name for name, applies in fates.items() if applies)
    return ("dispatched_total", *columns) if columns else ()


def check_abandoned(in_a_row: int, config: TrainConfig) -> None:
    """A run whose rounds are all abandoned would never end: one line naming the keys, after MAX_ABANDONED_IN_A_ROW."""
    if in_a_row >= MAX_ABANDONED_IN_A_ROW:
        raise InputError(
            f"the last {in_a_row} rounds were all abandoned: fewer than min_report_fraction = "
            f"{config.min_report_fraction} of J reports arrived within round_deadline = {config.round_deadline!r} "
            "virtual seconds; raise round_deadline or lower min_report_fraction"
        )


def check_lost(lost: list[str], config: TrainConfig) -> None:
    """A run whose last MAX_LOST_IN_A_ROW dispatches were all lost (`lost`: their fates) makes no
    progress, whatever its budget: one line naming the settings that lose them."""
    if len(lost) < MAX_LOST_IN_A_ROW:
        return
    offline = lost.count(OFFLINE)
    if offline >= len(lost) - offline:
        cause = (
            f"their clients went offline before the upload ended (availability: {config.availability}"
            + (
                f", online_mean = {config.online_mean!r} s beside offline_mean = {config.offline_mean!r} s"
                if config.availability != "trace"
                else f", availability_trace {config.availability_trace}"
            )
            + "); online periods must outlast a dispatch: raise online_mean (or lengthen the trace's periods)"
        )
    else:
        cause = f"they failed (failure_probability = {config.failure_probability!r}); lower failure_probability"
    budget = ""
    if config.max_dispatches:
        budget = f" (max_dispatches = {config.max_dispatches} ends a run only at an aggregation)"
    raise InputError(f"the last {len(lost)} dispatches were all lost{budget}: {offline} of them because {cause}")


def will_be_discarded(state: SimulationState, buffered: int, round_size: int, job: Job) -> bool:
    """Whether a synchronous round will close without `job`, known at its dispatch since durations are
    fixed then: it arrives after the round's deadline, or `round_size` results of its round (buffered,
    or in flight and not lost) arrive before it. Such a job is never trained: its result would be
    discarded, so the run's numbers are those of training it and throwing it away."""
    if state.deadline_at is not None and job.arrival_time > state.deadline_at:
        return True
    earlier = sum(1 for other in state.outstanding.values() if not other.lost and other.key < job.key)
    return buffered + earlier >= round_size


def starved_clients(events_text: str) -> list[int]:
    """Clients that had every update rejected as too stale, at least STARVED_AFTER of them (events.csv)."""
    rejected: dict[int, int] = {}
    accepted: set[int] = set()
    for row in csv.DictReader(io.StringIO(events_text)):
        client = int(row["client"])
        if row.get("lost") == REJECTED:
            rejected[client] = rejected.get(client, 0) + 1
        elif not row.get("lost"):
            accepted.add(client)
    return sorted(c for c, count in rejected.items() if count >= STARVED_AFTER and c not in accepted)


def progress_bound(round_size: int, in_flight: int) -> int:
    """The most dispatches a live run makes between two aggregations (the liveness invariant). Every
    dispatch since the last one ended, or will, as one of: an arrival kept for the next aggregation
    (fewer than K = `round_size`), an update rejected over the staleness cap (only those already in
    flight at the last aggregation: at most M = `in_flight`), a dispatch discarded by a synchronous
    round that closed (at most M a round, and after MAX_ABANDONED_IN_A_ROW abandoned rounds the run
    stops, saying why), or one still in flight (at most M); and at most MAX_LOST_IN_A_ROW − 1 lost
    dispatches lie between two of those before the lost-in-a-row guard stops the run, saying why."""
    not_lost = round_size + in_flight * (MAX_ABANDONED_IN_A_ROW + 3)
    return (not_lost + 1) * MAX_LOST_IN_A_ROW
