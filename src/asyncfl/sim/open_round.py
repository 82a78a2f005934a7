"""The round the server is filling (docs/design.md "Training"): the updates that arrived for it, the
dispatches lost or rejected on the way, and the guards that end a run no round can complete."""

from pathlib import Path

from asyncfl.sim.context import RunContext
from asyncfl.sim.dispatcher import Dispatcher
from asyncfl.sim.ending import check_finite
from asyncfl.sim.outcomes import REJECTED, Unaggregated, check_abandoned, check_lost
from asyncfl.sim.rounds import local_result
from asyncfl.sim.state import Job, SimulationState
from asyncfl.training.interface import LocalResult


class Round:
    """What every round of the engine shares: its run's parts, the arrivals' training and the lost-in-a-row
    guard (`OpenRound`; FedCompass's `compass_round.CompassRound`).

    Attributes:
        buffer: the updates of the next aggregation, with their results (the dispatcher counts them too).
        abandoned_in_a_row: synchronous rounds abandoned below their reports since the last aggregation.
        lost_in_a_row: the fates of the dispatches lost since the last update that arrived.
    """

    def __init__(
        self,
        context: RunContext,
        state: SimulationState,
        buffer: list[tuple[Job, LocalResult]],
        dispatcher: Dispatcher,
        unaggregated: Unaggregated,
        out: Path,
    ):
        self.context, self.state, self.strategy, self.out = context, state, context.strategy, out
        self.buffer, self.dispatcher, self.unaggregated = buffer, dispatcher, unaggregated
        self.abandoned_in_a_row = 0
        self.lost_in_a_row: list[str] = []

    def trained(self, job: Job, buffered: int) -> LocalResult:
        """The arrived job's update (trained now if it was not yet, `buffered` results held with it), its
        loss checked."""
        result = local_result(self.context, self.state, job, buffered)
        if self.context.trains:  # a timing-only run's results have no loss to check
            check_finite(result, job, self.state.version, self.out)
        return result

    def record_loss(self, job: Job) -> None:
        """A dispatch whose result never arrives: set aside for the next aggregation's logs, and counted
        towards the lost-in-a-row guard."""
        self.unaggregated.set_aside([job], job.lost)
        self.lost_in_a_row.append(job.lost)
        check_lost(self.lost_in_a_row, self.context.config)

    def dispatches_after_aggregation(self) -> int:
        """The slots to fill once an aggregation is folded in (before the closed loop's threshold)."""
        return self.strategy.clients_after_arrival(True)

    def folded(self) -> None:
        """The round was aggregated: it starts again empty."""
        self.buffer.clear()
        self.abandoned_in_a_row = 0


class OpenRound(Round):
    """What arrives between two aggregations, and what becomes of it. Not checkpointed: a checkpoint is
    taken right after an aggregation, when the round is empty."""

    def lose(self, job: Job) -> bool:
        """A dispatch whose result never arrives: its work is lost, its slot frees and is filled (in a
        closed loop, where the strategy wants it), and the next aggregation's logs record it (False: no
        aggregation is due)."""
        self.record_loss(job)
        in_round = len(self.buffer) + len(self.state.outstanding) + self.state.waiting
        self.dispatcher.request(self.dispatcher.closed_loop(self.strategy.clients_after_loss(in_round)))
        return False

    def take(self, job: Job) -> bool:
        """Take an update that arrived, or reject it as too stale; True when the round is complete."""
        self.lost_in_a_row.clear()
        staleness = job.versions_behind(self.state.version)
        if self.strategy.over_cap(staleness) and self.strategy.drops_stale:
            self.unaggregated.set_aside([job], REJECTED, staleness)
            self.dispatcher.request(self.dispatcher.closed_loop(1))
            return False
        self.unaggregated.kept_over_cap += self.strategy.over_cap(staleness)
        self.buffer.append((job, self.trained(job, len(self.buffer) + 1)))
        if len(self.buffer) < self.strategy.arrivals_per_round or self.strategy.steps_the_server:  # its steps aggregate
            self.dispatcher.request(self.dispatcher.closed_loop(self.strategy.clients_after_arrival(False)))
            return False
        return True

    def has_reports(self) -> bool:
        """Whether the round holds the reports it needs to aggregate at its deadline; if not, it is
        abandoned (it cost the time, the model is unchanged)."""
        if len(self.buffer) >= self.strategy.min_reports:
            return True
        self.unaggregated.abandon([job for job, _ in self.buffer])
        self.buffer.clear()
        self.abandoned_in_a_row += 1
        check_abandoned(self.abandoned_in_a_row, self.context.config)
        return False
