"""The server's test-set evaluation of the global model."""

import pytest
import torch

from asyncfl.evaluation import evaluate
from training_cases import make_case


def test_evaluate_counts_correct_predictions():
    model, images, labels, start = make_case("cnn", 1)
    loss, accuracy = evaluate(model, start, images, labels, batch_size=7)
    out = model(images)
    assert accuracy == pytest.approx((out.argmax(1) == labels).float().mean().item())
    assert loss == pytest.approx(torch.nn.functional.nll_loss(out, labels).item(), rel=1e-5)
