"""FedStaleWeight (Ma et al. 2024, the authors' test bench's rule): its step by hand over three rounds, a
window that drops a client's oldest staleness, a buffer of fresh clients that moves nothing, its memory
through a crash, and its settings."""

import pytest
import torch

from asyncfl.fl.algorithms import make_strategy
from asyncfl.fl.strategy import Update
from asyncfl.settings.config import make_config
from asyncfl.settings.errors import InputError


def arrival(client: int, staleness: int, delta: list[float]) -> Update:
    """Client `client`'s update Δ = `delta`, from a start model of its own, `staleness` versions behind."""
    start = {"w": torch.tensor([0.5 * client, -1.0], dtype=torch.float64), "count": torch.tensor(client)}
    state = {"w": start["w"] + torch.tensor(delta, dtype=torch.float64), "count": torch.tensor(client + 1)}
    return Update(state=state, start=start, size=10, staleness_weight=0.25, staleness=staleness, client=client)


def test_three_rounds_by_hand():
    """W = 2. Round 1: τ̄ = (0, 2): w = (0, 1). Round 2: client 0 twice (τ 3 then 1: its window [0, 3]
    becomes [3, 1], τ̄ 2 for both its updates), client 1 τ 4 (window [2, 4], τ̄ 3): w = (2, 2, 3)/7, so
    θ moves by 2/7·(2, 2) + 2/7·(1, −1) + 3/7·(−1, 0) = (3/7, 2/7). Round 3: a first-heard client, τ 0: its
    τ̄ 0 is the buffer's whole: w = 0, θ stays. s(τ) (0.25 in every update) plays no part."""
    strategy = make_strategy(make_config({"algorithm": "fedstaleweight", "buffer_size": 2, "staleness_window": 2}))
    theta = {"w": torch.tensor([1.0, 2.0], dtype=torch.float64), "count": torch.tensor(0)}
    theta, weights, memory = strategy.aggregate_with_memory(
        theta, [arrival(0, 0, [1, 0]), arrival(1, 2, [0, 1])], {}, 3
    )
    assert weights == [0.0, 1.0] and theta["w"].tolist() == [1.0, 3.0]
    assert memory == {"staleness": {0: [0], 1: [2]}}
    second = [arrival(0, 3, [2, 2]), arrival(0, 1, [1, -1]), arrival(1, 4, [-1, 0])]
    theta, weights, memory = strategy.aggregate_with_memory(theta, second, memory, 3)
    assert weights == pytest.approx([2 / 7, 2 / 7, 3 / 7], abs=1e-15)
    assert torch.allclose(theta["w"], torch.tensor([1 + 3 / 7, 3 + 2 / 7], dtype=torch.float64), atol=1e-15, rtol=0)
    assert memory == {"staleness": {0: [3, 1], 1: [2, 4]}}
    before = theta
    theta, weights, memory = strategy.aggregate_with_memory(theta, [arrival(2, 0, [5, 5])], memory, 3)
    assert weights == [0.0] and torch.equal(theta["w"], before["w"]) and memory["staleness"][2] == [0]
    assert int(theta["count"]) == 3  # counts take the largest, as in every algorithm


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"staleness": "constant"}, "staleness does not apply to algorithm fedstaleweight"),
        ({"staleness_a": 1.0}, "staleness_a does not apply"),
        ({"server_lr": 0.5}, "server_lr does not apply"),
        ({"staleness_window": 0}, "staleness_window must be"),
        ({"staleness_window": 2.5}, "staleness_window"),
    ],
)
def test_settings_fedstaleweight_does_not_read_or_cannot_use_are_refused(settings, message):
    config = make_config({"algorithm": "fedstaleweight", "buffer_size": 3, "staleness_window": 7})
    assert make_strategy(config).parameters.staleness_window == 7
    assert make_strategy(make_config({"algorithm": "fedstaleweight"})).parameters.staleness_window == 5
    with pytest.raises(InputError, match=message):
        make_config({"algorithm": "fedstaleweight", **settings})
    with pytest.raises(InputError, match="staleness_window does not apply to algorithm fedbuff"):
        make_config({"algorithm": "fedbuff", "staleness_window": 3})
