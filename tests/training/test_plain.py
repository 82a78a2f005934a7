"""The plain trainer's pieces: early stopping and the optimizer rule both trainers share."""

import pytest
import torch

from asyncfl.settings.random_streams import shuffle_key
from asyncfl.training.interface import (
    LocalSettings,
    LocalTask,
    epoch_permutations,
)
from asyncfl.training.plain import PlainTrainer
from training_cases import OFFSETS, client_tasks, make_case


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
