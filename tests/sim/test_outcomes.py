"""Stragglers: synchronous over-selection and deadlines, the asynchronous staleness cap, and the
accounting of every dispatch that never joins the model (docs/design.md "Stragglers")."""

import hashlib
from collections import defaultdict
from pathlib import Path

import pytest

from asyncfl.settings.config import make_config
from asyncfl.settings.errors import InputError
from asyncfl.sim import rounds
from asyncfl.sim.engine import Simulation
from engine_cases import contiguous_partition, fixed_clients, read_csv, recorded_simulation, tiny_dataset

SIZES = [4, 8, 12, 16, 20, 24]
# Hand-computable durations: one epoch of n samples at 0.01 s each, plus a constant 1 s latency
FIXED = {**fixed_clients(latency=1.0, seconds_per_sample=0.01), "batch_size": 4}


def simulate(out: Path, sizes=SIZES, **settings) -> Simulation:
    simulation = Simulation(
        make_config({**FIXED, **settings}), tiny_dataset(sum(sizes)), contiguous_partition(sizes), out
    )
    simulation.run()
    return simulation


def by_round(events: list[dict]) -> dict[int, list[dict]]:
    rounds = defaultdict(list)
    for row in events:
        rounds[int(row["round"])].append(row)
    return rounds


def test_over_selection_aggregates_exactly_the_first_j_arrivals(tmp_path):
    """J = 2, ε = 0.5: three clients a round, the two that arrive first aggregated, the third discarded."""
    simulate(tmp_path, algorithm="sync", clients_per_round=2, over_selection=0.5, rounds=8)
    events, metrics = read_csv(tmp_path / "events.csv"), read_csv(tmp_path / "metrics.csv")
    for round_, rows in by_round(events).items():
        for row in rows:  # hand-computed: n·0.01 + 1
            size = int(row["n_samples"])
            assert float(row["arrival_time"]) - float(row["dispatch_time"]) == pytest.approx(size * 0.01 + 1.0)
        arrived = sorted(rows, key=lambda row: (float(row["arrival_time"]), int(row["client"])))
        assert len(rows) == 3 and [row["lost"] for row in arrived] == ["", "", "discarded"], round_
        assert float(metrics[round_ - 1]["virtual_time"]) == float(arrived[1]["arrival_time"])
    assert [int(row["dispatched_total"]) for row in metrics] == [3 * r for r in range(1, 9)]
    assert all(row["discarded"] == "1" for row in metrics)


DEADLINE = dict(algorithm="sync", clients_per_round=2, round_deadline=1.09, min_report_fraction=1.0)


def test_a_deadline_round_aggregates_those_in_time_and_an_abandoned_round_changes_nothing(tmp_path, monkeypatch):
    """Only clients 0 and 1 (1.04 s, 1.08 s) beat the 1.09 s deadline, and a round needs both: a round
    that drew another pair (14 of the 15) is abandoned, costs the deadline and leaves the global model as it
    was."""
    abandoned = []
    real = Simulation.on_deadline

    def watched(self, event, logs):
        before = (self.state.version, digest(self.state.global_model), self.unaggregated.abandoned_rounds)
        over = real(self, event, logs)
        if self.unaggregated.abandoned_rounds > before[2]:
            abandoned.append((before[:2], (self.state.version, digest(self.state.global_model))))
        return over

    monkeypatch.setattr(Simulation, "on_deadline", watched)
    simulate(tmp_path, **DEADLINE, rounds=2)
    events, metrics = read_csv(tmp_path / "events.csv"), read_csv(tmp_path / "metrics.csv")
    assert len(abandoned) == sum(int(row["abandoned"]) for row in metrics) > 0
    assert all(before == after for before, after in abandoned)
    aggregated = [row for row in events if not row["lost"]]
    assert {row["client"] for row in aggregated} == {"0", "1"} and len(aggregated) == 4
    assert all(float(row["arrival_time"]) <= float(row["dispatch_time"]) + 1.09 for row in aggregated)
    starts = {round(float(row["dispatch_time"]), 9) for row in events}
    abandoned_starts = {round(float(row["dispatch_time"]), 9) for row in events if row["lost"] == "abandoned"}
    assert all(round(start + 1.09, 9) in starts for start in abandoned_starts)  # it cost the deadline


def digest(state) -> str:
    return hashlib.sha256(b"".join(tensor.numpy().tobytes() for tensor in state.values())).hexdigest()


def test_a_deadline_with_fewer_reports_aggregates_what_arrived(tmp_path):
    """min_report_fraction 0.5 of J = 2: a round with one client in time aggregates it alone at the deadline."""
    simulate(tmp_path, **{**DEADLINE, "min_report_fraction": 0.5}, rounds=6)
    metrics, events = read_csv(tmp_path / "metrics.csv"), read_csv(tmp_path / "events.csv")
    for round_, attempts in by_round(events).items():
        rows = [row for row in attempts if row["lost"] != "abandoned"]  # the round's last attempt
        taken = [row for row in rows if not row["lost"]]
        assert 1 <= len(taken) <= 2 and all(float(r["arrival_time"]) <= float(r["dispatch_time"]) + 1.09 for r in taken)
        late = [row for row in rows if row["lost"] == "discarded"]
        assert all(float(r["arrival_time"]) > float(r["dispatch_time"]) + 1.09 for r in late)
        if late:
            assert float(metrics[round_ - 1]["virtual_time"]) == pytest.approx(float(rows[0]["dispatch_time"]) + 1.09)


def test_discarded_clients_are_never_trained_and_the_results_are_those_of_training_them(tmp_path, monkeypatch):
    settings = dict(FIXED, algorithm="sync", clients_per_round=2, over_selection=1.0, rounds=5)
    skipping, recording = recorded_simulation(tmp_path / "skip", SIZES, **settings)
    skipping.run()
    monkeypatch.setattr(rounds, "will_be_discarded", lambda *args: False)
    training, everything = recorded_simulation(tmp_path / "all", SIZES, **settings)
    training.run()
    trained = sum(len(call) for call in recording.calls)
    events = read_csv(tmp_path / "skip" / "events.csv")
    assert trained == sum(not row["lost"] for row in events) < sum(len(call) for call in everything.calls)
    for name in ("metrics.csv", "events.csv", "model.pt"):
        assert (tmp_path / "skip" / name).read_bytes() == (tmp_path / "all" / name).read_bytes(), name


def test_staleness_cap_drops_are_counted_and_never_aggregated(tmp_path):
    simulate(tmp_path, algorithm="fedasync", clients_per_round=1, concurrency=5, max_staleness=2, rounds=40)
    events, metrics = read_csv(tmp_path / "events.csv"), read_csv(tmp_path / "metrics.csv")
    rejected = [row for row in events if row["lost"] == "rejected"]
    assert rejected and all(int(row["staleness"]) > 2 and row["coefficient"] == "" for row in rejected)
    assert all(int(row["staleness"]) <= 2 for row in events if not row["lost"])
    assert sum(int(row["rejected"]) for row in metrics) == len(rejected)


def test_a_cap_that_starves_a_slow_client_is_warned_of(tmp_path, capsys):
    """Without latency client 5 (24 samples) takes 6× as long as client 0, and five others are in flight meanwhile."""
    simulate(
        tmp_path,
        algorithm="fedasync",
        clients_per_round=1,
        concurrency=6,
        max_staleness=2,
        rounds=60,
        latency_median=0.0,
    )
    warning = capsys.readouterr().err
    assert "warning: client(s) " in warning and "5 had every update rejected" in warning
    assert "max_staleness = 2" in warning and "client(s) 0" not in warning


def test_kept_stale_updates_are_aggregated_and_counted(tmp_path):
    simulate(
        tmp_path, algorithm="afl", clients_per_round=2, concurrency=5, max_staleness=1, stale_updates="keep", rounds=10
    )
    events, metrics = read_csv(tmp_path / "events.csv"), read_csv(tmp_path / "metrics.csv")
    over = sum(int(row["staleness"]) > 1 for row in events)
    assert over > 0 and sum(int(row["over_cap_kept"]) for row in metrics) == over and "lost" not in events[0]


WORLD = dict(availability="exponential", online_mean=3.0, offline_mean=1.0, failure_probability=0.1)


@pytest.mark.parametrize(
    "settings",
    [
        dict(algorithm="sync", clients_per_round=2, over_selection=0.5, round_deadline=1.2, **WORLD),
        dict(algorithm="afl", clients_per_round=2, concurrency=4, max_staleness=1, **WORLD),
        dict(algorithm="fedbuff", clients_per_round=2, concurrency=4, max_staleness=1),
    ],
    ids=["sync", "afl", "fedbuff"],
)
def test_the_work_budget_adds_up_and_stops_the_run(tmp_path, settings):
    """dispatched = aggregated + discarded + dropped + rejected + in flight, round by round; max_dispatches
    ends the run at its first aggregation at or past the budget."""
    simulation = simulate(tmp_path, **settings, rounds=1000, max_dispatches=40)
    events, metrics = read_csv(tmp_path / "events.csv"), read_csv(tmp_path / "metrics.csv")
    ended = [row for row in events if int(row["round"]) <= len(metrics)]
    in_flight = len(simulation.state.outstanding)
    assert int(metrics[-1]["dispatched_total"]) == len(ended) + in_flight == simulation.state.dispatched
    columns = [c for c in ("dropped", "discarded", "rejected") if c in metrics[0]]
    set_aside = sum(int(row[c]) for row in metrics for c in columns)
    assert set_aside == sum(bool(row["lost"]) for row in ended) > 0
    assert int(metrics[-1]["dispatched_total"]) >= 40 > int(metrics[-2]["dispatched_total"])
    assert read_csv(tmp_path / "events.csv") and simulation.stop_reason == "max_dispatches"


def test_a_deadline_run_killed_mid_way_resumes_to_the_same_bytes(tmp_path):
    settings = dict(FIXED, **DEADLINE, over_selection=1.0, rounds=8, checkpoint_every=2)
    settings["min_report_fraction"] = 0.5
    whole, straight = recorded_simulation(tmp_path / "whole", SIZES, **settings)
    whole.run()
    crashed, _ = recorded_simulation(tmp_path / "resumed", SIZES, fail_on_call=6, **settings)
    with pytest.raises(RuntimeError, match="injected crash"):
        crashed.run()
    resumed, recording = recorded_simulation(tmp_path / "resumed", SIZES, **settings)
    resumed.run()
    assert 0 < len(recording.calls) < len(straight.calls)  # it resumed from a checkpoint
    for name in ("metrics.csv", "events.csv", "model.pt"):
        assert (tmp_path / "resumed" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes(), name


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"algorithm": "sync", "over_selection": 1.0}, "over_selection = 1.0 asks for 10 clients"),
        ({"algorithm": "sync", "round_deadline": 1.03}, "round_deadline = 1.03 virtual seconds is shorter"),
        ({"algorithm": "afl", "max_staleness": 0}, "max_staleness must be a finite number > 0"),
        ({"algorithm": "sync", "min_report_fraction": 0.5}, "min_report_fraction applies only with round_deadline"),
        ({"algorithm": "afl", "stale_updates": "keep"}, "stale_updates applies only with max_staleness"),
        ({"algorithm": "afl", "over_selection": 0.3}, "over_selection does not apply to algorithm afl"),
        ({"algorithm": "sync", "max_staleness": 3}, "max_staleness does not apply to algorithm sync"),
        ({"algorithm": "sync", "stale_updates": "clip"}, "stale_updates must be one of drop, keep"),
        ({"algorithm": "sync", "max_dispatches": 0}, "max_dispatches must be a finite number > 0"),
    ],
)
def test_bad_straggler_settings_are_one_line(tmp_path, settings, message):
    with pytest.raises(InputError, match=message) as raised:
        simulate(tmp_path, **{"clients_per_round": 5, **settings})
    assert len(str(raised.value).splitlines()) == 1
