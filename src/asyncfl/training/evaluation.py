"""The server's view of the global model: loss and accuracy on the test set, and the loss and its
gradient on the training set, the quantity the paper's convergence theorem bounds."""

import torch
from torch import nn
from torch.func import functional_call, grad_and_value
from torch.nn import functional as F

from asyncfl.models import ModelState

# Samples per forward/backward pass of the full-batch training gradient: the paper's training batch,
# fixed so that the metric's summation order (hence its bits) does not depend on the run's own batch
# size, and per-batch overhead stays small when a run trains with small batches.
GRADIENT_BATCH = 64


@torch.no_grad()
def evaluate(
    model: nn.Module, state: ModelState, images: torch.Tensor, labels: torch.Tensor, batch_size: int = 1000
) -> tuple[float, float]:
    """Test loss and accuracy of the global model (BatchNorm in eval mode: running statistics)."""
    model.load_state_dict(state)
    model.eval()
    loss, correct = (
        torch.zeros((), dtype=torch.float64, device=images.device),
        torch.zeros((), dtype=torch.int64, device=images.device),
    )
    for start in range(0, len(labels), batch_size):
        out = model(images[start : start + batch_size])
        target = labels[start : start + batch_size]
        loss += F.nll_loss(out, target, reduction="sum").double()
        correct += (out.argmax(dim=1) == target).sum()
    return loss.item() / len(labels), correct.item() / len(labels)


def training_gradient(
    model: nn.Module,
    state: ModelState,
    images: torch.Tensor,
    labels: torch.Tensor,
    indices: torch.Tensor,
) -> tuple[float, float]:
    """L(θ) and ‖∇L(θ)‖² of the global model over the training samples `indices`, where
    L = (1/n) Σ_i ℓ_i = Σ_c (n_c/n)·L_c, the n-weighted mean of the clients' objectives (Theorem 1's
    L). Full batch, in fp32 with BatchNorm in eval mode, as the model is tested; θ = the parameters
    (buffers are held fixed). A pure function of `state`: the model's own weights are not touched.
    Batches of `GRADIENT_BATCH`: on a CPU, larger ones run slower per sample (oneDNN's caches)."""
    model.eval()
    parameters = {name: state[name] for name, _ in model.named_parameters()}
    buffers = {name: state[name] for name, _ in model.named_buffers()}

    def summed_loss(params: ModelState, batch: torch.Tensor) -> torch.Tensor:
        out = functional_call(model, (params, buffers), (images[batch],))
        return F.nll_loss(out.float(), labels[batch], reduction="sum")

    step = grad_and_value(summed_loss)
    total = torch.zeros((), dtype=torch.float64, device=images.device)
    gradient = {name: torch.zeros_like(value, dtype=torch.float64) for name, value in parameters.items()}
    for batch in indices.split(GRADIENT_BATCH):
        grads, loss = step(parameters, batch)
        total += loss.double()
        for name, value in grads.items():
            gradient[name] += value.double()
    n = len(indices)
    squared = sum((value / n).square().sum() for value in gradient.values())
    return total.item() / n, float(squared)
