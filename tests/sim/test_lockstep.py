"""Runs stepped together in one process: their clients trained in shared calls, each run's bytes those it
makes alone, a failing run leaving the others to finish, an interrupt unwinding every run resumably."""

import functools
import threading
from pathlib import Path

import pytest

from asyncfl.planning.layout import RUN_OUTPUTS
from asyncfl.settings.config import make_config
from asyncfl.sim.engine import Simulation
from asyncfl.sim.lockstep import Lockstep
from engine_cases import contiguous_partition, tiny_dataset

SIZES = [40, 56, 72, 48, 64, 80]
BASE = {"clients_per_round": 3, "rounds": 6, "local_epochs": 2, "eval_every": 2, "checkpoint_every": 2}
RUNS = {
    "afl0": {**BASE, "algorithm": "afl", "seed": 0},
    "afl1": {**BASE, "algorithm": "afl", "seed": 1},
    "fedbuff": {**BASE, "algorithm": "fedbuff", "seed": 0},
    "sync": {**BASE, "algorithm": "sync", "seed": 0, "rounds": 3},
    "fedcompass": {**BASE, "algorithm": "fedcompass", "seed": 0, "speed_sigma": 1.0},  # its steps cut dispatches
}
DATASET, PARTITION = tiny_dataset(sum(SIZES)), contiguous_partition(SIZES)


def outputs(out: Path) -> dict[str, bytes]:
    return {name: (out / name).read_bytes() for name in RUN_OUTPUTS}


def simulate(out: Path, settings: dict, pool: Lockstep | None = None) -> dict:
    return Simulation(make_config(settings), DATASET, PARTITION, out, pool=pool).run()


@pytest.fixture(scope="module")
def alone(tmp_path_factory) -> dict[str, dict[str, bytes]]:
    """Each run's outputs trained alone: what every lockstep must reproduce."""
    root = tmp_path_factory.mktemp("alone")
    for name, settings in RUNS.items():
        simulate(root / name, settings)
    return {name: outputs(root / name) for name in RUNS}


def together(root: Path, lockstep: Lockstep, runs: dict[str, dict] = RUNS) -> list:
    return lockstep.run([functools.partial(simulate, root / name, runs[name], lockstep) for name in runs])


def test_runs_stepped_together_train_in_shared_calls_and_make_their_bytes_alone(alone, tmp_path):
    threads = threading.active_count()
    lockstep = Lockstep()
    outcomes = together(tmp_path, lockstep)
    assert all(isinstance(outcome, dict) for outcome in outcomes), outcomes
    assert {name: outputs(tmp_path / name) for name in RUNS} == alone
    # the first call holds every run's first dispatches: 3 clients each (sync's round, AFL's and FedBuff's J)
    assert lockstep.calls[0] == 3 * len(RUNS)
    assert max(lockstep.calls) > 3  # a call holds more than one run's clients
    assert threading.active_count() == threads  # every run's thread has ended


def test_a_cap_on_runs_at_once_keeps_each_calls_runs_within_it_and_the_bytes_alone(alone, tmp_path):
    lockstep = Lockstep(at_once=2)
    outcomes = together(tmp_path, lockstep)
    assert all(isinstance(outcome, dict) for outcome in outcomes), outcomes
    assert {name: outputs(tmp_path / name) for name in RUNS} == alone
    assert lockstep.calls[0] == 3 * 2  # the first two runs' first dispatches, the others not started
    # at most two runs' clients a call (FedCompass's at most 3 in flight, like the others)
    assert max(lockstep.calls) <= 2 * 3 < max(uncapped_calls(tmp_path / "uncapped"))


def uncapped_calls(root: Path) -> list[int]:
    lockstep = Lockstep()
    together(root, lockstep)
    return lockstep.calls


def test_a_failing_run_leaves_the_others_to_finish_and_is_its_outcome(alone, tmp_path):
    diverging = {**RUNS["fedbuff"], "server_lr": 1e300}
    outcomes = together(tmp_path, Lockstep(), {"afl0": RUNS["afl0"], "bad": diverging, "sync": RUNS["sync"]})
    assert "the aggregated global model has nan or inf entries" in str(outcomes[1])
    assert outputs(tmp_path / "afl0") == alone["afl0"] and outputs(tmp_path / "sync") == alone["sync"]


class InterruptedAt(Lockstep):
    """A lockstep whose process is interrupted (Ctrl-C) as it makes its `call`-th training call."""

    def __init__(self, call: int):
        super().__init__()
        self.call = call

    def train(self, waiting: list) -> None:
        if len(self.calls) == self.call:
            raise KeyboardInterrupt
        super().train(waiting)


def test_an_interrupt_unwinds_every_run_and_each_resumes_to_its_bytes_alone(alone, tmp_path):
    threads = threading.active_count()
    with pytest.raises(KeyboardInterrupt):
        together(tmp_path, InterruptedAt(4))
    assert threading.active_count() == threads
    assert all((tmp_path / name / "checkpoint.pt").exists() for name in ("afl0", "afl1", "fedbuff"))
    assert not any((tmp_path / name / "run.json").exists() for name in ("afl0", "afl1", "fedbuff"))
    outcomes = together(tmp_path, Lockstep())
    assert all(isinstance(outcome, dict) for outcome in outcomes), outcomes
    assert {name: outputs(tmp_path / name) for name in RUNS} == alone


def test_jobs_that_never_train_or_fail_at_once_end_the_lockstep():
    def fails() -> None:
        raise ValueError("at once")

    outcomes = Lockstep().run([lambda: 1, fails, lambda: 3])
    assert outcomes[0] == 1 and isinstance(outcomes[1], ValueError) and outcomes[2] == 3
