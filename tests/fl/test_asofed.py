"""ASO-Fed (Chen et al. 2020, as AFL-Lib codes it): its steps by hand over one client's three arrivals
and another's first, the memory it keeps (n from the clients' sizes, s_prev and h per client), and its
settings."""

import numpy as np
import pytest
import torch

from asyncfl.fl.algorithms import make_strategy
from asyncfl.fl.strategy import Update
from asyncfl.settings.config import make_config
from asyncfl.settings.errors import InputError


def state(values: list[float], count: int = 1) -> dict[str, torch.Tensor]:
    return {"w": torch.tensor(values, dtype=torch.float64), "count": torch.tensor(count)}


def arrival(start: list[float], trained: list[float], size: int, client: int) -> Update:
    return Update(
        state=state(trained, 2), start=state(start), size=size, staleness_weight=0.5, staleness=3, client=client
    )


def test_steps_by_hand_over_a_clients_arrivals():
    """n = 40. Client 0 (10 samples): s = (1, −1), nothing remembered: ζ = s, θ (1, 0) → (0.75, 0.25); then
    s = (2, 0): ζ = s − (1, −1) + h 0 = (1, 1), θ → (0.5, 0), h = 0.5·0 + 0.5·(1, −1); then s = (1, 1):
    ζ = (1, 1) − (2, 0) + (0.5, −0.5) = (−0.5, 0.5), θ → (0.625, −0.125), h = 0.5·(0.5, −0.5) + 0.5·(2, 0)
    = (1.25, −0.25). Client 1 (30 samples), first: s = (0, 1), θ → (0.625, −0.875). s(τ) plays no part."""
    strategy = make_strategy(make_config({"algorithm": "asofed"}))
    memory = strategy.initial_memory(np.array([10, 30]))
    assert memory == {"samples": 40}
    theta = state([1.0, 0.0], 3)
    steps = [
        (arrival([2.0, 2.0], [1.0, 3.0], 10, 0), [0.75, 0.25]),
        (arrival([0.0, 0.0], [-2.0, 0.0], 10, 0), [0.5, 0.0]),
        (arrival([0.0, 0.0], [-1.0, -1.0], 10, 0), [0.625, -0.125]),
        (arrival([0.0, 0.0], [0.0, -1.0], 30, 1), [0.625, -0.875]),
    ]
    for update, expected in steps:
        theta, shares, memory = strategy.aggregate_with_memory(theta, [update], memory, 2)
        assert theta["w"].tolist() == pytest.approx(expected, abs=1e-15)
        assert shares == [update.size / 40] and int(theta["count"]) == 3  # counts take the largest
    assert memory["average"][0]["w"].tolist() == pytest.approx([1.25, -0.25], abs=1e-15)
    assert memory["previous"][0]["w"].tolist() == [1.0, 1.0] and memory["previous"][1]["w"].tolist() == [0.0, 1.0]
    assert set(memory["average"][1]) == {"w"} and memory["average"][1]["w"].tolist() == [0.0, 0.0]


def test_beta_weighs_the_running_average():
    """β = 1: h keeps 0, so ζ = s − s_prev; the second arrival of the case above steps by (1, 1) alike,
    the third by (1, 1) − (2, 0) = (−1, 1): θ (0.5, 0) → (0.75, −0.25)."""
    strategy = make_strategy(make_config({"algorithm": "asofed", "asofed_beta": 1.0}))
    memory = strategy.initial_memory(np.array([10, 30]))
    theta = state([0.5, 0.0])
    memory |= {"previous": {0: {"w": torch.tensor([2.0, 0.0], dtype=torch.float64)}}, "average": {}}
    theta, _, memory = strategy.aggregate_with_memory(theta, [arrival([0.0, 0.0], [-1.0, -1.0], 10, 0)], memory, 2)
    assert theta["w"].tolist() == pytest.approx([0.75, -0.25], abs=1e-15)
    assert memory["average"][0]["w"].tolist() == [0.0, 0.0]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"staleness": "inverse"}, "staleness does not apply to algorithm asofed"),
        ({"buffer_size": 2}, "buffer_size does not apply"),
        ({"asofed_beta": 0.0}, "asofed_beta must be"),
        ({"asofed_beta": 1.5}, "asofed_beta must be"),
        ({"asofed_beta": float("nan")}, "asofed_beta"),
    ],
)
def test_settings_asofed_does_not_read_or_cannot_use_are_refused(settings, message):
    with pytest.raises(InputError, match=message):
        make_config({"algorithm": "asofed", **settings})
    with pytest.raises(InputError, match="asofed_beta does not apply to algorithm fedbuff"):
        make_config({"algorithm": "fedbuff", "asofed_beta": 0.3})
