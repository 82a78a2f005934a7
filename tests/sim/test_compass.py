"""FedCompass's scheduler (`sim.compass`), each decision computed by hand: steps from a client's speed,
joining the group that gives the most steps, a new group behind an open one, arrivals on time and late,
a group's aggregation at its last member or its deadline, and a lost dispatch. peers/fedcompass_appfl.py
runs APPFL's own scheduler on the same clients (docs/algorithms.md "FedCompass")."""

import pytest

from asyncfl.settings.config import make_config
from asyncfl.settings.errors import InputError
from asyncfl.sim.compass import ArrivalGroup, CompassSchedule, Dispatch

STEPS = (5, 40)  # Q_min, Q_max
FACTOR = 1.5  # λ


def test_a_client_without_a_speed_trains_q_max_alone_and_its_arrival_measures_it():
    schedule = CompassSchedule()
    assert schedule.assign(3, 0.0, STEPS, FACTOR) == Dispatch(None, 40, 0.0)
    assert schedule.arrive(3, 10.0, momentum=0.9) == ("alone", None)
    assert schedule.speeds == {3: 0.25}  # 10 s / 40 steps
    schedule.assign(3, 10.0, STEPS, FACTOR)  # no group open: a new one, Q_max
    assert schedule.dispatches[3] == Dispatch(0, 40, 10.0) and schedule.groups[0] == ArrivalGroup(20.0, 25.0, [3])
    schedule.arrive(3, 30.0, momentum=0.5)
    assert schedule.speeds[3] == 0.5 * 0.25 + 0.5 * 0.5  # (1 − m)·old + m·(20 s / 40 steps)


def test_a_dispatch_joins_the_group_that_gives_it_the_most_steps_within_the_bounds():
    schedule = CompassSchedule(speeds={1: 0.25, 7: 1.0})
    schedule.groups = {
        0: ArrivalGroup(10.0, 15.0, [7]),
        1: ArrivalGroup(8.0, 12.0, [7]),
        2: ArrivalGroup(30.0, 45.0, [7]),
    }
    given = schedule.assign(1, 2.0, STEPS, FACTOR)
    # group 0: ⌊8 / 0.25⌋ = 32, group 1: 24, group 2: 112 > Q_max
    assert given == Dispatch(0, 32, 2.0) and schedule.groups[0].members == [7, 1]


def test_where_no_group_fits_a_new_one_comes_back_one_full_dispatch_of_the_fastest_after_a_deadline():
    schedule = CompassSchedule(speeds={1: 1.0, 7: 0.5, 8: 2.0}, next_group=4)
    schedule.groups = {0: ArrivalGroup(3.0, 12.0, [7, 8])}  # expected 1 s away: 1 step < Q_min
    given = schedule.assign(1, 2.0, STEPS, FACTOR)
    # back at 12 + 0.5 × 40 = 32: ⌊30 / 1.0⌋ = 30 steps; expected 2 + 30, deadline 2 + 1.5 × 30
    assert given == Dispatch(4, 30, 2.0) and schedule.groups[4] == ArrivalGroup(32.0, 47.0, [1])
    assert schedule.next_group == 5


@pytest.mark.parametrize(
    ("deadline", "steps"),
    [(2.5, 5), (-1.0, 40), (200.0, 40)],
    ids=["fits-fewer-than-q-min", "deadline-past", "beyond-q-max"],
)
def test_a_new_groups_steps_are_clipped_to_the_bounds(deadline, steps):
    """Back one full dispatch of the fastest member (0.01 × 40 = 0.4 s) after the group's deadline, at
    1 s a step from now = 2: ⌊deadline − 1.6⌋ steps; Q_max where no open group gives at most Q_max."""
    schedule = CompassSchedule(speeds={1: 1.0, 7: 0.01})
    schedule.groups = {0: ArrivalGroup(-100.0, deadline, [7])}
    assert schedule.assign(1, 2.0, STEPS, FACTOR).steps == steps


def test_a_group_waits_for_its_last_member_and_takes_the_late_updates_held_since():
    schedule = CompassSchedule(speeds={1: 1.0, 2: 1.0, 3: 1.0})
    schedule.groups = {0: ArrivalGroup(10.0, 15.0, [1, 2]), 1: ArrivalGroup(4.0, 6.0, [3])}
    schedule.dispatches = {1: Dispatch(0, 10, 0.0), 2: Dispatch(0, 10, 0.0), 3: Dispatch(1, 4, 0.0)}
    assert schedule.arrive(3, 7.0, momentum=0.9) == ("late", 1)  # after its group's deadline
    assert 1 not in schedule.groups and schedule.late == [3]
    assert schedule.arrive(1, 9.0, momentum=0.9) == ("wait", 0)
    assert schedule.due_at_deadline(0)
    assert schedule.arrive(2, 15.0, momentum=0.9) == ("complete", 0)  # at the deadline is in time
    assert schedule.aggregate(0) == [3, 1, 2] and schedule.late == [] and schedule.groups == {}


def test_a_deadline_aggregates_what_arrived_and_makes_the_rest_late():
    schedule = CompassSchedule(speeds={1: 1.0, 2: 1.0})
    schedule.groups = {0: ArrivalGroup(10.0, 15.0, [1, 2])}
    schedule.dispatches = {1: Dispatch(0, 10, 0.0), 2: Dispatch(0, 10, 0.0)}
    assert not schedule.due_at_deadline(0)  # nothing arrived: the deadline does nothing
    schedule.arrive(1, 9.0, momentum=0.9)
    assert schedule.aggregate(0) == [1] and not schedule.due_at_deadline(0)
    assert schedule.arrive(2, 14.0, momentum=0.9) == ("late", 0)  # before the deadline, but its group is aggregated
    assert schedule.groups == {} and schedule.late == [2]


def test_a_lost_dispatch_leaves_its_group_and_may_complete_it():
    schedule = CompassSchedule(speeds={1: 1.0, 2: 1.0, 4: 1.0})
    schedule.groups = {0: ArrivalGroup(10.0, 15.0, [1, 2]), 1: ArrivalGroup(10.0, 15.0, [4])}
    schedule.dispatches = {
        1: Dispatch(0, 10, 0.0),
        2: Dispatch(0, 10, 0.0),
        4: Dispatch(1, 10, 0.0),
        5: Dispatch(None, 40, 0.0),
    }
    schedule.arrive(1, 9.0, momentum=0.9)
    assert schedule.lose(2) == 0  # its group now holds arrivals and nobody in flight
    assert schedule.lose(4) is None and 1 not in schedule.groups  # an empty group is done with
    assert schedule.lose(5) is None


def test_clients_are_assigned_fastest_first_those_without_a_speed_last():
    schedule = CompassSchedule(speeds={1: 2.0, 2: 0.5, 3: 0.5})
    assert schedule.by_speed([9, 1, 3, 2, 8]) == [2, 3, 1, 8, 9]


@pytest.mark.parametrize("settings", [{"replacement": True}, {"client_freed": "after_training"}])
def test_a_client_drawn_again_while_in_flight_is_refused_not_a_keyerror(settings):
    """Found by the generated layer: FedCompass holds one dispatch per client, so a client drawn again
    while its dispatch is in flight (with replacement, or freed after training) ended a run at its
    fourth round in a KeyError; now one line at the start."""
    with pytest.raises(InputError, match=f"{next(iter(settings))}: .* does not go with algorithm: fedcompass"):
        make_config({"algorithm": "fedcompass", **settings})
