"""The server's test-set evaluation of the global model."""

import pytest
import torch

from asyncfl.training.evaluation import evaluate, training_gradient
from training_cases import make_case


def test_evaluate_counts_correct_predictions():
    model, images, labels, start = make_case("cnn", 1)
    loss, accuracy = evaluate(model, start, images, labels, batch_size=7)
    out = model(images)
    assert accuracy == pytest.approx((out.argmax(1) == labels).float().mean().item())
    assert loss == pytest.approx(torch.nn.functional.nll_loss(out, labels).item(), rel=1e-5)


def test_training_gradient_is_the_full_batch_gradient_of_the_mean_loss():
    """L and ‖∇L‖² over the given samples, batch by batch, equal one autograd pass over all of them at
    once; the model's own weights are left as they were."""
    model, images, labels, start = make_case("resnet20", 3)  # BatchNorm: buffers held, eval mode
    indices = torch.arange(10, 200)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    loss, squared = training_gradient(
        model, start, images, labels, indices
    )  # 190 samples: three batches and a remainder
    model.eval()
    reference = torch.nn.functional.nll_loss(model(images[indices]), labels[indices])
    grads = torch.autograd.grad(reference, list(model.parameters()))
    assert loss == pytest.approx(reference.item(), rel=1e-5)
    assert squared == pytest.approx(sum(float(g.double().square().sum()) for g in grads), rel=1e-4)
    assert squared > 0
    assert all(torch.equal(model.state_dict()[k], before[k]) for k in before)
