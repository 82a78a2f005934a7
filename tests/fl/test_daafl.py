"""DAAFL (`fl/algorithms/daafl.py`) against hand-computed steps, and its memory."""

import numpy as np
import torch

from asyncfl.fl.algorithms import make_strategy
from asyncfl.fl.algorithms.daafl import daafl_weight
from asyncfl.fl.strategy import Update
from asyncfl.settings.config import make_config

SIZES = [10, 30]  # d = 0.25 and 0.75 of n = 40, N = 2


def arrival(theta: dict, client: int, value: float, count: int) -> Update:
    state = {"w": torch.full((2,), value, dtype=torch.float64), "n": torch.tensor(count)}
    return Update(state, theta, SIZES[client], 1.0, 0, client)


def test_each_arrival_mixes_in_by_the_weight_that_keeps_its_client_on_its_share():
    """By hand, θ = 0: client 1 at v = 0, α = 0.75/2·1 = 0.375, θ = 1.5; client 0 at v = 1, α = 0.25/2·2
    = 0.25, θ = 0.75·1.5 + 0.25·8 = 3.125; client 1 at v = 2, α = 0.375·3 − 0.375 = 0.75, θ = 0.25·3.125
    + 0.75·2 = 2.28125. Integer entries take the largest count."""
    strategy = make_strategy(make_config({"algorithm": "daafl", "clients_per_round": 2}))
    memory = strategy.initial_memory(np.array(SIZES))
    theta = {"w": torch.zeros(2, dtype=torch.float64), "n": torch.tensor(3)}
    steps = []
    for client, value in ((1, 4.0), (0, 8.0), (1, 2.0)):
        theta, coefficients, memory = strategy.aggregate_with_memory(
            theta, [arrival(theta, client, value, 5)], memory, 2
        )
        steps.append((coefficients, theta["w"].tolist()))
    assert steps == [([0.375], [1.5, 1.5]), ([0.25], [3.125, 3.125]), ([0.75], [2.28125, 2.28125])]
    assert memory == {"samples": 40, "version": 3, "weights": {1: 1.125, 0: 0.25}} and theta["n"].item() == 5
    assert strategy.convex and strategy.arrivals_per_round == 1


def test_the_weight_stays_within_zero_and_one():
    """Each weight brings a client's total to its course, which grows with v: never negative; at most 1
    (one client of many with all the data, late: its course outruns it)."""
    assert daafl_weight(1.0, 1, 5, 0.0) == 1.0 and daafl_weight(0.5, 2, 3, 0.75) == 0.25
    rng, totals = np.random.default_rng(0), [0.0] * 4
    shares = [0.1, 0.2, 0.3, 0.4]
    for version, client in enumerate(rng.integers(0, 4, 500)):
        alpha = daafl_weight(shares[client], 4, version, totals[client])
        assert 0 < alpha <= 1
        totals[client] += alpha
