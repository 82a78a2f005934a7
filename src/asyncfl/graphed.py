"""The graphed trainer: each client's training step captured once in a CUDA graph and replayed.

On a GPU a paper-sized step is launch-bound (README "Speed"): replaying one captured graph per step
removes the per-kernel launch cost. Everything that changes between steps lives in static tensors
updated in place: the minibatch indices (the gather from the device-resident dataset happens in the
step), the learning rate, the optimizer's state (reset in place for every dispatch: fresh state per
dispatch, as `training.PlainTrainer`), the loss accumulator. The host synchronises once per epoch
(early stopping, the nan check). Each distinct batch size (the last, smaller batch of an epoch) has
its own static indices and, on CUDA, its own graph.

Clients of one call train on a pool of replicas (model, optimizer, static tensors), each on its own
CUDA stream; a replica resets everything at each dispatch, so a client's result does not depend on
which clients trained beside it. On the CPU the same step runs uncaptured with one replica, so the
tests check its logic against `PlainTrainer` (tests/test_graphed.py); capture and streams are only
exercised on CUDA.
"""

import contextlib
import copy
import math
import threading
from concurrent.futures import ThreadPoolExecutor

import torch
from torch import nn
from torch.nn import functional as F

from asyncfl.errors import InputError
from asyncfl.models import has_batchnorm
from asyncfl.numerics import Numerics
from asyncfl.training import EarlyStopping, LocalResult, LocalTask, epoch_permutations, uses_adam

CAPTURE_SECONDS = 120  # a capture that has not finished by then is reported, never waited on forever
STREAMS = 5  # replicas on their own CUDA streams; BatchNorm models use one (README "Speed")


class Replica:
    """One model copy with its optimizer and static tensors: trains one client at a time."""

    def __init__(self, model: nn.Module, images, labels, adam: bool, numerics: Numerics):
        self.model, self.images, self.labels, self.numerics = model, images, labels, numerics
        device = images.device
        parameters = list(model.parameters())
        self.lr = torch.zeros((), dtype=torch.float64, device=device)
        capturable = device.type == "cuda"
        self.optimizer = (
            torch.optim.Adam(parameters, lr=self.lr, capturable=capturable, foreach=capturable)
            if adam
            else torch.optim.SGD(parameters, lr=self.lr, foreach=capturable)
        )
        self.loss_sum = torch.zeros((), dtype=torch.float64, device=device)
        self.indices: dict[int, torch.Tensor] = {}  # static minibatch indices per batch size
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self.stream = torch.cuda.Stream(device) if capturable else None

    def step(self, size: int) -> None:
        """One optimizer step on the minibatch in `self.indices[size]`; adds loss × size to the sum."""
        batch = self.indices[size]
        self.optimizer.zero_grad(set_to_none=True)
        with self.numerics.autocast(batch.device):
            log_probabilities = self.model(self.numerics.layout(self.images[batch]))
        loss = F.nll_loss(log_probabilities.float(), self.labels[batch])
        loss.backward()
        self.optimizer.step()
        self.loss_sum.add_(loss.detach().double() * size)

    def run_step(self, batch: torch.Tensor) -> None:
        size = len(batch)
        if size not in self.indices:
            self.indices[size] = torch.empty_like(batch)
        self.indices[size].copy_(batch)
        if self.stream is None:
            self.step(size)
            return
        if size not in self.graphs:
            self.graphs[size] = self.capture(size)
        self.graphs[size].replay()

    def capture(self, size: int) -> "torch.cuda.CUDAGraph":
        """Warm up on the replica's stream (lazy optimizer state, cuBLAS workspaces), capture one step,
        and put back the state the warm-up changed, so the client in training is not disturbed. The
        capture runs in a thread given `CAPTURE_SECONDS`: the hazard seen on this hardware is a capture
        that hangs."""
        graph, failure = torch.cuda.CUDAGraph(), []
        saved = [value.clone() for value in self.state_tensors()]

        def record() -> None:
            try:
                with torch.cuda.stream(self.stream):
                    for _ in range(3):
                        self.step(size)
                    self.stream.synchronize()
                    with torch.cuda.graph(graph, stream=self.stream, capture_error_mode="thread_local"):
                        self.step(size)
            except Exception as error:  # reported below with the step's shape
                failure.append(error)

        worker = threading.Thread(target=record, daemon=True)
        worker.start()
        worker.join(CAPTURE_SECONDS)
        if worker.is_alive() or failure:
            reason = f"{failure[0]}" if failure else f"did not finish in {CAPTURE_SECONDS} s"
            raise InputError(f"CUDA graph capture of a batch of {size} failed ({reason}); use trainer: plain")
        current = self.state_tensors()
        with torch.no_grad(), torch.cuda.stream(self.stream):
            for value, before in zip(current, saved + [None] * (len(current) - len(saved)), strict=True):
                if before is None:  # optimizer state born in the warm-up: fresh, as at a dispatch
                    value.zero_()
                else:
                    value.copy_(before)
        return graph

    def state_tensors(self) -> list[torch.Tensor]:
        """What a step changes: the model's parameters and buffers, the optimizer state, the loss sum."""
        optimizer_state = [v for state in self.optimizer.state.values() for v in state.values()]
        return [*self.model.state_dict().values(), self.loss_sum, *optimizer_state]

    def reset(self, task: LocalTask) -> None:
        """Fresh client: the start model and a fresh optimizer state, written in place."""
        with torch.no_grad():
            for name, value in self.model.state_dict().items():
                value.copy_(task.start_state[name])
        for state in self.optimizer.state.values():
            for value in state.values():
                value.zero_()

    def train_one(self, task: LocalTask, batch_size: int, patience: int) -> LocalResult:
        self.reset(task)
        self.model.train()
        stopping, epoch_loss, epochs_run = EarlyStopping(patience), math.nan, 0
        with torch.cuda.stream(self.stream) if self.stream is not None else contextlib.nullcontext():
            for lr, order in zip(task.lrs, epoch_permutations(task), strict=True):
                self.lr.fill_(lr)
                self.loss_sum.zero_()
                for batch in order.split(batch_size):
                    self.run_step(batch)
                epoch_loss, epochs_run = self.loss_sum.item() / len(order), epochs_run + 1  # the epoch's one sync
                if not math.isfinite(epoch_loss) or stopping.should_stop(epoch_loss):
                    break
            state = {key: value.detach().clone() for key, value in self.model.state_dict().items()}
        return LocalResult(state, epoch_loss, epochs_run)


class GraphedTrainer:
    """Clients on a pool of replicas (one per CUDA stream; one on the CPU), each step a graph replay."""

    def __init__(self, model, images, labels, batch_size: int, optimizer: str, patience: int, numerics=Numerics()):
        model = numerics.prepare(model)
        cuda = images.device.type == "cuda"
        count = (1 if has_batchnorm(model) else STREAMS) if cuda else 1
        self.replicas = [
            Replica(copy.deepcopy(model), images, labels, uses_adam(optimizer), numerics) for _ in range(count)
        ]
        self.batch_size, self.patience = batch_size, patience

    def train(self, tasks: list[LocalTask]) -> list[LocalResult]:
        if len(self.replicas) == 1:
            return [self.replicas[0].train_one(task, self.batch_size, self.patience) for task in tasks]
        results: list[LocalResult | None] = [None] * len(tasks)

        def work(index: int) -> None:
            replica = self.replicas[index]
            for position in range(index, len(tasks), len(self.replicas)):
                results[position] = replica.train_one(tasks[position], self.batch_size, self.patience)

        with ThreadPoolExecutor(len(self.replicas)) as pool:
            list(pool.map(work, range(min(len(self.replicas), len(tasks)))))
        for replica in self.replicas:  # the server reads the results on the default stream
            torch.cuda.current_stream().wait_stream(replica.stream)
        return results
