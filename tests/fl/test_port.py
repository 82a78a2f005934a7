"""PORT (Su & Li 2022, as Plato codes it): its weights by hand, with and without a previous step of the
global model to agree with, its memory, and its settings."""

import pytest
import torch

from asyncfl.fl.algorithms import make_strategy
from asyncfl.fl.strategy import Update
from asyncfl.settings.config import make_config
from asyncfl.settings.errors import InputError

THETA = {"w": torch.tensor([1.0, 0.0], dtype=torch.float64), "count": torch.tensor(3)}


def arrival(state: list[float], size: int, staleness: int) -> Update:
    """A client model `state` of `size` samples, τ = `staleness` (its start plays no part: Δ is from θ)."""
    start = {"w": torch.tensor([9.0, 9.0], dtype=torch.float64), "count": torch.tensor(1)}
    model = {"w": torch.tensor(state, dtype=torch.float64), "count": torch.tensor(2)}
    return Update(state=model, start=start, size=size, staleness_weight=0.5, staleness=staleness, client=size)


def test_weights_by_hand_with_and_without_a_previous_step():
    """θ = (1, 0), the last step (1, 0) − (0, 0). A = (3, 0), 10 samples, τ 2: cos((1, 0), (2, 0)) = 1;
    B = (1, 2), 30 samples, τ 2: cos((1, 0), (0, 2)) = 0; B/(τ + B) = 10/12. Raw weights (n/Σn)·((cos + 1)/2
    + 3·10/12): A 0.25·3.5 = 0.875, B 0.75·3 = 2.25; p = (0.28, 0.72), θ = (1.56, 1.44). With no previous
    step every cosine counts 1: B 0.75·3.5, p = (0.25, 0.75), θ = (1.5, 1.5)."""
    strategy = make_strategy(make_config({"algorithm": "port", "buffer_size": 2}))
    updates = [arrival([3.0, 0.0], 10, 2), arrival([1.0, 2.0], 30, 2)]
    previous = {"w": torch.tensor([0.0, 0.0], dtype=torch.float64), "count": torch.tensor(0)}
    theta, weights, memory = strategy.aggregate_with_memory(THETA, updates, {"previous": previous}, 5)
    assert weights == pytest.approx([0.28, 0.72], abs=1e-15)
    assert theta["w"].tolist() == pytest.approx([1.56, 1.44], abs=1e-15)
    assert memory["previous"] is THETA and int(theta["count"]) == 3  # counts take the largest
    theta, weights, memory = strategy.aggregate_with_memory(THETA, updates, {}, 5)
    assert weights == pytest.approx([0.25, 0.75], abs=1e-15) and theta["w"].tolist() == pytest.approx([1.5, 1.5])


def test_an_update_at_most_one_version_behind_is_not_weighted_by_its_agreement():
    """τ ≤ 1: Plato's cosine is taken only for τ > 1; B against the last step (cos −1) counts as A does."""
    strategy = make_strategy(make_config({"algorithm": "port", "buffer_size": 2}))
    previous = {"w": torch.tensor([0.0, 0.0], dtype=torch.float64), "count": torch.tensor(0)}
    updates = [arrival([3.0, 0.0], 10, 1), arrival([-1.0, 0.0], 10, 1)]
    _, weights, _ = strategy.aggregate_with_memory(THETA, updates, {"previous": previous}, 5)
    assert weights == [0.5, 0.5]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"staleness": "inverse"}, "staleness does not apply to algorithm port"),
        ({"server_lr": 0.5}, "server_lr does not apply"),
        ({"port_staleness_bound": 0}, "port_staleness_bound must be"),
        ({"port_similarity_weight": -1.0}, "port_similarity_weight must be"),
        ({"port_staleness_weight": float("inf")}, "port_staleness_weight"),
    ],
)
def test_settings_port_does_not_read_or_cannot_use_are_refused(settings, message):
    assert (
        make_strategy(make_config({"algorithm": "port", "port_staleness_bound": 4})).parameters.port_staleness_bound
        == 4
    )
    with pytest.raises(InputError, match=message):
        make_config({"algorithm": "port", **settings})
    with pytest.raises(InputError, match="port_staleness_weight does not apply to algorithm fedbuff"):
        make_config({"algorithm": "fedbuff", "port_staleness_weight": 1.0})
