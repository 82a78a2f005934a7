"""The graphed trainer: each client's training step captured once in a CUDA graph and replayed.

On a GPU a paper-sized step is launch-bound (docs/performance.md "Speed"): replaying one captured graph per step
removes the per-kernel launch cost. Everything that changes between steps lives in static tensors
updated in place: the minibatch indices (the gather from the device-resident dataset happens in the
step), the learning rate, the optimizer's state (reset in place for every dispatch: fresh state per
dispatch, as `plain.PlainTrainer`), the loss accumulator. The host synchronises once per epoch
(early stopping, the nan check). Each distinct batch size (the last, smaller batch of an epoch) has
its own static indices and, on CUDA, its own graph.

Clients of one call train on a pool of replicas (model, optimizer, static tensors), each on its own
CUDA stream; a replica resets everything at each dispatch, so a client's result does not depend on
which clients trained beside it. Three rules of CUDA and torch shape the code (docs/performance.md "Speed"):
torch allows one graph capture at a time in a process, so every graph a call needs is captured
before any replica trains, one after another; the replicas' streams do not wait for the server's
stream on their own, so they are made to, before training (the start states) and after (the
results); and nothing in a captured step may read a device value on the host, which rules out
SGD's foreach kernel (it reads a tensor learning rate with `.item()`). On the CPU the same step runs
uncaptured with one replica, so the tests check its logic against `PlainTrainer`
(tests/training/test_graphed.py); capture and streams are only exercised on CUDA.
"""

import contextlib
import copy
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import torch
from torch import nn

from asyncfl.settings.errors import InputError
from asyncfl.training.interface import LocalResult, LocalSettings, LocalTask, LocalTrainer, optimizer_step, run_epochs
from asyncfl.training.numerics import Numerics

if TYPE_CHECKING:
    from asyncfl.fl.strategy import Strategy
    from asyncfl.settings.config import TrainConfig

CAPTURE_SECONDS = 120  # a capture that has not finished by then is reported, never waited on forever
STREAMS = 5  # replicas on their own CUDA streams, BatchNorm models too (docs/performance.md "Speed")
WARMUP_STEPS = 3  # eager steps before a capture: lazy optimizer state, cuBLAS and cuDNN workspaces


def graphable_run(config: "TrainConfig", strategy: "Strategy") -> bool:
    """Whether a run's clients can train as captured steps: the step has no proximal term (FedProx's μ),
    keeps one optimizer for the whole dispatch and merges no fresher model mid-training (FedASMU's)."""
    return not config.prox_mu and not strategy.optimizer_per_epoch and not strategy.merges_fresh_model


def batch_sizes(client_sizes: list[int], batch_size: int) -> set[int]:
    """Every minibatch size the clients' epochs contain: the full size and each last, smaller batch."""
    return {size for n in client_sizes for size in (min(n, batch_size), n % batch_size) if size}


class Replica:
    """One model copy with its optimizer and static tensors: trains one client at a time."""

    def __init__(self, model: nn.Module, images: torch.Tensor, labels: torch.Tensor, adam: bool, numerics: Numerics):
        self.model, self.images, self.labels, self.numerics = model, images, labels, numerics
        device = images.device
        cuda = device.type == "cuda"
        parameters = list(model.parameters())
        # CPU: float64, as the plain trainer's Python-float lr; CUDA: float32, what the capturable
        # Adam and the fused SGD read on the device
        self.lr = torch.zeros((), dtype=torch.float32 if cuda else torch.float64, device=device)
        self.optimizer = (
            torch.optim.Adam(parameters, lr=self.lr, capturable=cuda, foreach=cuda, fused=not cuda)  # as make_optimizer
            if adam
            else torch.optim.SGD(parameters, lr=self.lr, foreach=False, fused=cuda)
        )
        self.loss_sum = torch.zeros((), dtype=torch.float64, device=device)
        self.indices: dict[int, torch.Tensor] = {}  # static minibatch indices per batch size
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self.stream = torch.cuda.Stream(device) if cuda else None

    def step(self, size: int) -> None:
        """One optimizer step on the minibatch in `self.indices[size]`; adds loss × size to the sum."""
        batch = self.indices[size]
        loss = optimizer_step(self.model, self.optimizer, self.images[batch], self.labels[batch], self.numerics)
        self.loss_sum.add_(loss.double() * size)

    def on_stream(self) -> contextlib.AbstractContextManager:
        """The replica's stream as the current one (CUDA); nothing on the CPU."""
        return torch.cuda.stream(self.stream) if self.stream is not None else contextlib.nullcontext()

    def prepare(self, sizes: set[int]) -> None:
        """Static indices for each batch size (index 0 until a batch is copied in) and, on CUDA, its graph.
        The indices are written on the replica's stream, which the warm-up and the replays read them on."""
        for size in sorted(sizes - self.indices.keys()):
            with self.on_stream():
                self.indices[size] = torch.zeros(size, dtype=torch.long, device=self.images.device)
            if self.stream is not None:
                self.graphs[size] = self.capture(size)

    def capture(self, size: int) -> "torch.cuda.CUDAGraph":
        """Warm up on the replica's stream, then capture one step. The warm-up changes the model and the
        optimizer state, which `reset` rewrites at the next dispatch. The capture runs in a thread
        given `CAPTURE_SECONDS`: the hazard seen on this hardware is a capture that hangs."""
        graph, failure = torch.cuda.CUDAGraph(), []

        def record() -> None:
            try:
                with self.on_stream():
                    for _ in range(WARMUP_STEPS):
                        self.step(size)
                    if self.stream is not None:
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
        return graph

    def run_step(self, batch: torch.Tensor) -> None:
        size = len(batch)
        self.indices[size].copy_(batch)
        if self.stream is None:
            self.step(size)
        else:
            self.graphs[size].replay()

    def reset(self, task: LocalTask) -> None:
        """Fresh client: the start model and a fresh optimizer state, written in place."""
        with torch.no_grad():
            for name, value in self.model.state_dict().items():
                value.copy_(task.start_model[name])
        for state in self.optimizer.state.values():
            for value in state.values():
                value.zero_()

    def train_one(self, task: LocalTask, batch_size: int, patience: int) -> LocalResult:
        self.reset(task)
        self.model.train()

        def epoch(index: int, lr: float, order: torch.Tensor) -> float:
            self.lr.fill_(lr)
            self.loss_sum.zero_()
            for batch in order.split(batch_size):
                self.run_step(batch)
            return self.loss_sum.item() / len(order)  # the epoch's one sync

        epoch_loss, epochs_run, mean_epoch_loss = run_epochs(task, patience, epoch)
        state = {key: value.detach().clone() for key, value in self.model.state_dict().items()}
        return LocalResult(state, epoch_loss, epochs_run, mean_epoch_loss)

    def train_all(self, tasks: list[LocalTask], batch_size: int, patience: int) -> list[LocalResult]:
        """The tasks one after another, on the replica's stream where it has one."""
        with self.on_stream():
            return [self.train_one(task, batch_size, patience) for task in tasks]


class GraphedTrainer(LocalTrainer):
    """Clients on a pool of replicas (one per CUDA stream; one on the CPU), each step a graph replay."""

    def __init__(self, model: nn.Module, images: torch.Tensor, labels: torch.Tensor, settings: LocalSettings):
        """Each replica trains its own copy of the model."""
        super().__init__(model, images, labels, settings)
        cuda = self.images.device.type == "cuda"
        count = STREAMS if cuda else 1
        self.replicas = [
            Replica(copy.deepcopy(self.model), self.images, self.labels, settings.adam, settings.numerics)
            for _ in range(count)
        ]

    def train(self, tasks: list[LocalTask]) -> list[LocalResult]:
        """Replica r trains tasks r, r + R, r + 2R, … (R replicas). Every replica allocation happens
        between the two stream waits, so a result the server frees is never reused by a replica
        before the server's reads of it are done."""
        streams = [replica.stream for replica in self.replicas if replica.stream is not None]
        server = torch.cuda.current_stream() if streams else None
        if server is not None:  # the start states were written on the server's stream
            for stream in streams:
                stream.wait_stream(server)
        batch_size, patience = self.settings.batch_size, self.settings.patience
        sizes = batch_sizes([len(task.indices) for task in tasks], batch_size)
        for replica in self.replicas:  # every capture before any training: one capture at a time
            replica.prepare(sizes)
        count = len(self.replicas)
        shares = [tasks[index::count] for index in range(count)]
        if count == 1:
            trained = [self.replicas[0].train_all(shares[0], batch_size, patience)]
        else:
            with ThreadPoolExecutor(len(self.replicas)) as pool:
                trained = list(
                    pool.map(lambda r, share: r.train_all(share, batch_size, patience), self.replicas, shares)
                )
        if server is not None:  # the server reads the results on its own stream
            for stream in streams:
                server.wait_stream(stream)
        return [trained[position % count][position // count] for position in range(len(tasks))]
