"""The dispatcher on its own, over a real run's context and state on the virtual clock: who may be
drawn, what a dispatch records and schedules, what waits for an online client, and what a closed
round withdraws."""

import pytest

from asyncfl.settings.config import make_config
from asyncfl.settings.errors import InputError
from asyncfl.sim.context import prepare_run
from asyncfl.sim.dispatcher import Dispatcher, no_client_online
from asyncfl.sim.engine import fresh_state
from asyncfl.sim.events import Event, EventQueue, Kind
from asyncfl.sim.invariants import SelfCheck
from asyncfl.sim.outcomes import progress_bound
from asyncfl.sim.state import Job
from asyncfl.training.interface import LocalResult
from engine_cases import contiguous_partition, fixed_clients, tiny_dataset

SIZES = [4, 4, 4, 4, 4, 4]


def dispatched(settings: dict, scenario, trace_rows: list[str] | None = None, tmp_path=None):
    """Run `scenario(dispatcher)` on a fresh run's dispatcher on the virtual clock; return its result."""
    if trace_rows is not None:
        trace = tmp_path / "trace.csv"
        trace.write_text("client,start,end\n" + "\n".join(trace_rows) + "\n")
        settings = {**settings, "availability": "trace", "availability_trace": str(trace)}
    config = make_config({**fixed_clients(1.0, 0.01), "rounds": 1, **settings})
    context = prepare_run(config, tiny_dataset(sum(SIZES)), contiguous_partition(SIZES), "", None)
    state = fresh_state(context, tiny_dataset(sum(SIZES)).info, len(SIZES))
    strategy = context.strategy
    check = SelfCheck.of(state, strategy, progress_bound(strategy.arrivals_per_round, strategy.initial_clients))
    buffer: list[tuple[Job, LocalResult]] = []

    return scenario(Dispatcher(context, state, buffer, check, EventQueue(state.now)))


def test_a_request_dispatches_distinct_idle_clients_and_schedules_their_arrivals():
    def scenario(dispatcher):
        dispatcher.request(3)
        jobs = list(dispatcher.state.outstanding.values())
        arrivals = [dispatcher.events.next() for _ in jobs]
        return dispatcher, jobs, arrivals

    dispatcher, jobs, arrivals = dispatched({"clients_per_round": 3}, scenario)
    clients = sorted(job.client for job in jobs)
    assert len(set(clients)) == 3 and dispatcher.in_flight == {c: 1 for c in clients}
    # every client at speed 1 with 4 samples: 4 × 0.01 s of compute + 1 s of latency, all at once
    assert [event.time for event in arrivals] == [1.04] * 3
    assert [event.order[0] for event in arrivals] == clients  # equal times: by client
    assert set(dispatcher.picker.candidates()) == set(range(len(SIZES))) - set(clients)
    assert dispatcher.picker.excluded().tolist() == clients


def test_a_synchronous_round_never_draws_a_client_that_has_reported_in_it():
    def scenario(dispatcher):
        dispatcher.request(2)
        first = min(dispatcher.state.outstanding.values(), key=lambda job: job.key)
        dispatcher.arrived(first)
        dispatcher.buffer.append((first, None))  # reported: in the round's buffer
        return first, dispatcher.picker.candidates()

    first, candidates = dispatched({"algorithm": "sync", "clients_per_round": 2}, scenario)
    assert first.client not in candidates
    afl_first, afl_candidates = dispatched({"algorithm": "afl", "clients_per_round": 2}, scenario)
    assert afl_first.client in afl_candidates  # an asynchronous client is free again once it reports


def test_with_replacement_every_client_is_a_candidate_even_in_flight():
    def scenario(dispatcher):
        dispatcher.request(3)
        return dispatcher.picker.candidates()

    assert list(dispatched({"clients_per_round": 3, "replacement": True}, scenario)) == list(range(len(SIZES)))


def test_dispatches_that_find_no_online_client_wait_and_the_loop_wakes_when_one_comes_online(tmp_path):
    rows = ["0,5.0,100.0", "1,7.0,100.0"]  # nobody online before 5 s

    def scenario(dispatcher):
        dispatcher.request(2)
        waiting = dispatcher.state.waiting
        wake = dispatcher.events.next()
        dispatcher.on_wake(wake)
        return waiting, wake, dict(dispatcher.state.outstanding), dispatcher.state.waiting

    waiting, wake, outstanding, still_waiting = dispatched({"clients_per_round": 2}, scenario, rows, tmp_path)
    assert waiting == 2
    assert (wake.time, wake.kind) == (5.0, Kind.WAKE)
    assert [job.client for job in outstanding.values()] == [0] and still_waiting == 1


def test_withdraw_frees_every_client_out_and_forgets_what_waits():
    def scenario(dispatcher):
        dispatcher.request(2)
        dispatcher.state.waiting = 1
        jobs = dispatcher.withdraw()
        return jobs, dispatcher

    jobs, dispatcher = dispatched({"clients_per_round": 2}, scenario)
    assert len(jobs) == 2 and not dispatcher.state.outstanding and dispatcher.state.waiting == 0
    assert not dispatcher.in_flight


def test_a_round_with_a_deadline_schedules_it_after_its_dispatches():
    def scenario(dispatcher):
        dispatcher.start_round(2)
        events = [dispatcher.events.next() for _ in range(3)]
        return events, dispatcher.state.deadline_at

    events, deadline_at = dispatched({"algorithm": "sync", "clients_per_round": 2, "round_deadline": 2.5}, scenario)
    assert deadline_at == 2.5
    assert [(event.time, event.kind) for event in events] == [
        (1.04, Kind.ARRIVAL),
        (1.04, Kind.ARRIVAL),
        (2.5, Kind.DEADLINE),
    ]


def test_open_arrivals_send_no_replacements():
    def scenario(dispatcher):
        return dispatcher.closed_loop(3)

    assert dispatched({"clients_per_round": 2}, scenario) == 3
    assert dispatched({"clients_per_round": 2, "arrivals": "poisson", "checkin_rate": 1.0}, scenario) == 0


def test_a_run_no_client_will_ever_join_ends_in_one_line():
    with pytest.raises(InputError, match=r"^no client is online after virtual time 3\.5 .*max_virtual_time") as error:
        no_client_online(3.5, 10, 10)
    assert "\n" not in str(error.value)


def test_a_round_that_may_draw_only_some_clients_says_so():
    """A synchronous round that waits for clients it may still draw, while those that reported are
    online: once told "no client is online", which the trace contradicted."""
    with pytest.raises(InputError, match=r"^none of the 3 of 10 clients the run may still draw .* not yet reported"):
        no_client_online(3.5, 3, 10)


def test_events_at_one_time_are_served_wake_check_in_arrival_deadline():
    job = Job(2, 0, 0, 0.0, 1.0, (0.1,))
    events = [Event(1.0, Kind.DEADLINE), Event.arrival(job), Event(1.0, Kind.CHECK_IN, (4,)), Event(1.0, Kind.WAKE)]
    assert [event.kind for event in sorted(events)] == [Kind.WAKE, Kind.CHECK_IN, Kind.ARRIVAL, Kind.DEADLINE]


def test_open_slots_wait_for_the_redistribution_threshold_then_fill_at_once():
    def scenario(dispatcher):
        made = [dispatcher.closed_loop(1) for _ in range(7)]
        return made, dispatcher.state.held

    made, held = dispatched({"algorithm": "fedbuff", "concurrency": 4, "redistribution_threshold": 3}, scenario)
    assert made == [0, 0, 3, 0, 0, 3, 0] and held == 1
    assert dispatched({"algorithm": "fedbuff", "concurrency": 4}, scenario)[0] == [1] * 7  # O = 1: today's loop


def timing_events(tmp_path, **settings):
    from asyncfl.sim.engine import Simulation
    from engine_cases import read_csv

    config = make_config({**fixed_clients(0.5, 0.05), "trainer": "none", "rounds": 30, "jitter_distribution":
                          "exponential", **settings})  # fmt: skip
    Simulation(config, tiny_dataset(sum(SIZES)), contiguous_partition(SIZES), tmp_path).run()
    return read_csv(tmp_path / "events.csv")


def test_a_threshold_of_every_slot_makes_a_synchronous_cohort(tmp_path):
    """K = B = O: every dispatch of a cohort leaves at one time from one version, and nothing is stale."""
    events = timing_events(tmp_path, algorithm="fedbuff", concurrency=3, buffer_size=3, redistribution_threshold=3)
    by_round: dict[str, set] = {}
    for row in events:
        by_round.setdefault(row["round"], set()).add((row["dispatch_time"], row["dispatch_version"]))
    assert all(len(cohort) == 1 for cohort in by_round.values()) and len(by_round) == 30
    assert {row["staleness"] for row in events} == {"0"}


def test_a_threshold_dispatches_in_groups_of_at_least_o(tmp_path):
    events = timing_events(tmp_path, algorithm="fedasync", concurrency=4, redistribution_threshold=2)
    groups: dict[str, int] = {}
    for row in events:
        groups[row["dispatch_time"]] = groups.get(row["dispatch_time"], 0) + 1
    assert groups.pop("0.0") == 4 and set(groups.values()) <= {2, 3, 4} and 2 in groups.values()


def test_a_client_freed_after_training_is_drawn_again_while_its_upload_is_on_the_way(tmp_path):
    """Six clients, five in flight, uploads longer than the training: under `after_training` a client's
    next dispatch may leave before its last one arrives, never before that one's training ended."""
    world = {"download_seconds": "1:0.01", "upload_seconds": "1:2.0", "algorithm": "fedasync", "concurrency": 5}
    for freed, overlaps in (("at_arrival", False), ("after_training", True)):
        events = timing_events(tmp_path / freed, client_freed=freed, **world)
        by_client: dict[str, list] = {}
        for row in sorted(events, key=lambda row: float(row["dispatch_time"])):
            by_client.setdefault(row["client"], []).append(row)
        seen = False
        for rows in by_client.values():
            for before, after in zip(rows, rows[1:], strict=False):
                trained = float(before["dispatch_time"]) + float(before["download_seconds"]) + float(
                    before["compute_seconds"])  # fmt: skip
                assert float(after["dispatch_time"]) >= trained - 1e-12
                seen |= float(after["dispatch_time"]) < float(before["arrival_time"])
        assert seen == overlaps


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"algorithm": "fedbuff", "concurrency": 4, "redistribution_threshold": 5}, "redistribution_threshold .O. = 5 "
         "exceeds the 4 slots of concurrency"),
        ({"algorithm": "fedbuff", "redistribution_threshold": 0}, "redistribution_threshold must be"),
        ({"algorithm": "sync", "redistribution_threshold": 2}, "redistribution_threshold does not apply to algorithm"),
    ],
)  # fmt: skip
def test_a_threshold_outside_one_to_m_is_one_line(settings, message):
    with pytest.raises(InputError, match=message) as raised:
        make_config(settings)
    assert len(str(raised.value).splitlines()) == 1


def test_fedbuff_at_k_b_o_all_m_times_as_sync_at_j_m(tmp_path):
    """NVFlare's FedAvg is its scheduler at K = B = O: asyncfl's sync round at J = M makes the very cohorts."""
    cohort = timing_events(tmp_path / "fedbuff", algorithm="fedbuff", concurrency=4, buffer_size=4,
                           redistribution_threshold=4)  # fmt: skip
    sync = timing_events(tmp_path / "sync", algorithm="sync", clients_per_round=4)
    columns = ("round", "client", "dispatch_version", "dispatch_time", "arrival_time", "staleness")
    assert [[row[c] for c in columns] for row in cohort] == [[row[c] for c in columns] for row in sync]
