"""Little's law on the engine: with M updates always in flight and a new global version every K
arrivals, every arrival finds the M − 1 others in flight, so an update sees M − 1 arrivals during its
flight on average, and its staleness τ (versions made meanwhile) averages (M − 1)/K — whatever the
durations (here lognormal speeds and per-dispatch lognormal jitter, and the `queueing` population:
exponential dispatches around three classes of clients' means). A check that the clock, the dispatches and
the versions count what they claim, on any algorithm that keeps M in flight."""

import csv

import pytest

from asyncfl.bench.synthetic import engine_data, synthetic_run

ARRIVALS = 2000


LOGNORMAL = {"jitter_sigma": 0.5}
QUEUEING = {"population": "queueing"}


@pytest.mark.parametrize(
    ("algorithm", "in_flight", "per_version", "world"),
    [
        ("fedbuff", 10, 3, LOGNORMAL),
        ("fedasync", 8, 1, LOGNORMAL),
        ("afl", 10, 5, LOGNORMAL),
        ("fedbuff", 10, 3, QUEUEING),
        ("afl", 6, 2, QUEUEING),
    ],
)
def test_mean_staleness_is_in_flight_minus_one_over_arrivals_per_version(
    tmp_path, algorithm, in_flight, per_version, world
):
    settings = {
        **world,
        "algorithm": algorithm,
        "clients_per_round": per_version if algorithm == "afl" else 5,  # AFL aggregates every J arrivals
        "concurrency": in_flight,
        "rounds": ARRIVALS // per_version,
        "local_epochs": 1,
        "device": "cpu",
        "trainer": "none",  # timing-only: the engine's clock is what is tested
    }
    if algorithm == "fedbuff":
        settings["buffer_size"] = per_version
    synthetic_run(*engine_data(100), settings, tmp_path)
    rows = list(csv.DictReader((tmp_path / "events.csv").open()))
    assert len(rows) == ARRIVALS - ARRIVALS % per_version
    steady = [int(row["staleness"]) for row in rows[len(rows) // 10 :]]  # past the start, where fewer came before
    assert sum(steady) / len(steady) == pytest.approx((in_flight - 1) / per_version, rel=0.03)
