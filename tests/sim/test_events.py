"""The simulation's event loop: hours of simulated waiting cost no real time, events at one time are
served in one order, the clock always makes progress, a stuck simulation is an error, and every kind
of event has a handler."""

import math

import pytest

from asyncfl.sim.engine import open_logs
from asyncfl.sim.events import RESOLUTION, Event, EventQueue, Kind, SimulationDeadlock
from asyncfl.sim.state import Job
from engine_cases import recorded_simulation


def test_time_jumps_to_the_next_event_and_events_at_one_time_are_served_in_event_order():
    queue = EventQueue(0.0)
    for time in (7200.0, 3600.0, 0.0):
        queue.at(Event(time, Kind.WAKE))
    job = Job(2, 0, 0, 0.0, 3600.0, (0.1,))
    queue.at(Event(3600.0, Kind.DEADLINE))
    queue.at(Event.arrival(job))
    queue.at(Event(3600.0, Kind.CHECK_IN, (4,)))
    served = [(queue.next(), queue.now) for _ in range(len(queue))]
    assert [(event.time, event.kind) for event, _ in served] == [
        (0.0, Kind.WAKE),
        (3600.0, Kind.WAKE),
        (3600.0, Kind.CHECK_IN),
        (3600.0, Kind.ARRIVAL),
        (3600.0, Kind.DEADLINE),
        (7200.0, Kind.WAKE),
    ]
    assert [now for _, now in served] == [0.0, *[3600.0] * 4, 7200.0]  # two simulated hours, not slept


def test_an_event_scheduled_while_a_batch_is_served_joins_a_later_batch():
    """As the asyncio loop it replaced served them (so every run's bytes stay the same): a wake-up
    scheduled at t while the arrivals at t are served comes after them, though WAKE sorts first at one
    time; events within the clock's resolution of the batch's time are due together."""
    queue = EventQueue(0.0)
    queue.at(Event(1.0, Kind.ARRIVAL, (3, 0)))
    queue.at(Event(1.0 + RESOLUTION / 2, Kind.ARRIVAL, (1, 0)))  # within the resolution: the same batch
    first = queue.next()
    queue.at(Event(1.0, Kind.WAKE))  # scheduled while the batch at 1.0 is served
    queue.at(Event(0.5, Kind.WAKE, (7,)))  # already past: due in the next batch, at the clock's time
    assert [first, queue.next(), queue.next(), queue.next()] == [
        Event(1.0, Kind.ARRIVAL, (3, 0)),
        Event(1.0 + RESOLUTION / 2, Kind.ARRIVAL, (1, 0)),
        Event(0.5, Kind.WAKE, (7,)),
        Event(1.0, Kind.WAKE),
    ]
    assert queue.now == 1.0  # the batch's time: its earliest


def test_far_future_events_are_reached_in_one_step_each():
    """Far out, time + resolution rounds to the time itself: the clock goes one float past it, so an
    event scheduled at the clock's own time is reached too (a world whose clients come online once in
    1e9 s used to spin)."""
    queue = EventQueue(0.0)
    for when in (1e6, 1e20, 1.7e21, 1e300):
        queue.at(Event(when, Kind.WAKE))
        assert queue.next().time == when and queue.now >= when
    queue.at(Event(queue.now, Kind.WAKE))
    before = queue.now
    assert queue.next().time == before and queue.now == math.nextafter(before, math.inf)


def test_a_stuck_simulation_is_an_error_not_a_hang():
    queue = EventQueue(3.0)
    with pytest.raises(SimulationDeadlock, match="none is scheduled"):
        queue.next()


def test_every_kind_of_event_has_a_handler(tmp_path):
    simulation, _ = recorded_simulation(tmp_path / "run", [4, 4, 4], rounds=1, clients_per_round=2)
    simulation.run()
    (tmp_path / "logs").mkdir()
    logs = open_logs(simulation.context, tmp_path / "logs", None, 0)
    assert set(simulation.handlers(logs)) == set(Kind)
    logs.close()
