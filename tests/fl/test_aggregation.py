"""Every aggregation rule against hand-computed values."""

import math

import pytest
import torch

from asyncfl.fl.aggregation import staleness_aware_average, update_norm
from asyncfl.fl.algorithms.fedasync import fedasync_update
from asyncfl.fl.algorithms.fedbuff import fedbuff_update


def state(w, running_mean, batches):
    return {
        "w": torch.tensor(w, dtype=torch.float32),
        "bn.running_mean": torch.tensor(running_mean),
        "bn.num_batches_tracked": torch.tensor(batches),
    }


def test_staleness_aware_average_with_batchnorm_buffers():
    a, b = state([1.0, 2.0], [0.0, 4.0], 3), state([3.0, 6.0], [2.0, 0.0], 5)
    # w = n·s = 1·1 and 3·0.5: coefficients 0.4 and 0.6
    new, coefficients = staleness_aware_average(state([0.0, 0.0], [0.0, 0.0], 1), [a, b], [1, 3], [1.0, 0.5], 1.0)
    assert coefficients == pytest.approx([0.4, 0.6])
    assert torch.allclose(new["w"], torch.tensor([2.2, 4.4]))
    assert torch.allclose(new["bn.running_mean"], torch.tensor([1.2, 1.6]))
    assert new["bn.num_batches_tracked"].item() == 5 and new["bn.num_batches_tracked"].dtype == torch.int64
    assert new["w"].dtype == torch.float32


def test_mixing_keeps_part_of_the_global_model():
    a, b = state([1.0, 2.0], [0.0, 4.0], 3), state([3.0, 6.0], [2.0, 0.0], 5)
    old = state([10.0, 10.0], [1.0, 1.0], 7)
    new, coefficients = staleness_aware_average(old, [a, b], [1, 3], [1.0, 0.5], 0.5)
    assert coefficients == pytest.approx([0.2, 0.3])
    assert torch.allclose(new["w"], torch.tensor([0.5 * 10 + 1.1, 0.5 * 10 + 2.2]))
    assert new["bn.num_batches_tracked"].item() == 7


def test_fedasync_alpha_does_not_compound():
    old, client = state([0.0, 0.0], [0.0, 0.0], 1), state([10.0, 20.0], [1.0, 1.0], 4)
    first, alpha_t = fedasync_update(old, client, 0.6, 0.5)
    again, alpha_again = fedasync_update(first, client, 0.6, 0.5)
    assert alpha_t == alpha_again == pytest.approx(0.3)
    assert torch.allclose(first["w"], torch.tensor([3.0, 6.0]))
    assert torch.allclose(again["w"], 0.7 * first["w"] + 0.3 * client["w"])


def test_fedbuff_adds_staleness_weighted_deltas():
    old = state([1.0, 1.0], [0.0, 0.0], 2)
    starts = [state([1.0, 1.0], [0.0, 0.0], 2), state([0.0, 0.0], [0.0, 0.0], 1)]
    clients = [state([2.0, 3.0], [1.0, 1.0], 4), state([1.0, 1.0], [2.0, 0.0], 3)]
    new, coefficients = fedbuff_update(old, clients, starts, [1.0, 0.5], server_lr=2.0)
    # θ + η·(1·[1, 2] + 0.5·[1, 1]) / 2
    assert coefficients == pytest.approx([1.0, 0.5])
    assert torch.allclose(new["w"], torch.tensor([2.5, 3.5]))
    assert torch.allclose(new["bn.running_mean"], torch.tensor([2.0, 1.0]))
    assert new["bn.num_batches_tracked"].item() == 4


def test_update_norm_is_over_parameters_only():
    """κ's ‖θ_{v+1} − θ_v‖ is the paper's θ: BatchNorm buffers (statistics, counts) do not count."""
    assert update_norm(state([3.0, 4.0], [0.0, 0.0], 9), state([0.0, 0.0], [0.0, 0.0], 1), ["w"]) == pytest.approx(5.0)
    assert update_norm(state([1.0, 1.0], [3.0, 0.0], 1), state([1.0, 1.0], [0.0, 4.0], 1), ["w"]) == 0.0
    assert math.isclose(update_norm(state([4.0, 1.0], [30.0, 0.0], 1), state([1.0, 5.0], [0.0, 4.0], 1), ["w"]), 5.0)
