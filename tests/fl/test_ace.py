"""ACE (Chang et al. 2025): its step by hand over three arrivals, where every client counts with its
latest update and one never heard from with 0, and its settings."""

import pytest
import torch

from asyncfl.fl.algorithms import make_strategy
from asyncfl.fl.strategy import Update
from asyncfl.settings.config import make_config
from asyncfl.settings.errors import InputError


def arrival(client: int, delta: list[float]) -> Update:
    """Client `client`'s update Δ = `delta` from a start model of its own (s(τ) 0.25, which plays no part)."""
    start = {"w": torch.tensor([float(client), 3.0], dtype=torch.float64), "count": torch.tensor(client)}
    state = {"w": start["w"] + torch.tensor(delta, dtype=torch.float64), "count": torch.tensor(client + 2)}
    return Update(state=state, start=start, size=10, staleness_weight=0.25, staleness=2, client=client)


def test_three_arrivals_by_hand():
    """N = 4, η = 0.5. Client 0's (4, 0): θ = (1, 1) + 0.5·(4, 0)/4 = (1.5, 1). Client 2's (0, 8): its mean
    with client 0's latest, θ += 0.5·(4, 8)/4 = (2, 2). Client 0 again, (−4, 4), replacing its (4, 0):
    θ += 0.5·(−4, 12)/4 = (1.5, 3.5). Clients 1 and 3, never heard from, count 0 all along."""
    strategy = make_strategy(make_config({"algorithm": "ace", "server_lr": 0.5}))
    theta = {"w": torch.tensor([1.0, 1.0], dtype=torch.float64), "count": torch.tensor(0)}
    memory: dict = {}
    seen = []
    for client, delta in ((0, [4, 0]), (2, [0, 8]), (0, [-4, 4])):
        theta, weights, memory = strategy.aggregate_with_memory(theta, [arrival(client, delta)], memory, 4)
        assert weights == [0.5 / 4]
        seen.append(theta["w"].tolist())
    assert seen == [[1.5, 1.0], [2.0, 2.0], [1.5, 3.5]]
    assert sorted(memory["latest"]) == [0, 2] and memory["latest"][0]["w"].tolist() == [-4.0, 4.0]
    assert int(theta["count"]) == 4  # counts take the largest, as in every algorithm (client 2: 4)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"staleness": "inverse"}, "staleness does not apply to algorithm ace"),
        ({"buffer_size": 2}, "buffer_size does not apply"),
        ({"server_lr": 0}, "server_lr must be"),
        ({"server_lr": float("nan")}, "server_lr"),
    ],
)
def test_settings_ace_does_not_read_or_cannot_use_are_refused(settings, message):
    assert make_strategy(make_config({"algorithm": "ace", "server_lr": 0.3})).parameters.server_lr == 0.3
    with pytest.raises(InputError, match=message):
        make_config({"algorithm": "ace", **settings})
