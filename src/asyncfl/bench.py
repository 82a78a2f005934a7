"""`asyncfl bench`: local-training speed of a reference-style loop, the plain and the vectorised trainer.

All three train the same clients on the same random tensors (speed does not depend on
the values) in one process. The reference loop is what the paper's public code does:
a DataLoader over a TensorDataset per client, clients one after another, the optimizer
created anew every epoch. A round is J clients × I epochs. The engine's own cost (event
loop, sampling, aggregation) is measured apart, with a trainer that does no work.
"""

import contextlib
import io
import resource
import time
from dataclasses import dataclass

import numpy as np
import torch
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.flop_counter import FlopCounterMode

from asyncfl.config import make_config
from asyncfl.data import Dataset, DatasetInfo
from asyncfl.models import build_model
from asyncfl.partition import Partition
from asyncfl.training import LocalResult, LocalTask, PlainTrainer, VectorisedTrainer


@dataclass(frozen=True)
class Case:
    name: str
    model: str
    shape: tuple[int, int, int]  # channels, height, width
    clients: int  # C
    per_round: int  # J
    samples: int  # per client
    batch_size: int
    epochs: int = 1


def cases(quick: bool) -> list[Case]:
    """(a) the paper's models, C = 10, J = 5; (b) many small clients. --quick shrinks the data, not the shapes."""
    per_client = 600 if quick else 6000
    return [
        Case("cnn-28x28", "cnn", (1, 28, 28), 10, 5, per_client, 64),
        Case("resnet20-32x32", "resnet20", (3, 32, 32), 10, 5, per_client // (3 if quick else 1), 64),
        Case("cnn-many-small", "cnn", (1, 28, 28), 1000, 50, 50, 10),
    ]


def reference_round(model, start, images, labels, clients, epochs, batch_size, device) -> None:
    """The paper code's loop: per-client DataLoader, sequential clients, optimizer re-created every epoch."""
    for indices in clients:
        model.load_state_dict(start)
        model.train()
        loader = DataLoader(TensorDataset(images[indices].cpu(), labels[indices].cpu()), batch_size=batch_size,
                            shuffle=True)
        for _ in range(epochs):
            optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
            for x, y in loader:
                x, y = x.to(device), y.to(device)
                optimizer.zero_grad()
                F.nll_loss(model(x), y).backward()
                optimizer.step()


def timed(run, device: torch.device, repeats: int) -> tuple[float, float]:
    """Median seconds of `repeats` runs after one warm-up, and peak memory in MiB."""
    run()
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        if device.type == "cuda":
            torch.cuda.synchronize()
        seconds.append(time.perf_counter() - start)
    if device.type == "cuda":
        peak = torch.cuda.max_memory_allocated() / 2**20
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # process peak so far
    return float(np.median(seconds)), peak


def flops_per_sample(model, shape, device) -> float:
    """Forward + backward FLOPs of one training sample, counted by torch on a batch of 8."""
    x = torch.randn(8, *shape, device=device)
    y = torch.zeros(8, dtype=torch.long, device=device)
    with FlopCounterMode(display=False) as counter:
        F.nll_loss(model(x), y).backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops() / 8


def bench_case(case: Case, device: torch.device, repeats: int) -> list[dict]:
    torch.manual_seed(0)
    channels, height, width = case.shape
    info = DatasetInfo(case.name, tuple(map(str, range(10))), channels, (height, width), (0.0,) * channels,
                       (1.0,) * channels, 255.0)
    model = build_model(case.model, info).to(device)
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    n = case.per_round * case.samples  # only the clients of one round need data
    images = torch.randn(n, *case.shape, device=device)
    labels = torch.randint(0, 10, (n,), device=device)
    clients = [torch.arange(c * case.samples, (c + 1) * case.samples, device=device) for c in range(case.per_round)]
    tasks = [LocalTask(start, idx, (1e-3,) * case.epochs, (0, 3, c, 0)) for c, idx in enumerate(clients)]
    trainers = {
        "reference loop": lambda: reference_round(model, start, images, labels, clients, case.epochs,
                                                  case.batch_size, device),
        "plain": lambda: PlainTrainer(model, images, labels, case.batch_size, "adam", 10).train(tasks),
        "vectorised": lambda: VectorisedTrainer(model, images, labels, case.batch_size, "adam", 10).train(tasks),
    }
    flops = flops_per_sample(model, case.shape, device) * n * case.epochs
    rows, reference = [], None
    for name, run in trainers.items():
        seconds, peak = timed(run, device, repeats)
        reference = reference or seconds
        rows.append({
            "case": case.name, "trainer": name, "device": str(device), "clients": case.clients,
            "clients_per_round": case.per_round, "samples_per_client": case.samples, "batch_size": case.batch_size,
            "local_epochs": case.epochs, "seconds_per_round": round(seconds, 4),
            "samples_per_second": round(n * case.epochs / seconds, 1), "speedup": round(reference / seconds, 2),
            "peak_memory_mib": round(peak, 1),
            "tflops": round(flops / seconds / 1e12, 3) if device.type == "cuda" else None,
        })
    return rows


class NullTrainer:
    """Returns every client's start state at once: what remains is the engine's own work."""

    def train(self, tasks: list[LocalTask]) -> list[LocalResult]:
        return [LocalResult(task.start_state, 0.0, 1) for task in tasks]


def engine_overhead(clients: int, per_round: int, rounds: int, out) -> dict:
    """Arrivals per second of the event loop, sampling and aggregation for `clients` clients, cnn-sized state."""
    from asyncfl.engine import Simulation

    info = DatasetInfo("engine", tuple(map(str, range(10))), 1, (8, 8), (0.0,), (1.0,), 255.0)
    n = clients * 2
    images = torch.zeros(n, 1, 8, 8, dtype=torch.uint8)
    labels = torch.arange(n) % 10
    dataset = Dataset(images, labels, images[:10], labels[:10], info)
    partition = Partition(np.arange(n, dtype=np.int64), np.arange(0, n + 1, 2, dtype=np.int64), "engine")
    config = make_config({"algorithm": "afl", "clients_per_round": per_round, "rounds": rounds, "local_epochs": 1,
                          "eval_every": rounds, "checkpoint_every": rounds, "device": "cpu"})
    simulation = Simulation(config, dataset, partition, out, trainer=NullTrainer())
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        simulation.run()
    seconds = time.perf_counter() - start
    arrivals = rounds * per_round
    return {"clients": clients, "clients_per_round": per_round, "rounds": rounds, "seconds": round(seconds, 3),
            "arrivals_per_second": round(arrivals / seconds, 1),
            "seconds_per_round": round(seconds / rounds, 5)}


def format_table(rows: list[dict]) -> str:
    columns = ("case", "trainer", "seconds_per_round", "samples_per_second", "speedup", "peak_memory_mib", "tflops")
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in columns}
    lines = ["  ".join(c.ljust(widths[c]) for c in columns)]
    lines += ["  ".join(str(r[c]).ljust(widths[c]) for c in columns) for r in rows]
    return "\n".join(lines)
