"""What every trainer shares: the task and result types, the local-training settings, the epoch loop
with early stopping and the optimizer step.

A trainer takes a list of tasks and returns a list of results. Every task carries all it depends
on (start state, data indices, learning rates, shuffle seed), so a client's result never depends
on which other clients trained beside it. `plain.PlainTrainer` is the reference the others must
agree with.
"""

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from asyncfl.models import ModelState
from asyncfl.settings.config import TrainConfig
from asyncfl.settings.names import OPTIMIZERS
from asyncfl.training.numerics import Numerics


@dataclass(frozen=True)
class Merge:
    """A fresher global model merged into the client's own mid-training (FedASMU's device side):
    after `after_steps` local steps, θ ← θ + β·(θ_fresh − θ) over the floating entries."""

    after_steps: int  # local steps taken before the merge (1 or more)
    model: ModelState  # θ_fresh: the global model when the client asked for it
    weight: float  # β


@dataclass(frozen=True)
class LocalTask:
    start_model: ModelState  # the (possibly stale) global model the client starts from
    indices: torch.Tensor  # the client's training indices, on the device
    lrs: tuple[float, ...]  # learning rate of each local epoch (I of them)
    shuffle_seed: tuple[int, ...]  # the client's own stream: (run seed, stream, client, dispatch index)
    prox_mu: float = 0.0  # FedProx's μ: the objective is the data loss + μ/2‖θ − θ_start‖²
    optimizer_per_epoch: bool = False  # a fresh optimizer every local epoch, not only every dispatch
    samples: int | None = None  # train only the first this many samples of its epochs' orders (None: all)
    merge: Merge | None = None  # a fresher global model merged in mid-training (None: none)


@dataclass(frozen=True)
class LocalResult:
    state: ModelState
    train_loss: float  # mean loss over the last epoch run (nan/inf if training diverged)
    epochs_run: int
    # the mean of the epochs' losses: what the paper's reference code logs of a client's dispatch
    mean_epoch_loss: float = math.nan


def merge_into(entries: ModelState, merge: Merge) -> None:
    """θ ← θ + β·(θ_fresh − θ) in place, over the floating entries of `entries` (parameters and BatchNorm's
    statistics; integer counts kept). Every trainer merges with this one formula, a product and then a sum (no
    fused multiply-add, whose use depends on where an entry falls in a vectorised loop), so they agree bit for bit."""
    with torch.no_grad():
        for name, value in entries.items():
            if value.is_floating_point():
                value.add_((merge.model[name].to(value.device, value.dtype) - value).mul_(merge.weight))


def uses_adam(optimizer: str) -> bool:
    """The one optimizer-name rule of every trainer: adam or sgd, nothing else."""
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; choose one of {', '.join(OPTIMIZERS)}")
    return optimizer == "adam"


@dataclass(frozen=True)
class LocalSettings:
    """How every client trains, whichever trainer runs it.

    Attributes:
        batch_size: minibatch size (config `batch_size`; the paper: 64).
        optimizer: "adam" (the paper) or "sgd" (config `optimizer`).
        patience: epochs without a new best epoch loss before a client stops early (config `patience`).
        numerics: precision and memory layout (config `precision`, `channels_last`).
    """

    batch_size: int = 64
    optimizer: str = "adam"
    patience: int = 10
    numerics: Numerics = Numerics()

    def __post_init__(self) -> None:
        uses_adam(self.optimizer)

    @property
    def adam(self) -> bool:
        return uses_adam(self.optimizer)

    @classmethod
    def of(cls, config: TrainConfig) -> "LocalSettings":
        numerics = Numerics(config.precision, config.channels_last)
        return cls(config.batch_size, config.optimizer, config.patience, numerics)


class Trainer(Protocol):
    """What the engine calls to train clients (the bench's engine-only measure passes one that does no work)."""

    def train(self, tasks: list[LocalTask]) -> list[LocalResult]: ...


class TrainerPool(Protocol):
    """Where runs stepped together in one process share one trainer per kind (`sim.lockstep.Lockstep`):
    `port` gives a run, in place of its own trainer, one whose calls join the other runs' of its kind."""

    def port(self, trainer: Trainer, key: Hashable) -> Trainer: ...


class LocalTrainer(ABC):
    """What every real trainer holds: the model in the chosen memory layout, the training set already on
    the device, and the `LocalSettings`."""

    def __init__(self, model: nn.Module, images: torch.Tensor, labels: torch.Tensor, settings: LocalSettings):
        self.model, self.images, self.labels = settings.numerics.prepare(model), images, labels
        self.settings = settings

    @abstractmethod
    def train(self, tasks: list[LocalTask]) -> list[LocalResult]:
        """Each task's local training, in the order given."""


def epoch_permutations(task: LocalTask) -> list[torch.Tensor]:
    """The shuffled order of the client's samples for every local epoch, from the client's own stream;
    with `task.samples`, cut after that many (partial work: the steps that fit before a deadline, so
    every trainer trains exactly those, each epoch's order the one the whole dispatch would train)."""
    rng = np.random.default_rng(task.shuffle_seed)
    n = len(task.indices)
    orders = [task.indices[torch.from_numpy(rng.permutation(n)).to(task.indices.device)] for _ in task.lrs]
    if task.samples is None:
        return orders
    return [order[: task.samples - epoch * n] for epoch, order in enumerate(orders)]


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


def run_epochs(
    task: LocalTask, patience: int, epoch: Callable[[int, float, torch.Tensor], float]
) -> tuple[float, int, float]:
    """The local epochs of one client's dispatch, for the trainers that train one client at a time.

    `epoch(index, lr, order)` trains one epoch over the samples in `order` at rate `lr` and returns its
    mean loss. The loop stops at a nan or inf loss or by `EarlyStopping`; it returns the last epoch's
    loss, the number of epochs run and the mean of their losses.
    """
    stopping, losses = EarlyStopping(patience), list[float]()
    for lr, order in zip(task.lrs, epoch_permutations(task), strict=True):
        losses.append(epoch(len(losses), lr, order))
        if not math.isfinite(losses[-1]) or stopping.should_stop(losses[-1]):
            break
    return (losses[-1], len(losses), sum(losses) / len(losses)) if losses else (math.nan, 0, math.nan)


def minibatch_loss(
    forward: Callable[[torch.Tensor], torch.Tensor], images: torch.Tensor, labels: torch.Tensor, numerics: Numerics
) -> torch.Tensor:
    """The minibatch's mean negative log-likelihood: the forward pass under the numerics' autocast (the
    images already in its layout), the loss in fp32."""
    with numerics.autocast(images.device):
        log_probabilities = forward(images)
    return F.nll_loss(log_probabilities.float(), labels)


def optimizer_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    images: torch.Tensor,
    labels: torch.Tensor,
    numerics: Numerics,
    penalty: Callable[[], torch.Tensor] | None = None,
) -> torch.Tensor:
    """One step on a minibatch; `penalty` (FedProx's term) adds to the gradient, not to the returned loss."""
    optimizer.zero_grad(set_to_none=True)
    loss = minibatch_loss(model, numerics.layout(images), labels, numerics)
    (loss + penalty() if penalty is not None else loss).backward()
    optimizer.step()
    return loss.detach()


def make_optimizer(name: str, parameters: Iterable[torch.Tensor], lr: float | torch.Tensor) -> torch.optim.Optimizer:
    """Adam or SGD over `parameters`. On the CPU, Adam is torch's fused kernel (one per parameter
    instead of a loop of six tensor operations): the same update, 1.4× faster a step for the MLP, whose
    steps are dispatch overhead (docs/performance.md "The quick pipeline, measured"); on CUDA, torch's
    default, which the CUDA tolerances were measured against."""
    parameters = list(parameters)
    if not uses_adam(name):
        return torch.optim.SGD(parameters, lr=lr)
    return torch.optim.Adam(parameters, lr=lr, fused=True if parameters[0].device.type == "cpu" else None)
