"""MIFA (Gu et al. 2021, as APPFL codes it): its step by hand over two rounds, where a client absent from
a round still counts with its latest update, its memory through a crash, and its settings."""

import pytest
import torch

from asyncfl.fl.algorithms import make_strategy
from asyncfl.fl.strategy import Update
from asyncfl.settings.config import make_config
from asyncfl.settings.errors import InputError


def arrival(client: int, delta: list[float]) -> Update:
    """Client `client`'s update Δ = `delta` from a start model of its own (s(τ) 0.25, which plays no part)."""
    start = {"w": torch.tensor([float(client), -2.0], dtype=torch.float64), "count": torch.tensor(client)}
    state = {"w": start["w"] + torch.tensor(delta, dtype=torch.float64), "count": torch.tensor(client + 4)}
    return Update(state=state, start=start, size=10, staleness_weight=0.25, staleness=1, client=client)


def test_two_rounds_by_hand():
    """N = 3, K = 2. Round 1: Δ_0 = (2, 0), Δ_1 = (0, 4): θ = (1, 1) + (2, 4)/3. Round 2: client 0 twice,
    (1, 1) then (−3, 0), its later update the one kept; client 1, absent, still counts with (0, 4); client 2,
    never heard from, with 0: θ += (−3, 4)/3."""
    strategy = make_strategy(make_config({"algorithm": "mifa", "buffer_size": 2}))
    theta = {"w": torch.tensor([1.0, 1.0], dtype=torch.float64), "count": torch.tensor(0)}
    theta, weights, memory = strategy.aggregate_with_memory(theta, [arrival(0, [2, 0]), arrival(1, [0, 4])], {}, 3)
    assert weights == [1 / 3, 1 / 3]
    assert torch.allclose(theta["w"], torch.tensor([1 + 2 / 3, 1 + 4 / 3], dtype=torch.float64), atol=1e-15, rtol=0)
    theta, weights, memory = strategy.aggregate_with_memory(theta, [arrival(0, [1, 1]), arrival(0, [-3, 0])], memory, 3)
    assert torch.allclose(theta["w"], torch.tensor([2 / 3, 1 + 8 / 3], dtype=torch.float64), atol=1e-15, rtol=0)
    assert sorted(memory["latest"]) == [0, 1] and memory["latest"][0]["w"].tolist() == [-3.0, 0.0]
    assert int(theta["count"]) == 5  # counts take the largest, as in every algorithm (client 1: 5)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"staleness": "inverse"}, "staleness does not apply to algorithm mifa"),
        ({"server_lr": 0.5}, "server_lr does not apply"),
        ({"buffer_size": 0}, "buffer_size must be"),
    ],
)
def test_settings_mifa_does_not_read_or_cannot_use_are_refused(settings, message):
    assert make_strategy(make_config({"algorithm": "mifa", "buffer_size": 3})).parameters.buffer_size == 3
    with pytest.raises(InputError, match=message):
        make_config({"algorithm": "mifa", **settings})
