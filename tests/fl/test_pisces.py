"""Pisces (`fl/algorithms/pisces.py`) against hand-computed aggregations, pacing and choices, and in the
engine: a server that starts clients and aggregates only at its steps, at most M running, resumed to the
same bytes."""

import math

import numpy as np
import pytest
import torch

from asyncfl.fl.algorithms import make_strategy
from asyncfl.fl.strategy import ServerClients, Update
from asyncfl.settings.config import make_config
from asyncfl.settings.errors import InputError
from engine_cases import read_csv, recorded_simulation, resumed_alike


def strategy(**settings):
    return make_strategy(make_config({"algorithm": "pisces", "concurrency": 2, **settings}))


def model(value: float) -> dict[str, torch.Tensor]:
    return {"w": torch.tensor([value], dtype=torch.float64), "n": torch.tensor(3)}


def update(client: int, state: float, size: int, staleness: int, loss: float, duration: float) -> Update:
    return Update(model(state), model(0.0), size, 1.0, staleness, client, (), {}, 0.0, loss, 0, duration)


def test_the_buffer_steps_from_the_global_model_by_size_and_lag_without_renormalising():
    pisces = strategy()
    memory = pisces.initial_memory(np.array([10, 30, 20]))
    # n 10 and 30 of 40, lags 0 and 3: w = 1/4·1 and 3/4·(1/2); θ = 2 + 0.25·(6 − 2) + 0.375·(10 − 2) = 6
    new, weights, memory = pisces.aggregate_with_memory(
        model(2.0), [update(0, 6.0, 10, 0, 0.25, 3.0), update(1, 10.0, 30, 3, 4.0, 7.5)], memory, 3
    )
    assert weights == [0.25, 0.375] and new["w"].item() == 6.0 and new["n"].item() == 3
    assert memory["utility"] == {0: 0.5 * 10, 1: 2.0 * 30}  # √ℓ·n
    assert memory["latency"] == {0: 3.0, 1: 7.5} and memory["lags"] == {0: [0], 1: [3]}
    assert memory["explored"] == [0, 1]
    for lag in range(1, 7):  # a client's last five lags are kept
        _, _, memory = pisces.aggregate_with_memory(new, [update(0, 1.0, 10, lag, 1.0, 1.0)], memory, 3)
    assert memory["lags"][0] == [2, 3, 4, 5, 6]


def test_the_pacer_waits_for_the_slowest_running_client_over_m():
    pisces = strategy(pisces_unknown_latency=40.0)
    memory = {"latency": {0: 6.0, 1: 12.0}, "aggregations": 0, "last_aggregation": 0.0}
    assert pisces.paces(1.0, [], memory)  # none running: at once
    assert not pisces.paces(5.9, [0, 1], memory) and pisces.paces(6.0, [0, 1], memory)  # 12/2 from the start
    assert not pisces.paces(19.0, [0, 2], memory) and pisces.paces(20.0, [0, 2], memory)  # 2 never heard: 40/2
    # after one aggregation the interval still runs from the start (the authors' `len(agg_time) > 1`)
    assert pisces.paces(6.0, [0, 1], {**memory, "aggregations": 1, "last_aggregation": 5.0})
    assert not pisces.paces(6.0, [0, 1], {**memory, "aggregations": 2, "last_aggregation": 5.0})


def test_the_choice_explores_the_unheard_and_exploits_the_highest_scores():
    pisces = strategy(concurrency=3, pisces_explore=1.0, pisces_explore_decay=0.5, pisces_explore_floor=0.0)
    memory = pisces.initial_memory(np.array([10] * 6))
    everyone = ServerClients([], [], [0, 1, 2, 3, 4, 5], 6)
    chosen, memory = pisces.choose(everyone, memory)
    assert len(set(chosen)) == 3 and memory["explore"] == 0.5 and memory["chosen_once"]
    # ε 0: every slot exploits the heard-from, by u·(l̄ + 1)^−½: client 3's 8/2 = 4 over client 1's 3, client 0's 1
    memory = {**memory, "explore": 0.0, "explored": [0, 1, 3], "utility": {0: 1.0, 1: 3.0, 3: 8.0}, "lags": {3: [2, 4]}}
    chosen, memory = pisces.choose(ServerClients([], [5], [0, 1, 2, 3, 4], 6), memory)
    assert chosen == [3, 1]  # two free slots (M 3, one running)
    assert strategy(concurrency=3).choose(everyone, pisces.initial_memory(np.array([10] * 6)))[0] == chosen_again()


def chosen_again() -> list[int]:
    """The same seed chooses the same clients: the draws are the memory's."""
    pisces = strategy(concurrency=3)
    return pisces.choose(ServerClients([], [], [0, 1, 2, 3, 4, 5], 6), pisces.initial_memory(np.array([10] * 6)))[0]


def test_a_step_starts_nothing_while_nothing_is_buffered_after_the_first_choice():
    pisces = strategy()
    memory = pisces.initial_memory(np.array([10] * 4))
    chosen, aggregates, memory = pisces.step(0.0, ServerClients([], [], [0, 1, 2, 3], 4), memory)
    assert len(chosen) == 2 and not aggregates
    assert pisces.step(5.0, ServerClients([], chosen, [0, 1, 2, 3], 4), memory)[:2] == ([], False)


SIZES = [8, 12, 16, 20, 24, 10, 14, 18]
SETTINGS = dict(algorithm="pisces", concurrency=3, clients_per_round=3, local_epochs=1, batch_size=4, rounds=10,
                seconds_per_sample=0.3, speed_sigma=1.0, pisces_step=1.0, pisces_unknown_latency=10.0,
                checkpoint_every=3)  # fmt: skip


def test_in_the_engine_clients_start_and_updates_aggregate_only_at_steps(tmp_path):
    simulation, _ = recorded_simulation(tmp_path, SIZES, **SETTINGS)
    simulation.run()
    events = read_csv(tmp_path / "events.csv")
    assert all(float(row["dispatch_time"]) % 1.0 == 0 for row in events)
    metrics = read_csv(tmp_path / "metrics.csv")
    assert all(float(row["virtual_time"]) % 1.0 == 0 for row in metrics) and len(metrics) == 10
    in_flight = [sum(float(r["dispatch_time"]) <= t < float(r["arrival_time"]) for r in events) for t in range(40)]
    assert max(in_flight) <= 3
    by_round: dict[str, list[float]] = {}
    for row in events:
        by_round.setdefault(row["round"], []).append(float(row["coefficient"]))
    assert any(len(weights) > 1 for weights in by_round.values())  # a buffer of several reports
    assert all(sum(weights) <= 1 + 1e-12 for weights in by_round.values())


def test_a_killed_run_resumes_its_steps_and_draws_to_the_same_bytes(tmp_path):
    checkpoint = resumed_alike(tmp_path, SIZES, 4, **SETTINGS)
    assert checkpoint["server_memory"]["steps"] and checkpoint["server_memory"]["utility"]


def test_a_timing_only_run_of_it_is_refused_in_one_line():
    with pytest.raises(InputError, match="algorithm: pisces"):
        make_config({"algorithm": "pisces", "trainer": "none"})


def test_the_factor_of_a_lag_is_the_authors():
    assert strategy().aggregate_with_memory(model(0.0), [update(0, 1.0, 5, 8, 1.0, 1.0)], {
        "utility": {}, "latency": {}, "lags": {}, "explored": []}, 1)[1] == [1.0 / math.pow(9, 0.5)]  # fmt: skip
