"""FedAC (as AFL-Lib codes it): a buffer of two arrivals by hand (the agreement weights, the Adam-like step,
the control variates), a later arrival corrected by the C its version was sent with and its client's own
C_c, and the settings."""

import math

import pytest
import torch

from asyncfl.fl.algorithms import make_strategy
from asyncfl.fl.strategy import Update
from asyncfl.settings.config import make_config
from asyncfl.settings.errors import InputError

SETTINGS = {"algorithm": "fedac", "buffer_size": 2, "local_epochs": 1, "fedac_lr": 0.1}


def state(values: list[float], count: int = 1) -> dict[str, torch.Tensor]:
    return {"w": torch.tensor(values, dtype=torch.float64), "count": torch.tensor(count)}


def arrival(start: list[float], trained: list[float], client: int, sent: dict | None = None) -> Update:
    return Update(state(trained, 2), state(start), 10, 0.5, 1, client, (0.5,), sent or {})


def test_a_buffer_by_hand():
    """θ = (1, 0), γ = 0.5, E = 1, nothing remembered. A (client 0) was sent θ itself: its move θ − θ_start is
    0, so r = 0.1; Δ_A = (−1, 1), Ĉ_0 = (θ_start − θ'_0)/γ = (2, −2). B (client 1) was sent (0, 0):
    cos((1, 0), Δ_B = (2, 0)) = 1; Ĉ_1 = (−4, 0). w = (0.1, 1)/1.1; Δ = (19/11, 1/11); m = 0.4Δ, v = 0.1Δ²,
    m̂ = 0.6m + 0.4Δ = 0.64Δ: each entry steps η·0.64/√0.1 = 0.2023858; C = Σ w·ΔC = (−38/11, −2/11)."""
    strategy = make_strategy(make_config(SETTINGS))
    updates = [arrival([1.0, 0.0], [0.0, 1.0], 0), arrival([0.0, 0.0], [2.0, 0.0], 1)]
    theta, coefficients, memory = strategy.aggregate_with_memory(state([1.0, 0.0], 3), updates, {}, 4)
    step = 0.1 * 0.64 / math.sqrt(0.1)
    assert theta["w"].tolist() == pytest.approx([1 + step, step], abs=1e-7) and int(theta["count"]) == 3
    assert coefficients == pytest.approx([0.1 * 0.1 / 1.1, 0.1 / 1.1])
    assert memory["control"]["w"].tolist() == pytest.approx([-38 / 11, -2 / 11], abs=1e-7)
    assert memory["controls"][0]["w"].tolist() == [2.0, -2.0] and memory["controls"][1]["w"].tolist() == [-4.0, 0.0]
    delta = torch.tensor([19 / 11, 1 / 11], dtype=torch.float64)
    assert torch.allclose(memory["m"]["w"], 0.4 * delta) and torch.allclose(memory["v"]["w"], 0.1 * delta**2)
    assert strategy.dispatch_snapshot(memory) == {"control": memory["control"]} and strategy.dispatch_snapshot({}) == {}


def test_an_arrival_is_corrected_by_the_c_it_was_sent_and_its_clients_own():
    """Client 0 (C_0 = (2, −2)) sent C = (−1, 0): θ'_0 = θ_0 − γ(C − C_0) = (1, 1) − 0.5·(−3, 2) = (2.5, 0);
    Ĉ_0 = (θ_start − θ'_0)/γ − (C − C_0) = ((0, 0) − (2.5, 0))/0.5 − (−3, 2) = (−2, −2). Alone in its buffer,
    sent the model it joins (r = 0.1, w = 0.1/(0.1 + 1e-8), AFL-Lib's ε): C moves by w·(Ĉ_0 − C_0) =
    w·(−4, 0), θ by η·0.64·sign(Δ)/√0.1 with Δ = (2.5, 0)."""
    strategy = make_strategy(make_config(SETTINGS))
    memory = {"controls": {0: {"w": torch.tensor([2.0, -2.0], dtype=torch.float64)}}}
    sent = {"control": {"w": torch.tensor([-1.0, 0.0], dtype=torch.float64)}}
    theta, _, after = strategy.aggregate_with_memory(
        state([0.0, 0.0]), [arrival([0.0, 0.0], [1.0, 1.0], 0, sent)], memory, 4
    )
    assert after["controls"][0]["w"].tolist() == pytest.approx([-2.0, -2.0])
    assert after["control"]["w"].tolist() == pytest.approx([-4.0 * 0.1 / (0.1 + 1e-8), 0.0], abs=1e-12)
    assert theta["w"].tolist() == pytest.approx([0.1 * 0.64 / math.sqrt(0.1), 0.0], abs=1e-7)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"staleness": "inverse"}, "staleness does not apply to algorithm fedac"),
        ({"server_lr": 0.5}, "server_lr does not apply"),
        ({"fedac_lr": 0.0}, "fedac_lr must be"),
        ({"fedac_beta1": 1.5}, "fedac_beta1 must be"),
        ({"fedac_beta2": float("nan")}, "fedac_beta2"),
    ],
)
def test_settings_fedac_does_not_read_or_cannot_use_are_refused(settings, message):
    with pytest.raises(InputError, match=message):
        make_config({"algorithm": "fedac", **settings})
    with pytest.raises(InputError, match="fedac_lr does not apply to algorithm fedbuff"):
        make_config({"algorithm": "fedbuff", "fedac_lr": 0.01})
