"""The clients' world: availability periods and traces, lost dispatches, Poisson check-ins."""

import csv
from pathlib import Path

import numpy as np
import pytest

from asyncfl.settings.config import make_config
from asyncfl.settings.errors import InputError
from asyncfl.settings.traces import read_trace
from asyncfl.sim.arrivals import CheckIns
from asyncfl.sim.availability import Availability
from asyncfl.sim.engine import Simulation
from engine_cases import contiguous_partition, fixed_clients, tiny_dataset

SIZES = [4, 8, 12, 8, 6]
BASE = {"clients_per_round": 2, "rounds": 10, "local_epochs": 1, "batch_size": 4, "seconds_per_sample": 0.05}
PERIODS = {"availability": "exponential", "online_mean": 2.0, "offline_mean": 1.0}


def run(out: Path, **settings) -> tuple[list[dict], list[dict], Simulation]:
    sim = Simulation(make_config({**BASE, **settings}), tiny_dataset(sum(SIZES)), contiguous_partition(SIZES), out)
    sim.run()
    with open(out / "metrics.csv") as metrics, open(out / "events.csv") as events:
        return list(csv.DictReader(metrics)), list(csv.DictReader(events)), sim


def test_periods_do_not_depend_on_the_order_they_are_asked_for():
    """A client's periods are drawn in fixed chunks from its own stream: asking far ahead first, or
    step by step, gives the same periods (a resumed run sees the world an uninterrupted one saw)."""
    config = make_config({**BASE, **PERIODS, "availability": "lognormal"})
    far, near = Availability.of(config, 3), Availability.of(config, 3)
    assert far is not None and near is not None
    far.is_online(1, 5000.0)
    answers = [(near.is_online(1, t), near.online_until(1, t)) for t in np.arange(0.0, 5000.0, 0.7)]
    assert answers == [(far.is_online(1, t), far.online_until(1, t)) for t in np.arange(0.0, 5000.0, 0.7)]
    assert near.flips_until(1, 5000.0) == far.flips_until(1, 5000.0)


@pytest.mark.parametrize("model", ["exponential", "trace"])
def test_many_clients_at_once_agree_with_one_at_a_time(model):
    """The engine asks about every idle client at once, from periods it remembers: the answers are
    those of the search, for times in any order (a figure or a test may go back in time)."""
    if model == "trace":
        spans = {c: [(float(c), 3.0 + c), (5.0 + c, 9.0 + 2 * c)] for c in range(6)}
        many, one = Availability.from_trace(spans), Availability.from_trace(spans)
    else:
        config = make_config({**BASE, **PERIODS, "seed": 5})
        many, one = Availability.of(config, 6), Availability.of(config, 6)
    assert many is not None and one is not None
    clients = np.array([5, 0, 3, 1, 4, 2, 3])
    times = np.concatenate([np.arange(0.0, 30.0, 0.25), np.random.default_rng(0).uniform(0.0, 40.0, 200)])
    for t in times:
        expected = [one.is_online(int(c), t) for c in clients]
        assert many.online_mask(clients, t).tolist() == expected, t
        comes = min(t if one.is_online(int(c), t) else one.online_until(int(c), t) for c in clients)
        assert many.first_online(clients, t) == comes, t


def test_a_client_is_online_about_its_share_of_the_time():
    config = make_config({**BASE, **PERIODS, "seed": 3})
    availability = Availability.of(config, 4)
    assert availability is not None
    times = np.arange(0.0, 20000.0, 0.5)
    for client in range(4):
        share = np.mean([availability.is_online(client, t) for t in times])
        assert share == pytest.approx(2.0 / 3.0, abs=0.03)  # online_mean / (online_mean + offline_mean)


@pytest.mark.parametrize("algorithm", ["afl", "sync", "fedbuff"])
def test_lost_dispatches_are_logged_and_never_aggregated(tmp_path, algorithm):
    metrics, events, sim = run(tmp_path, algorithm=algorithm, failure_probability=0.2, **PERIODS)
    lost = [e for e in events if e["lost"]]
    assert {e["lost"] for e in lost} == {"offline", "failed"}
    assert all(e["coefficient"] == "" and e["staleness"] == "" and e["train_loss"] == "" for e in lost)
    assert sum(int(m["dropped"]) for m in metrics) == len(lost) == sim.state.dropped
    for event in lost:  # an offline loss ends before the dispatch would have arrived, a failure at it
        client, dispatched = int(event["client"]), float(event["dispatch_time"])
        availability = sim.context.world.availability
        assert availability is not None and availability.is_online(client, dispatched)
        if event["lost"] == "offline":
            assert float(event["arrival_time"]) == availability.online_until(client, dispatched)
    aggregated = [e for e in events if not e["lost"]]
    assert len(aggregated) == sum(sim.strategy.arrivals_per_round for _ in metrics)
    assert int(sim.state.dispatch_counts.sum()) == len(aggregated) + len(lost) + len(sim.state.outstanding)


def test_a_trace_decides_who_is_online(tmp_path):
    trace = tmp_path / "trace.csv"
    trace.write_text("client,start,end\n0,0,40\n1,0,3\n1,5,40\n2,10,40\n3,0,40\n4,0,40\n")
    _, events, _ = run(tmp_path / "run", availability="trace", availability_trace=str(trace), rounds=20)
    spans = {0: [(0, 40)], 1: [(0, 3), (5, 40)], 2: [(10, 40)], 3: [(0, 40)], 4: [(0, 40)]}
    for event in events:
        dispatched = float(event["dispatch_time"])
        assert any(start <= dispatched < end for start, end in spans[int(event["client"])]), event
    assert any(int(e["client"]) == 2 for e in events)  # client 2 is used once it comes online


@pytest.mark.parametrize("algorithm", ["sync", "sync_as_coded"])
def test_a_synchronous_round_never_aggregates_a_client_twice(tmp_path, algorithm):
    """Without replacement a round's clients are distinct: a lost dispatch's replacement goes to a
    client that has not reported in the round (it used to go to any idle one, which trained again from
    the same model and was weighted twice: 4 of 10 rounds of the quick pipeline's digits_world)."""
    settings = {**PERIODS, "online_mean": 1.0, "failure_probability": 0.3, "rounds": 40, "clients_per_round": 3}
    _, events, sim = run(tmp_path, algorithm=algorithm, **settings)
    assert sim.state.dropped >= 20  # many replacements were drawn
    aggregated: dict[str, list[int]] = {}
    for event in events:
        if not event["lost"]:
            aggregated.setdefault(event["round"], []).append(int(event["client"]))
    assert len(aggregated) == 40
    assert all(len(set(clients)) == len(clients) == 3 for clients in aggregated.values()), aggregated


def test_a_client_offline_during_its_latency_has_delivered_its_update(tmp_path):
    """A dispatch is lost only when its client goes offline before the upload ends; the latency comes
    after it. Client 0 (4 samples: 0.2 s of compute, then 1 s of latency) goes offline at 0.5 s on its
    first dispatch (delivered at 1.2 s), and at 0.1 s on its second (lost then)."""
    trace = tmp_path / "trace.csv"
    trace.write_text("client,start,end\n0,0,0.5\n0,1.2,1.3\n" + "".join(f"{c},0,100\n" for c in (1, 2, 3, 4)))
    settings = {**fixed_clients(1.0, 0.05), "concurrency": 5, "clients_per_round": 1, "rounds": 12}
    _, events, _ = run(tmp_path / "run", availability="trace", availability_trace=str(trace), **settings)
    first, second = [e for e in events if e["client"] == "0"][:2]
    assert (float(first["dispatch_time"]), float(first["arrival_time"]), first["lost"]) == (0.0, 1.2, "")
    assert (float(second["dispatch_time"]), float(second["arrival_time"]), second["lost"]) == (1.2, 1.3, "offline")


def test_a_trace_that_ends_stops_the_run_in_one_line(tmp_path):
    trace = tmp_path / "trace.csv"
    trace.write_text("client,start,end\n0,0,1.5\n1,0,1.5\n")
    with pytest.raises(InputError, match="no client is online after virtual time") as raised:
        run(tmp_path / "run", availability="trace", availability_trace=str(trace), rounds=50)
    assert len(str(raised.value).splitlines()) == 1 and not (tmp_path / "run" / "run.json").exists()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("client,begin,end\n0,0,1\n", "the first line must be the header client,start,end"),
        ("client,start,end\n0,zero,1\n", "line 2: '0,zero,1' is not an integer client and two numbers"),
        ("client,start,end\n7,0,1\n", "line 2: client 7 is not one of the run's clients 0..4"),
        ("client,start,end\n0,2,1\n", "line 2: an online period needs 0 <= start < end"),
        ("client,start,end\n0,0,inf\n", "line 2: an online period needs 0 <= start < end, finite"),
        ("client,start,end\n0,0,2\n0,1,3\n", "client 0's online periods overlap or touch at 1.0"),
        ("client,start,end\n", "has no online period"),
        ("client,start,end\n0,0,1,7\n", "line 2: '0,0,1,7' has 4 fields; the header client,start,end has 3"),
        ("client,start,end\n0,0,1\n1,2,3,\n", "line 3: '1,2,3,' has 4 fields"),
    ],
)
def test_a_bad_trace_is_one_line_naming_the_row(tmp_path, text, message):
    trace = tmp_path / "trace.csv"
    trace.write_text(text)
    with pytest.raises(InputError, match=message) as raised:
        read_trace(trace, 5)
    assert len(str(raised.value).splitlines()) == 1


def test_poisson_check_ins_dispatch_only_at_check_ins_and_never_past_m(tmp_path):
    settings = {"algorithm": "fedasync", "arrivals": "poisson", "checkin_rate": 3.0, "concurrency": 2, "rounds": 15}
    _, events, sim = run(tmp_path, **settings)
    check_ins = CheckIns(0, 3.0)
    times = {check_ins.time(k) for k in range(sim.state.checkins)}
    assert all(float(e["dispatch_time"]) in times for e in events)
    assert sim.check.max_in_flight == 2  # checked at every dispatch
    dispatched = sorted(float(e["dispatch_time"]) for e in events)
    assert len(set(dispatched)) == len(dispatched)  # one client per check-in


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"algorithm": "sync", "arrivals": "poisson", "checkin_rate": 1.0},
            "arrivals does not apply to algorithm sync",
        ),
        ({"arrivals": "poisson"}, "arrivals: poisson needs checkin_rate"),
        ({"checkin_rate": 1.0}, "checkin_rate is read only with arrivals: poisson"),
        ({"availability": "trace"}, "availability: trace needs availability_trace"),
        ({"availability_trace": "t.csv"}, "availability_trace is read only with availability: trace"),
        ({"failure_probability": 1.0}, "failure_probability must be ≤ 0.99"),
        ({"online_mean": 0}, "online_mean must be a finite number > 0"),
    ],
)
def test_bad_world_settings_are_one_line(settings, message):
    with pytest.raises(InputError, match=message):
        make_config(settings)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"online_mean": 0.05, "offline_mean": 1.0}, r"online_mean = 0.05 s beside offline_mean = 1.0 s.*raise"),
        ({"online_mean": 1e-3, "offline_mean": 1e9}, r"online_mean = 0.001 s beside offline_mean = 1000000000.0 s"),
        (
            {"online_mean": 1e-3, "offline_mean": 1.0, "max_dispatches": 20},
            r"\(max_dispatches = 20 ends a run only at an aggregation\)",
        ),
    ],
)
def test_online_periods_shorter_than_a_dispatch_end_the_run_in_one_line(tmp_path, settings, message):
    """Every dispatch lost (a client online for 0.05 s, a dispatch of 0.2–0.6 s of compute and ~1 s of
    latency): the run used to go on for ever, events.csv growing by thousands of rows a second."""
    with pytest.raises(InputError, match=f"the last 1000 dispatches were all lost.*{message}") as raised:
        run(tmp_path, **{**PERIODS, **settings})
    assert len(str(raised.value).splitlines()) == 1 and not (tmp_path / "run.json").exists()


def test_poisson_check_ins_with_a_trace_that_ends_stop_in_one_line(tmp_path):
    trace = tmp_path / "trace.csv"
    trace.write_text("client,start,end\n0,0,1.5\n1,0,1.5\n")
    settings = {"algorithm": "fedasync", "arrivals": "poisson", "checkin_rate": 3.0, "rounds": 50}
    with pytest.raises(InputError, match="no client is online after virtual time") as raised:
        run(tmp_path / "run", availability="trace", availability_trace=str(trace), **settings)
    assert len(str(raised.value).splitlines()) == 1


def test_skipping_turned_away_check_ins_finds_the_check_in_one_by_one_would():
    """`first_after` is the first check-in after `after` or at or after `at`, as a walk would find it,
    across chunks, and from any starting index."""
    walk, skip = CheckIns(4, 50.0), CheckIns(4, 50.0)
    times = [walk.time(k) for k in range(5000)]
    start = 0
    for after, at in [(0.5, np.inf), (0.5, 0.5), (3.0, 2.0), (np.inf, 40.0), (times[700], np.inf), (60.0, times[3100])]:
        expected = next(k for k in range(start, 5000) if times[k] > after or times[k] >= at)
        assert skip.first_after(start, after, at) == expected
        assert skip.time(expected) == times[expected]
        start = expected


def test_a_high_check_in_rate_runs_and_one_past_the_bound_is_refused(tmp_path):
    settings = {"algorithm": "fedasync", "arrivals": "poisson", "concurrency": 2, "rounds": 6}
    _, events, sim = run(tmp_path, **settings, checkin_rate=1e4)
    assert sim.state.checkins > 10_000 and len(events) == 6  # tens of thousands turned away, skipped over
    with pytest.raises(InputError, match="checkin_rate must be ≤ 10000"):
        make_config({**settings, "checkin_rate": 1e6})


def test_poisson_check_ins_whose_dispatches_never_fit_the_trace_end_in_one_line(tmp_path):
    """Every client online 0.05 s in each second: every dispatch (0.2–0.6 s of compute) is lost."""
    trace = tmp_path / "trace.csv"
    trace.write_text("client,start,end\n" + "".join(f"{c},{t},{t + 0.05}\n" for c in range(5) for t in range(1000)))
    settings = {"algorithm": "fedasync", "arrivals": "poisson", "checkin_rate": 50.0, "rounds": 5}
    with pytest.raises(InputError, match="the last 1000 dispatches were all lost: 1000 of them .* availability_trace"):
        run(tmp_path / "run", availability="trace", availability_trace=str(trace), **settings)
