"""The algorithms as objects: one registry, what each answers, and aggregation through the pure functions."""

import pytest
import torch

from asyncfl.algorithms import fedasync_update, fedbuff_update, staleness_aware_average
from asyncfl.config import make_config
from asyncfl.names import ALGORITHMS
from asyncfl.strategies import STRATEGIES, Update, make_strategy


def state(value: float) -> dict[str, torch.Tensor]:
    return {"w": torch.full((2,), value), "n": torch.tensor(int(value))}


def test_registry_matches_the_names_table():
    assert list(STRATEGIES) == list(ALGORITHMS)


@pytest.mark.parametrize(
    "settings,K,first,after_plain,after_aggregated",
    [
        ({"algorithm": "afl", "clients_per_round": 3}, 3, 3, 1, 1),
        ({"algorithm": "afl", "clients_per_round": 3, "concurrency": 5}, 3, 5, 1, 1),
        ({"algorithm": "sync", "clients_per_round": 3, "concurrency": 5}, 3, 3, 0, 3),
        ({"algorithm": "fedasync", "clients_per_round": 3}, 1, 3, 1, 1),
        ({"algorithm": "fedbuff", "clients_per_round": 3}, 3, 3, 1, 1),
        ({"algorithm": "fedbuff", "clients_per_round": 3, "buffer_size": 4}, 4, 3, 1, 1),
    ],
)
def test_round_shape_of_each_algorithm(settings, K, first, after_plain, after_aggregated):
    strategy = make_strategy(make_config(settings))
    assert strategy.arrivals_per_round == K
    assert strategy.initial_clients == first
    assert strategy.clients_after_arrival(aggregated=False) == after_plain
    assert strategy.clients_after_arrival(aggregated=True) == after_aggregated


def test_each_strategy_aggregates_with_its_pure_function():
    old = state(0.0)
    updates = [Update(state(1.0), state(0.0), 10, 1.0), Update(state(3.0), state(-1.0), 30, 0.5)]
    states, sizes, weights = [u.state for u in updates], [u.size for u in updates], [u.weight for u in updates]
    expected = {
        "afl": staleness_aware_average(old, states, sizes, weights, 0.7),
        "sync": staleness_aware_average(old, states, sizes, weights, 1.0),
        "fedbuff": fedbuff_update(old, states, [u.start for u in updates], weights, 0.9),
    }
    for algorithm, (new, coefficients) in expected.items():
        config = make_config({"algorithm": algorithm, "mixing": 0.7, "server_lr": 0.9})
        got, got_coefficients = make_strategy(config).aggregate(old, updates)
        assert got_coefficients == coefficients
        assert all(torch.equal(got[k], new[k]) for k in new), algorithm
    new, alpha_t = fedasync_update(old, updates[1].state, 0.6, 0.5)
    got, coefficients = make_strategy(make_config({"algorithm": "fedasync"})).aggregate(old, updates[1:])
    assert coefficients == [alpha_t] and torch.equal(got["w"], new["w"])
