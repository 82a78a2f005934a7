"""The clients' compute speeds: the heavy tail of slow clients (`slow_fraction`, `slow_factor`), off by default."""

import csv
from pathlib import Path

import numpy as np
import pytest

from asyncfl.settings.config import make_config
from asyncfl.settings.errors import InputError
from asyncfl.sim.client_system import ClientSystem
from asyncfl.sim.engine import Simulation
from engine_cases import contiguous_partition, tiny_dataset


@pytest.mark.parametrize("fraction,count", [(0.3, 3), (0.2, 2), (0.05, 1), (1.0, 10)])
def test_slow_clients_are_exactly_factor_times_slower_and_the_rest_untouched(fraction, count):
    plain = ClientSystem.draw(make_config({"seed": 4}), 10)
    slow = ClientSystem.draw(make_config({"seed": 4, "slow_fraction": fraction, "slow_factor": 8.0}), 10)
    slowed = plain.speed != slow.speed
    assert slowed.sum() == count  # ⌈f·C⌉ after rounding: 0.3 of 10 is 3, not 4
    assert np.array_equal(slow.speed[slowed], plain.speed[slowed] / 8.0)
    assert np.array_equal(slow.speed[~slowed], plain.speed[~slowed]) and np.array_equal(slow.latency, plain.latency)
    again = ClientSystem.draw(make_config({"seed": 4, "slow_fraction": fraction, "slow_factor": 8.0}), 10)
    assert np.array_equal(again.speed, slow.speed)


def test_a_slow_factor_without_slow_clients_is_refused():
    with pytest.raises(InputError, match="slow_factor applies only with slow_fraction > 0"):
        make_config({"slow_factor": 5.0})
    with pytest.raises(InputError, match="slow_fraction must be ≤ 1"):
        make_config({"slow_fraction": 1.5})


def rows(path: Path) -> list[dict]:
    return list(csv.DictReader(path.read_text().splitlines()))


def test_evaluations_without_the_gradient_leave_everything_else_byte_identical(tmp_path):
    sizes = [6, 10, 8, 12]
    outputs = {}
    for gradient in (True, False):
        config = make_config({"clients_per_round": 2, "rounds": 4, "local_epochs": 1, "batch_size": 4,
                              "eval_gradient": gradient})  # fmt: skip
        Simulation(config, tiny_dataset(sum(sizes)), contiguous_partition(sizes), tmp_path / str(gradient)).run()
        outputs[gradient] = tmp_path / str(gradient)
    for name in ("events.csv", "model.pt"):
        assert (outputs[True] / name).read_bytes() == (outputs[False] / name).read_bytes()
    with_gradient, without = rows(outputs[True] / "metrics.csv"), rows(outputs[False] / "metrics.csv")
    dropped = ("global_train_loss", "gradient_norm_squared")
    assert all(row[key] for row in with_gradient if row["test_accuracy"] for key in dropped)
    assert all(not row[key] for row in without for key in dropped)
    strip = [{k: v for k, v in row.items() if k not in dropped} for row in with_gradient]
    assert strip == [{k: v for k, v in row.items() if k not in dropped} for row in without]


def test_a_compute_time_per_dispatch_ignores_the_clients_data():
    config = make_config({"seconds_per_dispatch": 2.0, "speed_distribution": "constant", "speed_classes": "1:1,1:3"})
    system = ClientSystem.draw(config, 10)
    computes = {system.median_phases(c, size).compute for c in range(10) for size in (1, 50, 5000)}
    assert computes == {2.0, 6.0}


FEDREVIVE_CLASSES = {"speed_classes": "0.25:1,0.5:1.3,0.25:1.6", "speed_distribution": "constant"}


def middle_class(settings: dict) -> int:
    """How many of 1,000 clients are in the middle class (compute 1.3 times slower)."""
    return int(np.sum(np.isclose(ClientSystem.draw(make_config(settings), 1000).speed, 1 / 1.3)))


def test_classes_drawn_by_probability_vary_with_the_seed_around_their_probabilities():
    assert {middle_class(FEDREVIVE_CLASSES | {"seed": seed}) for seed in range(5)} == {500}  # shares: exactly
    drawn = [middle_class(FEDREVIVE_CLASSES | {"class_draw": "probability", "seed": seed}) for seed in range(20)]
    # binomial(1000, 0.5) per seed: its mean over 20 seeds within 4 standard errors of 500
    assert len(set(drawn)) > 5 and abs(np.mean(drawn) - 500) < 4 * np.sqrt(1000 * 0.25 / 20)


def test_class_probabilities_that_do_not_sum_to_one_are_refused():
    with pytest.raises(
        InputError, match="the shares of speed_classes sum to 0.9, .* class_draw: probability"
    ) as raised:
        make_config({"speed_classes": "0.4:1,0.5:2", "class_draw": "probability"})
    assert len(str(raised.value).splitlines()) == 1
    assert make_config({"speed_classes": "0.4:1,0.5:2"}).class_draw == "shares"  # relative weights: fine
