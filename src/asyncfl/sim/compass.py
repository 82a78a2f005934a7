"""FedCompass's scheduler (Li et al., ICLR 2024, "FedCompass: Efficient Cross-Silo Federated Learning on
Heterogeneous Client Devices Using a Computing Power-Aware Scheduler", Algorithms 1-2; APPFL's
`CompassScheduler`): it gives each dispatch a number of local steps Q from its client's measured speed, so
that the clients of an arrival group come back together, and says when a group is aggregated.

On the virtual clock, as APPFL's scheduler runs on the wall clock:
- A client's speed is its seconds per local step, (arrival − dispatch) / Q of its last dispatch, smoothed
  as s ← (1 − m)·s + m·s_new (m: `speed_momentum`); a client not heard from has none.
- A dispatch to a client without a speed trains Q_max steps in no group, and is aggregated alone when
  it arrives (APPFL's first round of every client).
- Any other dispatch joins the group that gives it the most steps Q = ⌊(expected − now)/s⌋ within
  [Q_min, Q_max]; where none does, it opens a new group: Q the most steps that bring it back one
  full dispatch of a still-open group's fastest member after that group's deadline, clipped to
  [Q_min, Q_max] (Q_max where no group is open), expected back at now + Q·s, its deadline
  now + λ·Q·s (λ: `latest_time_factor`).
- An arrival by its group's deadline waits in the group; the group is aggregated when its last member
  arrives or at its deadline, whichever is first, with every late update held since (`late`). An
  arrival after its group's deadline is late: held for the next group's aggregation, its slot
  dispatched again at once.

Where this differs from APPFL's (the project's choices, docs/algorithms.md "FedCompass"): clients are drawn
for each dispatch as every other asynchronous name's are (M in flight of C, not every client always), so
the slots a group's arrivals free are filled by the clients drawn then, each assigned in the order of
their speeds (the fastest first, as APPFL reassigns a group's clients); and Q_max is each client's own
dispatch (its local epochs' steps), so that no dispatch trains more than every other name's does.
"""

import math
from dataclasses import dataclass, field
from typing import Literal

Outcome = Literal["alone", "wait", "complete", "late"]


@dataclass
class ArrivalGroup:
    """Clients dispatched to come back together.

    Attributes:
        expected: the virtual time its members are expected back.
        deadline: its latest arrival time; past it (or once aggregated) an arrival is late.
        members: its clients still in flight.
        arrived: its clients that arrived by the deadline (their updates held until it is aggregated).
        aggregated: whether it was aggregated (at its last member's arrival or at its deadline).
    """

    expected: float
    deadline: float
    members: list[int] = field(default_factory=list)
    arrived: list[int] = field(default_factory=list)
    aggregated: bool = False


@dataclass
class Dispatch:
    """What the scheduler gave one dispatch in flight: its group (None: none), steps and start."""

    group: int | None
    steps: int
    start: float


@dataclass
class CompassSchedule:
    """The scheduler's state, a checkpoint's part: speeds, groups, the dispatches in flight, late updates.

    Attributes:
        speeds: each client heard from, its smoothed seconds per local step.
        groups: the arrival groups not yet done with, by number.
        dispatches: each client in flight, what it was given.
        late: clients whose late updates wait for the next group's aggregation, in arrival order.
        next_group: the number the next group gets.
    """

    speeds: dict[int, float] = field(default_factory=dict)
    groups: dict[int, ArrivalGroup] = field(default_factory=dict)
    dispatches: dict[int, Dispatch] = field(default_factory=dict)
    late: list[int] = field(default_factory=list)
    next_group: int = 0

    @classmethod
    def from_payload(cls, payload: dict) -> "CompassSchedule":
        """The schedule a checkpoint holds (`dataclasses.asdict` of one)."""
        return cls(
            {int(c): float(s) for c, s in payload["speeds"].items()},
            {int(n): ArrivalGroup(**g) for n, g in payload["groups"].items()},
            {int(c): Dispatch(**d) for c, d in payload["dispatches"].items()},
            [int(c) for c in payload["late"]],
            int(payload["next_group"]),
        )

    def assign(self, client: int, now: float, steps: tuple[int, int], factor: float) -> Dispatch:
        """The dispatch of `client` now: its group and steps within `steps` = (Q_min, Q_max); a new
        group's deadline is λ = `factor` times its expected duration after now."""
        q_min, q_max = steps
        speed = self.speeds.get(client)
        if speed is None:
            dispatch = Dispatch(None, q_max, now)
        else:
            dispatch = self.join(client, now, q_min, q_max) or self.open_group(client, now, steps, factor)
        self.dispatches[client] = dispatch
        return dispatch

    def join(self, client: int, now: float, q_min: int, q_max: int) -> Dispatch | None:
        """The open group that gives the client the most steps in [Q_min, Q_max] (the later group on a
        tie, as APPFL's scan keeps it), the client now its member; None where none does."""
        best: tuple[int, int] | None = None
        for number, group in self.groups.items():
            steps = math.floor((group.expected - now) / self.speeds[client])
            if q_min <= steps <= q_max and (best is None or steps >= best[1]):
                best = (number, steps)
        if best is None:
            return None
        self.groups[best[0]].members.append(client)
        return Dispatch(best[0], best[1], now)

    def open_group(self, client: int, now: float, steps: tuple[int, int], factor: float) -> Dispatch:
        """A new group of the client alone: back one full dispatch of an open group's fastest member
        after that group's deadline (the most steps of those within Q_max), within [Q_min, Q_max]."""
        q_min, q_max = steps
        speed, chosen = self.speeds[client], -1
        for group in self.groups.values():
            if now < group.deadline:
                fastest = min(self.speeds[c] for c in group.members + group.arrived)
                fits = math.floor((group.deadline + fastest * q_max - now) / speed)
                if fits <= q_max:
                    chosen = max(chosen, fits)
        chosen = q_max if chosen < 0 else max(chosen, q_min)
        number, self.next_group = self.next_group, self.next_group + 1
        self.groups[number] = ArrivalGroup(now + chosen * speed, now + chosen * speed * factor, [client])
        return Dispatch(number, chosen, now)

    def arrive(self, client: int, now: float, momentum: float) -> tuple[Outcome, int | None]:
        """The client's update arrived now: its speed measured; what becomes of the update, and its group."""
        dispatch = self.dispatches.pop(client)
        measured = (now - dispatch.start) / dispatch.steps
        old = self.speeds.get(client)
        self.speeds[client] = measured if old is None else (1 - momentum) * old + momentum * measured
        if dispatch.group is None:
            return "alone", None
        group = self.groups[dispatch.group]
        group.members.remove(client)
        if group.aggregated or now > group.deadline:
            self.late.append(client)
            self.drop_if_done(dispatch.group)
            return "late", dispatch.group
        group.arrived.append(client)
        return ("wait" if group.members else "complete"), dispatch.group

    def lose(self, client: int) -> int | None:
        """The client's dispatch was lost: it leaves its group; the group's number where that leaves a
        group with arrivals and no member in flight (complete), else None."""
        dispatch = self.dispatches.pop(client)
        if dispatch.group is None:
            return None
        group = self.groups[dispatch.group]
        group.members.remove(client)
        if group.members or group.aggregated or not group.arrived:
            self.drop_if_done(dispatch.group)
            return None
        return dispatch.group

    def aggregate(self, number: int) -> list[int]:
        """The group is aggregated now (with the late updates held): the clients whose updates it takes,
        the late ones first; the group is done with once no member is in flight."""
        group, taken = self.groups[number], [*self.late, *self.groups[number].arrived]
        group.aggregated, self.late = True, []
        self.drop_if_done(number)
        return taken

    def due_at_deadline(self, number: int) -> bool:
        """Whether the group's deadline aggregates it: it is still open and holds arrivals."""
        group = self.groups.get(number)
        return group is not None and not group.aggregated and bool(group.arrived)

    def drop_if_done(self, number: int) -> None:
        """A group aggregated (or without arrivals) and with no member in flight is done with."""
        group = self.groups[number]
        if not group.members and (group.aggregated or not group.arrived):
            del self.groups[number]

    def by_speed(self, clients: list[int]) -> list[int]:
        """`clients` in the order they are assigned: the fastest first, those without a speed last."""
        return sorted(clients, key=lambda c: (c not in self.speeds, self.speeds.get(c, 0.0), c))
