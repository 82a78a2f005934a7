"""CA2FL (Wang et al., ICLR 2024, Algorithm 1): its calibrated step by hand over three rounds against the
paper's box, the case where it is FedBuff, its cache through a crash, and its settings."""

import pytest
import torch

from asyncfl.fl.algorithms.ca2fl import calibrated_update
from asyncfl.fl.algorithms.fedbuff import fedbuff_update
from asyncfl.settings.config import make_config
from asyncfl.settings.errors import InputError


def state(w: float, count: int = 1) -> dict[str, torch.Tensor]:
    return {"w": torch.tensor([w, -w], dtype=torch.float32), "count": torch.tensor(count)}


def arrival(client: int, delta: float, start: float = 0.0, count: int = 1) -> tuple:
    return client, state(start + delta, count), state(start), 1.0


def test_three_rounds_by_hand():
    """n = 3 clients, η = 0.5, K = 2. Round 1, empty cache, Δ0 = 1, Δ1 = 3: v = (1 + 3)/2 = 2, θ = 1.
    Round 2, clients 1 (Δ = 5) and 2 (Δ = −1): h = (1 + 3 + 0)/3 = 4/3, v = 4/3 + ((5 − 3) + (−1 − 0))/2 =
    11/6, θ = 1 + 11/12. Round 3, client 0 twice (Δ = 2, then 4): h = (1 + 5 − 1)/3 = 5/3, the second
    arrival calibrated by the first: v = 5/3 + ((2 − 1) + (4 − 2))/2 = 19/6."""
    theta, cache = state(0.0), {}
    theta, coefficients, cache = calibrated_update(theta, [arrival(0, 1.0), arrival(1, 3.0, count=4)], cache, 3, 0.5)
    assert theta["w"].tolist() == [1.0, -1.0] and coefficients == [0.25, 0.25]
    assert theta["count"].item() == 4  # the largest count, as every aggregation takes it
    assert {client: entry["w"][0].item() for client, entry in cache.items()} == {0: 1.0, 1: 3.0}
    theta, _, cache = calibrated_update(theta, [arrival(1, 5.0, 1.0), arrival(2, -1.0, 1.0)], cache, 3, 0.5)
    assert theta["w"][0].item() == pytest.approx(1 + 11 / 12, abs=1e-6)
    assert {client: entry["w"][0].item() for client, entry in cache.items()} == {0: 1.0, 1: 5.0, 2: -1.0}
    before = theta["w"][0].item()
    theta, _, cache = calibrated_update(theta, [arrival(0, 2.0), arrival(0, 4.0)], cache, 3, 0.5)
    assert theta["w"][0].item() == pytest.approx(before + 0.5 * 19 / 6, abs=1e-6)
    assert theta["w"][1].item() == pytest.approx(-theta["w"][0].item(), abs=1e-6)  # linear in Δ's sign
    assert cache[0]["w"][0].item() == 4.0 and set(cache[0]) == {"w"}  # the last update; floating entries only


def test_with_every_client_once_a_round_the_calibration_cancels_and_ca2fl_is_fedbuff():
    """K = n, each client once: h + Σ(Δ_c − h_c)/n = Σ Δ_c / n, FedBuff's mean update, whatever the cache."""
    generator = torch.Generator().manual_seed(0)
    old = {"w": torch.randn(50, generator=generator)}
    starts = [{"w": torch.randn(50, generator=generator)} for _ in range(4)]
    states = [{"w": start["w"] + torch.randn(50, generator=generator)} for start in starts]
    cache = {client: {"w": torch.randn(50, generator=generator)} for client in range(4)}
    arrivals = [(client, states[client], starts[client], 1.0) for client in (2, 0, 3, 1)]
    calibrated, _, _ = calibrated_update(old, arrivals, cache, 4, 0.7)
    buffered, _ = fedbuff_update(
        old, [states[c] for c in (2, 0, 3, 1)], [starts[c] for c in (2, 0, 3, 1)], [1.0] * 4, 0.7
    )
    assert torch.allclose(calibrated["w"], buffered["w"], atol=1e-6)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"delay_threshold": 3}, "delay_threshold"),
        ({"fedasync_alpha": 0.5}, "fedasync_alpha"),
        ({"server_lr": 0.0}, "server_lr must be"),
    ],
)
def test_settings_ca2fl_does_not_read_or_cannot_use_are_refused(settings, message):
    assert make_config({"algorithm": "ca2fl", "buffer_size": 3, "server_lr": 0.5}).buffer_size == 3
    with pytest.raises(InputError, match=message):
        make_config({"algorithm": "ca2fl", **settings})
