"""The vectorised trainer: every task of a call trained as one batch with torch.func.

`functional_call` + `vmap` + `grad` over stacked per-client parameters, BatchNorm buffers and
Adam state; it must agree with `plain.PlainTrainer`, the reference (tests/training/test_vectorised.py).
"""

import math
from collections import defaultdict

import torch
from torch.func import functional_call, grad_and_value, vmap
from torch.nn import functional as F

from asyncfl.models import ModelState
from asyncfl.training.interface import (
    EarlyStopping,
    LocalResult,
    LocalSettings,
    LocalTask,
    LocalTrainer,
    Merge,
    epoch_permutations,
    merge_into,
    minibatch_loss,
)

ADAM_BETAS, ADAM_EPS = (0.9, 0.999), 1e-8  # torch.optim.Adam's defaults


class VectorisedTrainer(LocalTrainer):
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

    def __init__(self, model: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor, settings: LocalSettings):
        """bf16 with a BatchNorm model cannot run under vmap: `checks.check_run` refuses it for runs."""
        super().__init__(model, images, labels, settings)
        self.shapes = {name: p.shape for name, p in self.model.named_parameters()}
        self.buffer_names = [name for name, _ in self.model.named_buffers()]
        self.step_group = vmap(grad_and_value(self.batch_loss, has_aux=True))

    def batch_loss(
        self, parameters: ModelState, buffers: ModelState, images: torch.Tensor, labels: torch.Tensor
    ) -> tuple[torch.Tensor, ModelState]:
        """One client's minibatch loss; BatchNorm updates `buffers` in place, returned as aux."""

        def forward(batch: torch.Tensor) -> torch.Tensor:
            return functional_call(self.model, (parameters, buffers), (batch,))

        return minibatch_loss(forward, images, labels, self.settings.numerics), buffers

    def flatten(self, states: list[ModelState]) -> torch.Tensor:
        """The states' parameters as one clients × P matrix, in `self.shapes` order."""
        return torch.stack([torch.cat([state[name].reshape(-1) for name in self.shapes]) for state in states])

    def unflatten(self, flat: torch.Tensor) -> ModelState:
        """Named views into the rows of a clients × P matrix (no copy)."""
        chunks = flat.split([shape.numel() for shape in self.shapes.values()], dim=1)
        return {
            name: chunk.view(len(flat), *shape)
            for (name, shape), chunk in zip(self.shapes.items(), chunks, strict=True)
        }

    def train(self, tasks: list[LocalTask]) -> list[LocalResult]:
        self.model.train()
        flat = self.flatten([task.start_model for task in tasks])
        stack = Stack(flat, stack_states(tasks, self.buffer_names), Proximal.of(tasks, flat))
        stack.merges = [task.merge for task in tasks]
        stack.merging = any(stack.merges)  # asked once a call, not at every step
        orders = [epoch_permutations(task) for task in tasks]
        stopping = [EarlyStopping(self.settings.patience) for _ in tasks]
        running = list(range(len(tasks)))
        losses, epochs_run, loss_sums = [math.nan] * len(tasks), [0] * len(tasks), [0.0] * len(tasks)
        for epoch in range(max(len(task.lrs) for task in tasks)):
            running = [c for c in running if epoch < len(tasks[c].lrs)]
            if not running:
                break
            fresh = [c for c in running if epoch and tasks[c].optimizer_per_epoch]
            if fresh:  # a fresh optimizer for these clients' epoch: no moments, step count 0
                for state in (*stack.moments, stack.steps):
                    state[fresh] = 0
            order = [order[min(epoch, len(order) - 1)] for order in orders]
            lrs = [task.lrs[min(epoch, len(task.lrs) - 1)] for task in tasks]
            totals = self.train_epoch(stack, order, lrs, running)
            for c, total in zip(running, totals[running].tolist(), strict=True):
                losses[c], epochs_run[c] = total / len(order[c]), epoch + 1
                loss_sums[c] += losses[c]
            running = [c for c in running if math.isfinite(losses[c]) and not stopping[c].should_stop(losses[c])]
        means = [total / count if count else math.nan for total, count in zip(loss_sums, epochs_run, strict=True)]
        return unstack_results(self.unflatten(stack.flat), stack.buffers, losses, epochs_run, means)

    def train_epoch(
        self, stack: "Stack", orders: list[torch.Tensor], lrs: list[float], running: list[int]
    ) -> torch.Tensor:
        """One epoch of the `running` clients, each over its own sample order at its own rate; every
        client's summed loss × batch size (zero for the others)."""
        device, batch_size = self.images.device, self.settings.batch_size
        sizes = [len(order) for order in orders]
        longest = max(sizes)
        order = torch.stack([F.pad(o, (0, longest - len(o))) for o in orders])  # clients × longest, padding never read
        rates = torch.tensor(lrs, dtype=torch.float64, device=device)
        totals = torch.zeros(len(orders), dtype=torch.float64, device=device)
        for start in range(0, max(sizes[c] for c in running), batch_size):
            groups = defaultdict(list)
            for c in running:
                if start < sizes[c]:
                    groups[min(batch_size, sizes[c] - start)].append(c)
            for size, members in groups.items():
                rows = None if len(members) == len(orders) else torch.tensor(members, device=device)
                loss = self.step(stack, rows, order[take(rows)][:, start : start + size], rates[take(rows)])
                totals[take(rows)] += loss.double() * size
            for c in running if stack.merging else ():
                if start < sizes[c]:
                    self.count_step(stack, c)
        return totals

    def count_step(self, stack: "Stack", c: int) -> None:
        """Client `c` took a local step; its merge (`LocalTask.merge`) follows its `after_steps`-th, on its
        rows alone, by the formula every trainer merges with."""
        stack.taken[c] += 1
        merge = stack.merges[c]
        if merge is not None and stack.taken[c] == merge.after_steps:
            rows = {**self.unflatten(stack.flat[c : c + 1]), **{n: b[c : c + 1] for n, b in stack.buffers.items()}}
            merge_into(rows, merge)

    @torch.no_grad()
    def step(self, stack: "Stack", rows: torch.Tensor | None, batch: torch.Tensor, lrs: torch.Tensor) -> torch.Tensor:
        """One optimizer step for the clients in `rows` (None: all), each on its own minibatch; their losses."""
        parameters = stack.flat[take(rows)]
        with torch.enable_grad():
            grads, (loss, new_buffers) = self.step_group(
                self.unflatten(parameters),
                {n: b[take(rows)] for n, b in stack.buffers.items()},
                self.settings.numerics.layout(self.images[batch]),
                self.labels[batch],
            )
        for name, buffer in new_buffers.items():
            put(stack.buffers[name], rows, buffer)
        grad = torch.cat([grads[name].flatten(1) for name in self.shapes], dim=1)
        if stack.proximal is not None:
            grad = stack.proximal.add_gradient(grad, parameters, rows)
        if not self.settings.adam:
            put(stack.flat, rows, parameters - per_client(lrs, stack.flat) * grad)
            return loss
        stack.steps[take(rows)] += 1
        m, v = (state[take(rows)] for state in stack.moments)
        put(stack.flat, rows, adam_step(parameters, grad, m, v, stack.steps[take(rows)], lrs))
        put(stack.moments[0], rows, m)
        put(stack.moments[1], rows, v)
        return loss


class Stack:
    """The clients of one call, stacked on a leading axis: parameters (clients × P), BatchNorm buffers,
    Adam's moments and step counts (fresh: zero), and the proximal terms if any."""

    def __init__(self, flat: torch.Tensor, buffers: ModelState, proximal: "Proximal | None"):
        self.flat, self.buffers, self.proximal = flat, buffers, proximal
        self.moments = (torch.zeros_like(flat), torch.zeros_like(flat))
        self.steps = torch.zeros(len(flat), dtype=torch.float64, device=flat.device)
        self.taken = [0] * len(flat)  # local steps so far, per client (SGD counts none in `steps`)
        self.merges: list[Merge | None] = [None] * len(flat)  # each client's mid-training merge, if any
        self.merging = False  # any of them merges


class Proximal:
    """FedProx's μ/2‖θ − θ_start‖² for stacked clients: its gradient μ·(θ − θ_start), added to the data
    loss's gradient (the logged loss stays the data loss, as in `plain.PlainTrainer`)."""

    def __init__(self, mu: torch.Tensor, anchor: torch.Tensor):
        self.mu, self.anchor = mu, anchor  # per client; clients × P start parameters

    @classmethod
    def of(cls, tasks: list[LocalTask], flat: torch.Tensor) -> "Proximal | None":
        """The tasks' proximal terms, or None when no task has one."""
        if not any(task.prox_mu for task in tasks):
            return None
        mu = torch.tensor([task.prox_mu for task in tasks], dtype=flat.dtype, device=flat.device)
        return cls(mu, flat.clone())

    def add_gradient(self, grad: torch.Tensor, parameters: torch.Tensor, rows: torch.Tensor | None) -> torch.Tensor:
        return grad + per_client(self.mu[take(rows)], grad) * (parameters - self.anchor[take(rows)])


def adam_step(
    parameters: torch.Tensor, grad: torch.Tensor, m: torch.Tensor, v: torch.Tensor, t: torch.Tensor, lrs: torch.Tensor
) -> torch.Tensor:
    """torch.optim.Adam's update (default betas and eps) of clients × P rows, each with its own step count t
    and learning rate; updates the moments m and v in place and returns the new parameters."""
    beta1, beta2 = ADAM_BETAS
    step_size, correction2 = lrs / (1 - beta1**t), (1 - beta2**t).sqrt()
    m.lerp_(grad, 1 - beta1)
    v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    denominator = v.sqrt() / per_client(correction2, v) + ADAM_EPS
    return parameters - per_client(step_size, parameters) * m / denominator


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


def unstack_results(
    parameters: ModelState, buffers: ModelState, losses: list[float], epochs_run: list[int], means: list[float]
) -> list[LocalResult]:
    """One result per client from the stacked parameters and buffers (copies: the stacks are reused)."""
    return [
        LocalResult(
            {**{n: parameters[n][c].clone() for n in parameters}, **{n: buffers[n][c].clone() for n in buffers}},
            losses[c],
            epochs_run[c],
            means[c],
        )
        for c in range(len(losses))
    ]


def stack_states(tasks: list[LocalTask], names: list[str]) -> ModelState:
    """Each entry of the tasks' start states stacked along a new leading client axis."""
    return {name: torch.stack([task.start_model[name] for task in tasks]) for name in names}


def per_client(values: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A per-client scalar shaped to broadcast over that client's slice of a stacked tensor."""
    return values.view(-1, *([1] * (like.dim() - 1))).to(like.dtype)
