"""Local training of clients behind one small interface: a list of tasks in, a list of results out.

`PlainTrainer` trains one client after another with an ordinary model and optimizer; it is the
reference that `vectorised.VectorisedTrainer` must agree with. Every task carries all it depends
on (start state, data indices, learning rates, shuffle seed), so a client's result never depends
on which other clients trained beside it.
"""

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, cast

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from asyncfl.fl.aggregation import State
from asyncfl.spec.names import OPTIMIZERS
from asyncfl.training.numerics import Numerics


@dataclass(frozen=True)
class LocalTask:
    start_state: State  # the (possibly stale) global model the client starts from
    indices: torch.Tensor  # the client's training indices, on the device
    lrs: tuple[float, ...]  # learning rate of each local epoch (I of them)
    shuffle_seed: tuple[int, ...]  # the client's own stream: (run seed, stream, client, dispatch index)
    prox_mu: float = 0.0  # FedProx's μ: the objective is the data loss + μ/2‖θ − θ_start‖²
    optimizer_per_epoch: bool = False  # a fresh optimizer every local epoch, not only every dispatch


@dataclass(frozen=True)
class LocalResult:
    state: State
    train_loss: float  # mean loss over the last epoch run (nan/inf if training diverged)
    epochs_run: int


class Trainer(Protocol):
    def train(self, tasks: list[LocalTask]) -> list[LocalResult]: ...


def epoch_permutations(task: LocalTask) -> list[torch.Tensor]:
    """The shuffled order of the client's samples for every local epoch, from the client's own stream."""
    rng = np.random.default_rng(task.shuffle_seed)
    n = len(task.indices)
    return [task.indices[torch.from_numpy(rng.permutation(n)).to(task.indices.device)] for _ in task.lrs]


def uses_adam(optimizer: str) -> bool:
    """The one optimizer-name rule of both trainers: adam or sgd, nothing else."""
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; choose one of {', '.join(OPTIMIZERS)}")
    return optimizer == "adam"


def make_optimizer(name: str, parameters: Iterable[torch.Tensor], lr: float) -> torch.optim.Optimizer:
    return torch.optim.Adam(parameters, lr=lr) if uses_adam(name) else torch.optim.SGD(parameters, lr=lr)


def proximal_term(model: nn.Module, anchor: list[torch.Tensor], mu: float) -> torch.Tensor:
    """FedProx's μ/2‖θ − θ_start‖² over the model's parameters (`anchor`: θ_start, in parameter order).
    Only the gradient sees it: the logged training loss stays the data loss."""
    return cast(
        torch.Tensor, mu / 2 * sum(((p - a) ** 2).sum() for p, a in zip(model.parameters(), anchor, strict=True))
    )


class EarlyStopping:
    """Stop after `patience` epochs without a new best epoch loss (never fires when I ≤ patience)."""

    def __init__(self, patience: int):
        self.patience, self.best, self.bad_epochs = patience, math.inf, 0

    def should_stop(self, loss: float) -> bool:
        if loss < self.best:
            self.best, self.bad_epochs = loss, 0
        else:
            self.bad_epochs += 1
        return self.bad_epochs >= self.patience


class LocalTrainer(ABC):
    """What every trainer holds: the model in the chosen memory layout, the training set already on the
    device, and the local-training settings. The optimizer name is checked here, once, for all of them."""

    def __init__(
        self,
        model: nn.Module,
        images: torch.Tensor,
        labels: torch.Tensor,
        batch_size: int,
        optimizer: str,
        patience: int,
        numerics: Numerics = Numerics(),
    ):
        uses_adam(optimizer)
        self.model, self.images, self.labels = numerics.prepare(model), images, labels
        self.batch_size, self.optimizer, self.patience, self.numerics = batch_size, optimizer, patience, numerics

    @abstractmethod
    def train(self, tasks: list[LocalTask]) -> list[LocalResult]:
        """Each task's local training, in the order given."""


class PlainTrainer(LocalTrainer):
    """One client at a time, minibatch Adam/SGD over data already on the device."""

    def train(self, tasks: list[LocalTask]) -> list[LocalResult]:
        return [self.train_one(task) for task in tasks]

    def train_one(self, task: LocalTask) -> LocalResult:
        model = self.model
        model.load_state_dict(task.start_state)
        model.train()
        optimizer = make_optimizer(self.optimizer, model.parameters(), task.lrs[0])  # fresh state per dispatch
        stopping = EarlyStopping(self.patience)
        epoch_loss, epochs_run = math.nan, 0
        anchor = [task.start_state[name] for name, _ in model.named_parameters()] if task.prox_mu else []
        for lr, order in zip(task.lrs, epoch_permutations(task), strict=True):
            if task.optimizer_per_epoch and epochs_run:
                optimizer = make_optimizer(self.optimizer, model.parameters(), lr)
            for group in optimizer.param_groups:
                group["lr"] = lr
            total = torch.zeros((), dtype=torch.float64, device=order.device)
            for batch in order.split(self.batch_size):
                with self.numerics.autocast(order.device):
                    log_probabilities = model(self.numerics.layout(self.images[batch]))
                loss = F.nll_loss(log_probabilities.float(), self.labels[batch])
                optimizer.zero_grad(set_to_none=True)
                (loss + proximal_term(model, anchor, task.prox_mu) if anchor else loss).backward()
                optimizer.step()
                total += loss.detach().double() * len(batch)
            epoch_loss, epochs_run = (total / len(order)).item(), epochs_run + 1
            if not math.isfinite(epoch_loss) or stopping.should_stop(epoch_loss):
                break
        state = {key: value.detach().clone() for key, value in model.state_dict().items()}
        return LocalResult(state, epoch_loss, epochs_run)
