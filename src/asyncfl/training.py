"""Local training of clients behind one small interface: a list of tasks in, a list of results out.

`PlainTrainer` trains one client after another with an ordinary model and optimizer;
it is the reference. `VectorisedTrainer` trains all the tasks it is given as one batch
(torch.func: `functional_call` + `vmap` + `grad` over stacked per-client parameters,
BatchNorm buffers and Adam state) and must agree with it. Every task carries all it
depends on (start state, data indices, learning rates, shuffle seed).
"""

import contextlib
import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, grad_and_value, vmap
from torch.nn import functional as F

from asyncfl.algorithms import State
from asyncfl.errors import InputError
from asyncfl.models import has_batchnorm


@dataclass(frozen=True)
class LocalTask:
    start_state: State  # the (possibly stale) global model the client starts from
    indices: torch.Tensor  # the client's training indices, on the device
    lrs: tuple[float, ...]  # learning rate of each local epoch (I of them)
    shuffle_seed: tuple[int, ...]  # the client's own stream: (run seed, stream, client, dispatch index)


@dataclass(frozen=True)
class LocalResult:
    state: State
    train_loss: float  # mean loss over the last epoch run (nan/inf if training diverged)
    epochs_run: int


class Trainer(Protocol):
    def train(self, tasks: list[LocalTask]) -> list[LocalResult]: ...


@dataclass(frozen=True)
class Numerics:
    """Optional speed knobs for the forward and backward passes; the defaults are plain IEEE fp32.

    `precision`: fp32, tf32 (CUDA matmuls and convolutions in TensorFloat-32) or bf16 (autocast:
    activations in bfloat16, parameters, optimizer state and BatchNorm statistics stay fp32).
    `channels_last`: NHWC images and weights, the layout that oneDNN and cuDNN convolve fastest.
    Every setting is deterministic; the non-default ones change the numbers, not the run-to-run identity.
    """

    precision: str = "fp32"
    channels_last: bool = False

    def apply_globally(self) -> None:
        """TF32 is a process-wide switch: off unless asked for (cuDNN convolutions default to TF32)."""
        mode = "tf32" if self.precision == "tf32" else "ieee"
        torch.backends.cuda.matmul.fp32_precision = mode
        torch.backends.cudnn.conv.fp32_precision = mode

    def autocast(self, device: torch.device) -> contextlib.AbstractContextManager:
        if self.precision != "bf16":
            return contextlib.nullcontext()
        return torch.autocast(device.type, dtype=torch.bfloat16)

    def layout(self, images: torch.Tensor) -> torch.Tensor:
        """A batch of images (N×C×H×W, or clients×N×C×H×W) in the chosen memory layout.

        A stacked batch is stored N, H, W, clients, C: the reshape that vmap's convolution rule
        makes into N × (clients·C) × H × W is then a view, and NHWC (channels_last) already.
        """
        if not self.channels_last:
            return images
        if images.dim() == 5:
            return images.permute(1, 3, 4, 0, 2).contiguous().permute(3, 0, 4, 1, 2)
        return images.contiguous(memory_format=torch.channels_last)

    def prepare(self, model: nn.Module) -> nn.Module:
        return model.to(memory_format=torch.channels_last) if self.channels_last else model


def epoch_permutations(task: LocalTask) -> list[torch.Tensor]:
    """The shuffled order of the client's samples for every local epoch, from the client's own stream."""
    rng = np.random.default_rng(task.shuffle_seed)
    n = len(task.indices)
    return [task.indices[torch.from_numpy(rng.permutation(n)).to(task.indices.device)] for _ in task.lrs]


def make_optimizer(name: str, parameters, lr: float) -> torch.optim.Optimizer:
    return torch.optim.Adam(parameters, lr=lr) if name == "adam" else torch.optim.SGD(parameters, lr=lr)


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


class PlainTrainer:
    """One client at a time, minibatch Adam/SGD over data already on the device."""

    def __init__(self, model: nn.Module, images: torch.Tensor, labels: torch.Tensor, batch_size: int,
                 optimizer: str, patience: int, numerics: Numerics = Numerics()):
        self.model, self.images, self.labels = numerics.prepare(model), images, labels
        self.batch_size, self.optimizer, self.patience, self.numerics = batch_size, optimizer, patience, numerics

    def train(self, tasks: list[LocalTask]) -> list[LocalResult]:
        return [self.train_one(task) for task in tasks]

    def train_one(self, task: LocalTask) -> LocalResult:
        model = self.model
        model.load_state_dict(task.start_state)
        model.train()
        optimizer = make_optimizer(self.optimizer, model.parameters(), task.lrs[0])  # fresh state per dispatch
        stopping = EarlyStopping(self.patience)
        epoch_loss, epochs_run = math.nan, 0
        for lr, order in zip(task.lrs, epoch_permutations(task)):
            for group in optimizer.param_groups:
                group["lr"] = lr
            total = torch.zeros((), dtype=torch.float64, device=order.device)
            for batch in order.split(self.batch_size):
                with self.numerics.autocast(order.device):
                    log_probabilities = model(self.numerics.layout(self.images[batch]))
                loss = F.nll_loss(log_probabilities.float(), self.labels[batch])
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                total += loss.detach().double() * len(batch)
            epoch_loss, epochs_run = (total / len(order)).item(), epochs_run + 1
            if not math.isfinite(epoch_loss) or stopping.should_stop(epoch_loss):
                break
        state = {key: value.detach().clone() for key, value in model.state_dict().items()}
        return LocalResult(state, epoch_loss, epochs_run)


ADAM_BETAS, ADAM_EPS = (0.9, 0.999), 1e-8  # torch.optim.Adam's defaults


class VectorisedTrainer:
    """All tasks in one batch: per-client parameters, buffers and optimizer state stacked on a leading axis.

    Clients step together. At each step the clients that still have a batch are grouped by
    that batch's size (every full batch is one group; a client's last, smaller batch may form
    another), so every client sees exactly the batches the plain trainer would, BatchNorm
    statistics included, with no padding. Clients whose epochs ran out, or that stopped
    early, simply drop out of the groups.

    Parameters and Adam moments live in flat clients × P matrices (the named parameters are
    views into them), so an optimizer step is a handful of whole-matrix operations whatever
    the model's depth, and a step in which every client takes part gathers and scatters nothing.
    """

    def __init__(self, model: nn.Module, images: torch.Tensor, labels: torch.Tensor, batch_size: int,
                 optimizer: str, patience: int, numerics: Numerics = Numerics()):
        if numerics.precision == "bf16" and has_batchnorm(model):
            raise InputError("precision bf16 with the vectorised trainer needs a model without BatchNorm (vmap's "
                             "batch-norm rule cannot mix bf16 activations with fp32 statistics); use trainer: plain "
                             "or precision fp32/tf32")
        self.model, self.images, self.labels = numerics.prepare(model), images, labels
        self.batch_size, self.optimizer, self.patience, self.numerics = batch_size, optimizer, patience, numerics
        self.shapes = {name: p.shape for name, p in model.named_parameters()}
        self.buffer_names = [name for name, _ in model.named_buffers()]
        self.step_group = vmap(grad_and_value(self.batch_loss, has_aux=True))

    def batch_loss(self, parameters: State, buffers: State, images: torch.Tensor, labels: torch.Tensor):
        """One client's minibatch loss; BatchNorm updates `buffers` in place, returned as aux."""
        with self.numerics.autocast(images.device):
            log_probabilities = functional_call(self.model, (parameters, buffers), (images,))
        return F.nll_loss(log_probabilities.float(), labels), buffers

    def flatten(self, states: list[State]) -> torch.Tensor:
        """The states' parameters as one clients × P matrix, in `self.shapes` order."""
        return torch.stack([torch.cat([state[name].reshape(-1) for name in self.shapes]) for state in states])

    def unflatten(self, flat: torch.Tensor) -> State:
        """Named views into the rows of a clients × P matrix (no copy)."""
        chunks = flat.split([shape.numel() for shape in self.shapes.values()], dim=1)
        return {name: chunk.view(len(flat), *shape) for (name, shape), chunk in zip(self.shapes.items(), chunks)}

    def train(self, tasks: list[LocalTask]) -> list[LocalResult]:
        self.model.train()
        device = self.images.device
        flat = self.flatten([task.start_state for task in tasks])
        buffers = stack_states(tasks, self.buffer_names)
        moments = (torch.zeros_like(flat), torch.zeros_like(flat))
        steps = torch.zeros(len(tasks), dtype=torch.float64, device=device)
        orders = [epoch_permutations(task) for task in tasks]
        sizes = [len(task.indices) for task in tasks]
        stopping = [EarlyStopping(self.patience) for _ in tasks]
        running = list(range(len(tasks)))
        losses, epochs_run = [math.nan] * len(tasks), [0] * len(tasks)
        for epoch in range(max(len(task.lrs) for task in tasks)):
            running = [c for c in running if epoch < len(tasks[c].lrs)]
            if not running:
                break
            longest = max(sizes)
            order = torch.stack([F.pad(orders[c][min(epoch, len(orders[c]) - 1)], (0, longest - sizes[c]))
                                 for c in range(len(tasks))])  # clients × longest, padding never read
            lrs = torch.tensor([task.lrs[min(epoch, len(task.lrs) - 1)] for task in tasks], dtype=torch.float64,
                               device=device)
            totals = torch.zeros(len(tasks), dtype=torch.float64, device=device)
            for start in range(0, max(sizes[c] for c in running), self.batch_size):
                groups = defaultdict(list)
                for c in running:
                    if start < sizes[c]:
                        groups[min(self.batch_size, sizes[c] - start)].append(c)
                for size, members in groups.items():
                    rows = None if len(members) == len(tasks) else torch.tensor(members, device=device)
                    loss = self.step(rows, order[take(rows)][:, start : start + size], lrs[take(rows)], flat,
                                     buffers, moments, steps)
                    totals[take(rows)] += loss.double() * size
            for c, total in zip(running, totals[running].tolist()):
                losses[c], epochs_run[c] = total / sizes[c], epoch + 1
            running = [c for c in running if math.isfinite(losses[c]) and not stopping[c].should_stop(losses[c])]
        parameters = self.unflatten(flat)
        return [LocalResult({**{n: parameters[n][c].clone() for n in parameters},
                             **{n: buffers[n][c].clone() for n in buffers}}, losses[c], epochs_run[c])
                for c in range(len(tasks))]

    @torch.no_grad()
    def step(self, rows: torch.Tensor | None, batch: torch.Tensor, lrs: torch.Tensor, flat: torch.Tensor,
             buffers: State, moments: tuple[torch.Tensor, torch.Tensor], steps: torch.Tensor) -> torch.Tensor:
        """One optimizer step for the clients in `rows` (None: all), each on its own minibatch; their losses."""
        parameters = flat[take(rows)]
        with torch.enable_grad():
            grads, (loss, new_buffers) = self.step_group(
                self.unflatten(parameters), {n: b[take(rows)] for n, b in buffers.items()},
                self.numerics.layout(self.images[batch]), self.labels[batch])
        for name, buffer in new_buffers.items():
            put(buffers[name], rows, buffer)
        grad = torch.cat([grads[name].flatten(1) for name in self.shapes], dim=1)
        if self.optimizer == "sgd":
            put(flat, rows, parameters - per_client(lrs, flat) * grad)
            return loss
        steps[take(rows)] += 1
        beta1, beta2 = ADAM_BETAS
        t = steps[take(rows)]
        step_size, correction2 = lrs / (1 - beta1**t), (1 - beta2**t).sqrt()
        m, v = (state[take(rows)] for state in moments)
        m.lerp_(grad, 1 - beta1)
        v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        denominator = v.sqrt() / per_client(correction2, v) + ADAM_EPS
        put(flat, rows, parameters - per_client(step_size, flat) * m / denominator)
        put(moments[0], rows, m)
        put(moments[1], rows, v)
        return loss


def trainer_class(name: str, device: torch.device) -> type[PlainTrainer] | type[VectorisedTrainer]:
    """`trainer: auto` is vectorised on CUDA and plain on the CPU, where oneDNN runs vmap's grouped
    convolutions slower than one client's plain ones (asyncfl bench)."""
    if name == "auto":
        name = "vectorised" if device.type == "cuda" else "plain"
    return VectorisedTrainer if name == "vectorised" else PlainTrainer


def take(rows: torch.Tensor | None) -> torch.Tensor | slice:
    """An index for the clients in `rows`; all of them (a view, no copy) when None."""
    return slice(None) if rows is None else rows


def put(target: torch.Tensor, rows: torch.Tensor | None, value: torch.Tensor) -> None:
    """Write `value` back to the clients' rows of `target` (nothing to do when it is already a view of them)."""
    if rows is None:
        if value.data_ptr() != target.data_ptr():
            target.copy_(value)
    else:
        target[rows] = value


def stack_states(tasks: list[LocalTask], names: list[str]) -> State:
    """Each entry of the tasks' start states stacked along a new leading client axis."""
    return {name: torch.stack([task.start_state[name] for task in tasks]) for name in names}


def per_client(values: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A per-client scalar shaped to broadcast over that client's slice of a stacked tensor."""
    return values.view(-1, *([1] * (like.dim() - 1))).to(like.dtype)


@torch.no_grad()
def evaluate(model: nn.Module, state: State, images: torch.Tensor, labels: torch.Tensor,
             batch_size: int = 1000) -> tuple[float, float]:
    """Test loss and accuracy of the global model (BatchNorm in eval mode: running statistics)."""
    model.load_state_dict(state)
    model.eval()
    loss, correct = torch.zeros((), dtype=torch.float64, device=images.device), torch.zeros((), dtype=torch.int64, device=images.device)
    for start in range(0, len(labels), batch_size):
        out = model(images[start : start + batch_size])
        target = labels[start : start + batch_size]
        loss += F.nll_loss(out, target, reduction="sum").double()
        correct += (out.argmax(dim=1) == target).sum()
    return loss.item() / len(labels), correct.item() / len(labels)
