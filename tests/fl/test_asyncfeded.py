"""AsyncFedED (Wang et al. 2022, as FedOpt codes it): its step by hand for a stale, a fresh and an empty
update, a whole run that differs from FedAsync's, and its settings."""

import pytest
import torch

from asyncfl.fl.algorithms import make_strategy
from asyncfl.fl.strategy import Update
from asyncfl.settings.config import make_config
from asyncfl.settings.errors import InputError
from engine_cases import read_csv, recorded_simulation


def model(*w: float, count: int = 0) -> dict[str, torch.Tensor]:
    return {"w": torch.tensor(w, dtype=torch.float64), "count": torch.tensor(count)}


def test_the_step_by_hand():
    """θ = (3, 4) moved ‖(3, 4)‖ = 5 since the update's start (0, 0); Δ = (0, 2.5), ‖Δ‖ = 2.5: γ = 2,
    η = λ/(γ + ε) = 0.1/3, θ ← (3, 4 + 2.5/30). A fresh update (γ = 0) steps λ/ε = 0.1; one of length 0
    moves nothing. s(τ) (0.25 here) plays no part."""
    strategy = make_strategy(make_config({"algorithm": "asyncfeded"}))
    theta = model(3.0, 4.0, count=2)
    stale = Update(model(0.0, 2.5, count=5), model(0.0, 0.0), 10, 0.25, 7, 0)
    new, (step,) = strategy.aggregate(theta, [stale])
    assert step == pytest.approx(0.1 / 3, abs=1e-17)
    assert torch.allclose(new["w"], torch.tensor([3.0, 4.0 + 2.5 / 30], dtype=torch.float64), atol=1e-15, rtol=0)
    assert int(new["count"]) == 5  # counts take the largest, as in every algorithm
    fresh = Update(model(5.0, 4.0), model(3.0, 4.0), 10, 0.25, 0, 1)
    new, (step,) = strategy.aggregate(theta, [fresh])
    assert step == pytest.approx(0.1, abs=1e-17) and new["w"].tolist() == pytest.approx([3.2, 4.0], abs=1e-15)
    empty = Update(model(1.0, 1.0), model(1.0, 1.0), 10, 0.25, 3, 2)
    new, (step,) = strategy.aggregate(theta, [empty])
    assert step == 0.0 and torch.equal(new["w"], theta["w"])
    tuned = make_strategy(make_config({"algorithm": "asyncfeded", "asyncfeded_lambda": 0.6, "asyncfeded_epsilon": 2}))
    assert tuned.aggregate(theta, [stale])[1] == [pytest.approx(0.6 / 4, abs=1e-17)]


def test_a_run_trains_every_arrival_as_a_round_and_is_not_fedasync(tmp_path):
    settings = dict(clients_per_round=2, concurrency=3, rounds=8, local_epochs=1, batch_size=4)
    sizes = [8, 8, 12, 12, 16]
    runs = {}
    for algorithm in ("asyncfeded", "fedasync"):
        simulation, _ = recorded_simulation(tmp_path / algorithm, sizes, algorithm=algorithm, **settings)
        simulation.run()
        runs[algorithm] = read_csv(tmp_path / algorithm / "metrics.csv")
    assert len(runs["asyncfeded"]) == len(runs["fedasync"]) and runs["asyncfeded"] != runs["fedasync"]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"staleness": "constant"}, "staleness does not apply to algorithm asyncfeded"),
        ({"fedasync_alpha": 0.5}, "fedasync_alpha does not apply"),
        ({"asyncfeded_lambda": 0}, "asyncfeded_lambda must be"),
        ({"asyncfeded_epsilon": -1.0}, "asyncfeded_epsilon must be"),
        ({"asyncfeded_lambda": float("nan")}, "asyncfeded_lambda"),
        ({"asyncfeded_epsilon": "one"}, "asyncfeded_epsilon"),
    ],
)
def test_settings_asyncfeded_does_not_read_or_cannot_use_are_refused(settings, message):
    with pytest.raises(InputError, match=message):
        make_config({"algorithm": "asyncfeded", **settings})
    with pytest.raises(InputError, match="asyncfeded_lambda does not apply to algorithm fedasync"):
        make_config({"algorithm": "fedasync", "asyncfeded_lambda": 0.2})
