"""A run's state between events: its checkpoint payload holds everything a resumed run needs."""

import dataclasses

import numpy as np
import pytest
import torch

from asyncfl.settings.errors import InputError
from asyncfl.sim.state import Job, SimulationState
from asyncfl.training.interface import LocalResult

LOGS = {"metrics.csv": "round\n", "events.csv": "round\n", "timings.csv": "round\n"}


def state_in_flight() -> SimulationState:
    state = SimulationState.fresh({"w": torch.ones(2)}, seed=7, clients=3)
    state.rng.integers(10, size=5)  # the sampling stream has moved
    for client in (0, 1, 0):
        state.count_dispatch(client)
    state.version, state.now, state.dropped, state.deadline_at = 4, 12.5, 1, 14.0
    job = Job(0, 1, 3, 10.0, 13.0, (0.01,), "")
    state.outstanding[job.key] = job
    state.start_models[3] = {"w": torch.zeros(2)}
    state.results[job.key] = LocalResult({"w": torch.full((2,), 2.0)}, 0.5, 1, 0.6)
    return state


def test_the_payload_round_trips_every_field():
    state = state_in_flight()
    restored, logs = SimulationState.from_payload(state.payload(LOGS), "x/checkpoint.pt")
    assert logs == LOGS
    for item in dataclasses.fields(SimulationState):
        mine, theirs = getattr(state, item.name), getattr(restored, item.name)
        if item.name == "rng":
            assert mine.bit_generator.state == theirs.bit_generator.state
        elif isinstance(mine, np.ndarray):
            assert np.array_equal(mine, theirs) and theirs.dtype == np.int64
        elif item.name not in ("global_model", "start_models", "results", "client_models"):
            assert mine == theirs, item.name
    assert restored.rng.integers(1 << 30) == state.rng.integers(1 << 30)  # the same draws follow
    assert restored.aggregated(0) == state.aggregated(0) == 3 - 1 - 1
    assert restored.dispatch_counts.tolist() == [2, 1, 0] and restored.dispatched == 3


def test_a_payload_missing_an_entry_is_one_line_naming_the_checkpoint():
    payload = state_in_flight().payload(LOGS)
    del payload["waiting"]
    with pytest.raises(InputError, match="x/checkpoint.pt is not a readable asyncfl checkpoint .*'waiting'"):
        SimulationState.from_payload(payload, "x/checkpoint.pt")
