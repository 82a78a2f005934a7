"""What every trainer shares: the local settings read from a run's config, the optimizer rule, each
epoch's sample order, early stopping, the epoch loop and the minibatch loss."""

import math

import pytest
import torch
from torch.nn import functional as F

from asyncfl.settings.config import make_config
from asyncfl.training.interface import (
    EarlyStopping,
    LocalSettings,
    LocalTask,
    epoch_permutations,
    make_optimizer,
    minibatch_loss,
    run_epochs,
    uses_adam,
)
from asyncfl.training.numerics import Numerics


def test_early_stopping_closed_form():
    stopping = EarlyStopping(patience=2)
    assert [stopping.should_stop(x) for x in (1.0, 0.9, 0.95, 0.92, 0.85, 0.9, 0.9)] == [
        False,
        False,
        False,
        True,
        False,
        False,
        True,
    ]
    never = EarlyStopping(patience=10)
    assert not any(never.should_stop(1.0) for _ in range(10))


def test_one_optimizer_rule_for_both_trainers():
    assert uses_adam("adam") and not uses_adam("sgd")
    with pytest.raises(ValueError, match="unknown optimizer 'adamw'; choose one of adam, sgd"):
        uses_adam("adamw")
    assert isinstance(make_optimizer("sgd", [torch.zeros(1, requires_grad=True)], 0.1), torch.optim.SGD)


def test_the_epoch_loop_reports_the_last_epoch_and_the_mean_over_epochs():
    """The last epoch's loss is asyncfl's proxy; the mean over the epochs run is what the paper's
    reference code logs of a dispatch. Early stopping ends the loop (patience 2: after two epochs
    without a new best)."""
    losses = iter([3.0, 2.0, 2.5, 2.2, 0.1])
    task = LocalTask({}, torch.arange(4), (0.1,) * 5, (0, 3, 0, 0))
    last, epochs_run, mean = run_epochs(task, 2, lambda index, lr, order: next(losses))
    assert (last, epochs_run, mean) == (2.2, 4, (3.0 + 2.0 + 2.5 + 2.2) / 4)


def test_local_settings_are_the_configs_and_refuse_an_unknown_optimizer():
    settings = LocalSettings.of(make_config({"batch_size": 32, "optimizer": "sgd", "patience": 3}))
    assert (settings.batch_size, settings.optimizer, settings.patience, settings.adam) == (32, "sgd", 3, False)
    with pytest.raises(ValueError, match="unknown optimizer 'rmsprop'"):
        LocalSettings(optimizer="rmsprop")


def test_each_epoch_orders_the_clients_own_samples_from_its_own_stream():
    """Every epoch a permutation of the client's indices; the same dispatch draws the same orders, the
    next dispatch of the client others."""
    indices = torch.arange(100, 120)
    task = LocalTask({}, indices, (0.1, 0.1, 0.1), (0, 3, 2, 0))
    orders = epoch_permutations(task)
    assert len(orders) == 3 and all(sorted(order.tolist()) == indices.tolist() for order in orders)
    assert not torch.equal(orders[0], orders[1])
    assert all(torch.equal(a, b) for a, b in zip(orders, epoch_permutations(task), strict=True))
    next_dispatch = LocalTask({}, indices, (0.1,), (0, 3, 2, 1))
    assert not torch.equal(epoch_permutations(next_dispatch)[0], orders[0])


def test_a_diverged_epoch_ends_the_loop_at_once():
    losses = iter([1.0, math.nan, 0.5])
    task = LocalTask({}, torch.arange(4), (0.1,) * 3, (0, 3, 0, 0))
    last, epochs_run, _ = run_epochs(task, 10, lambda index, lr, order: next(losses))
    assert math.isnan(last) and epochs_run == 2


def test_the_minibatch_loss_is_the_mean_negative_log_likelihood():
    logits = torch.tensor([[2.0, 0.5, -1.0], [0.1, 0.2, 3.0]])
    labels = torch.tensor([0, 2])
    loss = minibatch_loss(lambda images: F.log_softmax(images, dim=1), logits, labels, Numerics())
    torch.testing.assert_close(loss, F.cross_entropy(logits, labels))
