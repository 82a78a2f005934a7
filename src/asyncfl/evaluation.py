"""The server's view of the global model: loss and accuracy on the test set."""

import torch
from torch import nn
from torch.nn import functional as F

from asyncfl.algorithms import State


@torch.no_grad()
def evaluate(
    model: nn.Module, state: State, images: torch.Tensor, labels: torch.Tensor, batch_size: int = 1000
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
