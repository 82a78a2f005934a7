"""The plain trainer's pieces: early stopping and the optimizer rule both trainers share."""

import pytest
import torch

from asyncfl.training import EarlyStopping, LocalTask, PlainTrainer, make_optimizer, uses_adam
from training_cases import OFFSETS, make_case


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


def test_plain_trainer_is_repeatable_and_moves_the_model():
    model, images, labels, start = make_case("cnn", 1)
    tasks = [LocalTask(start, torch.arange(OFFSETS[c], OFFSETS[c + 1]), (0.01,), (0, 3, c, 0)) for c in range(2)]
    trainer = PlainTrainer(model, images, labels, 16, "adam", 10)
    first, again = trainer.train(tasks), trainer.train(tasks)
    for a, b in zip(first, again, strict=True):
        assert all(torch.equal(a.state[k], b.state[k]) for k in start)
        assert not torch.equal(a.state["head.weight"], start["head.weight"])
        assert a.epochs_run == 1
