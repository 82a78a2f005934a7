"""The engine checks itself while it runs: each invariant stops a deliberately broken engine with one
line naming it and the event, and nothing is written as finished. A healthy run passes every check."""

import dataclasses
from pathlib import Path

import pytest

from asyncfl.fl.algorithms.afl import AFL
from asyncfl.fl.algorithms.fedbuff import FedBuff
from asyncfl.settings.config import make_config
from asyncfl.sim import dispatcher, outcomes
from asyncfl.sim.dispatcher import Dispatcher
from asyncfl.sim.engine import Simulation
from asyncfl.sim.invariants import InvariantViolated
from asyncfl.sim.open_round import OpenRound
from asyncfl.sim.state import Job, SimulationState
from asyncfl.sim.world import OFFLINE, World
from engine_cases import contiguous_partition, tiny_dataset

SIZES = [4, 8, 12, 8]
SETTINGS = {"clients_per_round": 2, "rounds": 4, "local_epochs": 1, "batch_size": 4}


def simulation(out: Path, **settings) -> Simulation:
    config = make_config({**SETTINGS, **settings})
    return Simulation(config, tiny_dataset(sum(SIZES)), contiguous_partition(SIZES), out)


def fails(sim: Simulation, out: Path, invariant: str) -> None:
    with pytest.raises(InvariantViolated, match=invariant) as raised:
        sim.run()
    assert len(str(raised.value).splitlines()) == 1 and "self-check failed" in str(raised.value)
    assert not (out / "run.json").exists() and not (out / "model.pt").exists()


@pytest.mark.parametrize("algorithm", ["afl", "sync", "fedasync", "fedbuff", "afl_as_coded"])
def test_a_healthy_run_passes_every_check(tmp_path, algorithm):
    sim = simulation(tmp_path, algorithm=algorithm, bandwidth_median=1.0)
    sim.run()
    assert sim.check.version == 4 and sim.check.dispatched == sim.check.aggregated + len(sim.state.outstanding)


WORLD = {"availability": "exponential", "online_mean": 2.0, "offline_mean": 1.0, "failure_probability": 0.2}


@pytest.mark.parametrize("algorithm", ["afl", "sync", "fedasync", "fedbuff"])
def test_a_healthy_run_in_a_world_that_loses_dispatches_passes_every_check(tmp_path, algorithm):
    sim = simulation(tmp_path, algorithm=algorithm, bandwidth_median=1.0, rounds=8, **WORLD)
    sim.run()
    check = sim.check
    assert check.unaggregated == sim.state.dropped > 0  # the world did lose dispatches, and they were counted
    assert check.dispatched == check.aggregated + len(sim.state.outstanding) + check.unaggregated


def shifted_jobs(monkeypatch, shift) -> None:
    """A broken `next_job`: arrivals moved by `shift(job)` virtual seconds from what the phases give."""
    real = dispatcher.next_job

    def broken(context, state, client, updates, work=None) -> Job:
        job = real(context, state, client, updates, work)
        return dataclasses.replace(job, arrival_time=job.arrival_time + shift(job))

    monkeypatch.setattr(dispatcher, "next_job", broken)


def test_the_clock_never_goes_back(tmp_path, monkeypatch):
    shifted_jobs(monkeypatch, lambda job: -1e6 if job.dispatch_time > 0 else 0.0)
    fails(simulation(tmp_path), tmp_path, "the clock never goes back")


def test_arrival_is_dispatch_plus_its_phases(tmp_path, monkeypatch):
    shifted_jobs(monkeypatch, lambda job: 1e-3)
    fails(simulation(tmp_path), tmp_path, "arrival = dispatch \\+ its phases")


def test_every_phase_is_finite_and_not_negative(tmp_path):
    sim = simulation(tmp_path, latency_distribution="constant", latency_median=0.0)
    system = dataclasses.replace(sim.context.system, latency=sim.context.system.latency - 1e-4)  # −0.1 ms
    sim.context = dataclasses.replace(sim.context, system=system)
    fails(sim, tmp_path, "every phase finite and ≥ 0")


def test_no_more_than_m_in_flight(tmp_path, monkeypatch):
    monkeypatch.setattr(AFL, "clients_after_arrival", lambda self, aggregated: 2 if aggregated else 1)
    fails(simulation(tmp_path, clients_per_round=1, concurrency=2), tmp_path, "in flight ≤ M = 2")


def test_each_aggregation_adds_one_version(tmp_path, monkeypatch):
    real = SimulationState.advance

    def skips(self, new, own_models) -> None:
        real(self, new, own_models)
        self.version += 1

    monkeypatch.setattr(SimulationState, "advance", skips)
    fails(simulation(tmp_path), tmp_path, "version \\+ 1 per aggregation")


def test_coefficients_are_not_negative_and_a_convex_combination_sums_to_one(tmp_path, monkeypatch):
    real = AFL.aggregate
    monkeypatch.setattr(AFL, "aggregate", lambda self, old, updates: (real(self, old, updates)[0], [0.7, 0.7]))
    fails(simulation(tmp_path), tmp_path, "convex combination summing to at most 1")
    monkeypatch.setattr(FedBuff, "aggregate", lambda self, old, updates: (old, [-0.5] * len(updates)))
    fails(simulation(tmp_path / "fedbuff", algorithm="fedbuff"), tmp_path / "fedbuff", "finite and ≥ 0")


def test_every_dispatch_is_accounted_for(tmp_path, monkeypatch):
    """An engine that loses an outstanding job (it never arrives, nothing notices) is caught."""
    real = Dispatcher.dispatch

    def loses_one(self, client: int, work: tuple[int, float] | None = None) -> None:
        real(self, client, work)
        if self.check.dispatched == 3:
            lost = max(self.state.outstanding)
            del self.state.outstanding[lost]

    monkeypatch.setattr(Dispatcher, "dispatch", loses_one)
    fails(simulation(tmp_path), tmp_path, "every dispatch accounted for")


def test_only_online_clients_are_dispatched(tmp_path, monkeypatch):
    """A broken world that offers every idle client, offline or not, is caught at the first such dispatch."""
    monkeypatch.setattr(World, "online", lambda self, clients, t: clients)
    fails(simulation(tmp_path, **WORLD), tmp_path, "only online clients are dispatched")


def test_a_loss_the_engine_forgets_is_caught(tmp_path, monkeypatch):
    """An engine that lets a lost dispatch vanish (not counted, slot not refilled) breaks the accounting."""
    monkeypatch.setattr(OpenRound, "lose", lambda self, job: self.dispatcher.request(1))
    fails(simulation(tmp_path, **WORLD), tmp_path, "every dispatch accounted for")


def test_an_offline_loss_comes_before_its_upload_ends(tmp_path, monkeypatch):
    real = World.fate
    monkeypatch.setattr(World, "fate", lambda self, *args: (real(self, *args)[0] + 1.0, OFFLINE))
    fails(simulation(tmp_path, **WORLD), tmp_path, "an offline loss before its upload ended")


def test_a_run_makes_progress_within_its_bound_of_dispatches(tmp_path, monkeypatch):
    """A round that never completes (the engine broken to never aggregate) stops with the liveness
    invariant once more dispatches than any live run makes have gone by without an aggregation; the
    guards' limits shrunk to 1 make the bound (K + 4M + 1)·1 = 11 for K = M = 2."""
    real = OpenRound.take

    def never_complete(self, job):  # a full round neither aggregates nor stops: it dispatches again
        if real(self, job):
            self.dispatcher.request(1)
        return False

    monkeypatch.setattr(OpenRound, "take", never_complete)
    monkeypatch.setattr(outcomes, "MAX_LOST_IN_A_ROW", 1)
    monkeypatch.setattr(outcomes, "MAX_ABANDONED_IN_A_ROW", 1)
    assert outcomes.progress_bound(2, 2) == 11
    fails(
        simulation(tmp_path, algorithm="afl"),
        tmp_path,
        "progress: an aggregation, or a stated reason to stop, within 11",
    )


def test_the_progress_bound_counts_each_way_a_dispatch_can_end_without_an_aggregation():
    # K arrivals, M rejected, M in flight, M a round for 1,001 closed rounds, and 999 lost between any two
    assert outcomes.progress_bound(5, 7) == (5 + 7 * (1000 + 3) + 1) * 1000


def test_nanosecond_transfers_late_in_a_run_pass_the_link_check(tmp_path):
    """S17: fast links (100 Mbit/s) under a server link of 1e9 bit/s upload the tiny model in ~3.5e-9 s; late
    in a run the clock's ulps are 1e-6 of that, and the transfer, a difference of two instants, once failed
    the engine's self-check as "a bug of the engine". The check allows a few ulps of the instant."""
    settings = {"algorithm": "afl", "clients_per_round": 3, "rounds": 300, "trainer": "none", "model": "mlp",
                "bandwidth_median": 100.0, "bandwidth_sigma": 10.0, "server_bandwidth": 1e9}  # fmt: skip
    sizes = [40, 56, 72, 48, 64, 80]
    sim = Simulation(make_config(settings), tiny_dataset(sum(sizes)), contiguous_partition(sizes), tmp_path)
    sim.run()
    assert sim.check.version == 300
