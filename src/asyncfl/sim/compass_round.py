"""What FedCompass's server does with each arrival (docs/algorithms.md "FedCompass"): the engine's round for a
strategy that `schedules_groups`, in place of `open_round.OpenRound`. The scheduler (`sim/compass.py`)
says whether an arrival is aggregated alone (a client not heard from before), waits in its arrival group,
completes it, or is late; the updates it holds are the state's (`SimulationState.waiting_updates`), so a checkpoint
taken at any aggregation keeps them.
"""

from asyncfl.settings.errors import InputError
from asyncfl.sim.compass import CompassSchedule
from asyncfl.sim.open_round import Round
from asyncfl.sim.state import Job

# Late updates held at once, per client in flight, past which no group's arrivals come by its deadline
# any more (the clients' durations swing beyond λ): the run stops saying so instead of holding them for ever
LATE_PER_SLOT = 20


class CompassRound(Round):
    """The aggregation FedCompass's scheduler calls for next, and the updates it holds until then.

    Attributes (beside `Round`'s):
        schedule: the run's scheduler (`SimulationState.compass`).
        refill: the dispatches to make after the aggregation: the slots its group's arrivals freed (1 for
            one alone); no round is abandoned here (`abandoned_in_a_row` stays 0).
    """

    refill = 0

    @property
    def schedule(self) -> CompassSchedule:
        assert self.state.compass is not None  # a run whose strategy schedules groups has a schedule
        return self.state.compass

    @property
    def momentum(self) -> float:
        return float(self.strategy.parameters.speed_momentum)  # type: ignore[attr-defined]

    @property
    def late_limit(self) -> int:
        return LATE_PER_SLOT * self.strategy.initial_clients

    def take(self, job: Job) -> bool:
        """An update arrived: aggregated alone, held in its group or as late; True when an aggregation is due."""
        self.lost_in_a_row.clear()
        result = self.trained(job, len(self.state.waiting_updates) + 1)
        outcome, group = self.schedule.arrive(job.client, self.state.now, self.momentum)
        if outcome == "alone":
            self.buffer[:], self.refill = [(job, result)], 1
            return True
        self.state.waiting_updates[job.key] = (job, result)
        if outcome == "late":
            self.check_late()
            self.dispatcher.request(self.dispatcher.closed_loop(1))
            return False
        return outcome == "complete" and group is not None and self.collect(group)

    def lose(self, job: Job) -> bool:
        """A dispatch whose result never arrives: its slot is filled now; True where it completes its group."""
        self.record_loss(job)
        group = self.schedule.lose(job.client)
        self.dispatcher.request(self.dispatcher.closed_loop(1))
        return group is not None and self.collect(group)

    def on_deadline(self, group: int) -> bool:
        """A group's deadline: True where it holds arrivals to aggregate (the rest of it then late)."""
        return self.schedule.due_at_deadline(group) and self.collect(group)

    def collect(self, group: int) -> bool:
        """The group's aggregation is due: its arrivals and the late updates held since, in arrival order."""
        arrived = len(self.schedule.groups[group].arrived)
        taken = self.schedule.aggregate(group)
        held = list(self.state.waiting_updates.values())
        for client in taken:
            job, result = next(item for item in held if item[0].client == client)
            held.remove((job, result))
            del self.state.waiting_updates[job.key]
            self.buffer.append((job, result))
        self.refill = arrived
        return True

    def check_late(self) -> None:
        if len(self.schedule.late) > self.late_limit:
            factor = self.context.strategy.parameters.latest_time_factor  # type: ignore[attr-defined]
            raise InputError(
                f"FedCompass: {len(self.schedule.late)} late updates held and no arrival group came back by its "
                f"deadline since: the clients' durations swing beyond λ = {factor!r} times the expected one; "
                "raise latest_time_factor (or lower jitter_sigma)"
            )

    def dispatches_after_aggregation(self) -> int:
        return self.refill
