"""The plain trainer's pieces: early stopping and the optimizer rule both trainers share."""

import pytest
import torch

from asyncfl.spec.random_streams import shuffle_key
from asyncfl.training.interface import (
    EarlyStopping,
    LocalSettings,
    LocalTask,
    epoch_permutations,
    make_optimizer,
    run_epochs,
    uses_adam,
)
from asyncfl.training.plain import PlainTrainer
from training_cases import OFFSETS, client_tasks, make_case


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
    tasks = client_tasks(start, (0.01,), 2)
    trainer = PlainTrainer(model, images, labels, LocalSettings(16, "adam", 10))
    first, again = trainer.train(tasks), trainer.train(tasks)
    for a, b in zip(first, again, strict=True):
        assert all(torch.equal(a.state[k], b.state[k]) for k in start)
        assert not torch.equal(a.state["head.weight"], start["head.weight"])
        assert a.epochs_run == 1


def hand_sgd_steps(model, images, labels, order, batch, lr, mu, start):
    """SGD on data loss + μ/2‖θ − θ_start‖², one minibatch after another, written out with autograd."""
    params = {k: v.clone().requires_grad_(True) for k, v in start.items() if v.is_floating_point()}
    for rows in order.split(batch):
        loss = torch.nn.functional.nll_loss(torch.func.functional_call(model, params, (images[rows],)), labels[rows])
        grads = torch.autograd.grad(loss, list(params.values()))
        with torch.no_grad():
            params = {
                name: (value - lr * (grad + mu * (value - start[name]))).requires_grad_(True)
                for (name, value), grad in zip(params.items(), grads, strict=True)
            }
    return {k: v.detach() for k, v in params.items()}


@pytest.mark.parametrize("trainer_name", ["plain", "vectorised"])
def test_proximal_term_matches_a_hand_computed_sgd_step(trainer_name):
    """FedProx: the step is θ − γ(∇ℓ(θ) + μ(θ − θ_start)). The first step's proximal gradient is 0, the
    second's is not; with μ = 0.5 the result differs from μ = 0, so the term is really applied."""
    from asyncfl.training.vectorised import VectorisedTrainer

    model, images, labels, start = make_case("cnn", 1)
    trainer_class = PlainTrainer if trainer_name == "plain" else VectorisedTrainer
    indices = torch.arange(OFFSETS[0], OFFSETS[1])  # 40 samples: batches of 16, 16, 8
    task = LocalTask(start, indices, (0.1,), shuffle_key(0, 0, 0), prox_mu=0.5)
    (result,) = trainer_class(model, images, labels, LocalSettings(16, "sgd", 10)).train([task])
    (order,) = epoch_permutations(task)
    expected = hand_sgd_steps(model, images, labels, order, 16, 0.1, 0.5, start)
    without = hand_sgd_steps(model, images, labels, order, 16, 0.1, 0.0, start)
    for name, value in expected.items():
        torch.testing.assert_close(result.state[name], value, rtol=1e-5, atol=1e-6)
    assert max((expected[n] - without[n]).abs().max() for n in expected) > 1e-5


@pytest.mark.parametrize("trainer_name", ["plain", "vectorised"])
def test_a_fresh_adam_every_epoch_takes_adams_first_step_again(trainer_name):
    """AFL as coded re-creates Adam every local epoch: with one minibatch per epoch, every step is Adam's
    first, θ ← θ − γ·g/(|g| + ε); a kept Adam's second step differs."""
    from asyncfl.training.vectorised import ADAM_EPS, VectorisedTrainer

    model, images, labels, start = make_case("cnn", 1)
    trainer_class = PlainTrainer if trainer_name == "plain" else VectorisedTrainer
    indices = torch.arange(OFFSETS[0], OFFSETS[1])
    lrs = (0.01, 0.005)
    fresh = LocalTask(start, indices, lrs, shuffle_key(0, 0, 0), optimizer_per_epoch=True)
    kept = LocalTask(start, indices, lrs, shuffle_key(0, 0, 0))
    trainer = trainer_class(model, images, labels, LocalSettings(64, "adam", 10))  # 40 samples: one minibatch per epoch
    (result,), (kept_result,) = trainer.train([fresh]), trainer.train([kept])
    params = {k: v.clone() for k, v in start.items() if v.is_floating_point()}
    for lr, order in zip(lrs, epoch_permutations(fresh), strict=True):
        grads = torch.func.grad(
            lambda p, rows=order: torch.nn.functional.nll_loss(
                torch.func.functional_call(model, p, (images[rows],)), labels[rows]
            )
        )(params)
        params = {n: params[n] - lr * grads[n] / (grads[n].abs() + ADAM_EPS) for n in params}
    for name, value in params.items():
        torch.testing.assert_close(result.state[name], value, rtol=1e-4, atol=1e-6)
    assert not torch.allclose(kept_result.state["head.weight"], result.state["head.weight"])


def test_the_epoch_loop_reports_the_last_epoch_and_the_mean_over_epochs():
    """The last epoch's loss is asyncfl's proxy; the mean over the epochs run is what the paper's
    reference code logs of a dispatch. Early stopping ends the loop (patience 2: after two epochs
    without a new best)."""
    losses = iter([3.0, 2.0, 2.5, 2.2, 0.1])
    task = LocalTask({}, torch.arange(4), (0.1,) * 5, (0, 3, 0, 0))
    last, epochs_run, mean = run_epochs(task, 2, lambda index, lr, order: next(losses))
    assert (last, epochs_run, mean) == (2.2, 4, (3.0 + 2.0 + 2.5 + 2.2) / 4)
