"""`asyncfl bench`: local-training speed of a reference-style loop, the plain and the vectorised trainer.

All of them (and the device's default trainer once more, with its speed knobs) train the
same clients on the same random tensors (speed does not depend on the values) in one
process. The reference loop is what the paper's public code does: a DataLoader over a
TensorDataset per client, clients one after another, the optimizer created anew every
epoch. A round is J clients × I epochs. The engine's own cost (event
loop, sampling, aggregation) is measured apart, with a trainer that does no work.
"""

import copy
import resource
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.flop_counter import FlopCounterMode

from asyncfl.bench.paper_round import format_paper_rounds, paper_round_bench
from asyncfl.bench.scale import QUICK_SCALES, SCALES, engine_scale
from asyncfl.bench.synthetic import engine_overhead
from asyncfl.data.dataset import DatasetInfo
from asyncfl.models import ModelState, build_model
from asyncfl.settings.random_streams import shuffle_key
from asyncfl.training.graphed import GraphedTrainer
from asyncfl.training.interface import LocalSettings, LocalTask
from asyncfl.training.numerics import Numerics
from asyncfl.training.plain import PlainTrainer
from asyncfl.training.runtime import choose_device, trainer_class, trainer_name
from asyncfl.training.vectorised import VectorisedTrainer


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
    return [
        Case("cnn-28x28", "cnn", (1, 28, 28), 10, 5, 192 if quick else 6000, 64),
        Case("resnet20-32x32", "resnet20", (3, 32, 32), 10, 5, 64 if quick else 6000, 64),
        Case("cnn-many-small", "cnn", (1, 28, 28), 1000, 50, 20 if quick else 50, 10),
    ]


def reference_round(
    model: nn.Module,
    start: ModelState,
    images: torch.Tensor,
    labels: torch.Tensor,
    clients: list[torch.Tensor],
    epochs: int,
    batch_size: int,
    device: torch.device,
) -> None:
    """The paper code's loop: per-client DataLoader, sequential clients, optimizer re-created every epoch."""
    for indices in clients:
        model.load_state_dict(start)
        model.train()
        loader = DataLoader(
            TensorDataset(images[indices].cpu(), labels[indices].cpu()), batch_size=batch_size, shuffle=True
        )
        for _ in range(epochs):
            optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
            for x, y in loader:
                x, y = x.to(device), y.to(device)
                optimizer.zero_grad()
                F.nll_loss(model(x), y).backward()
                optimizer.step()


def cpu_precision(capability: str) -> str:
    """bf16 where torch runs AVX-512 kernels, fp32 elsewhere. oneDNN's bf16 convolutions ran 1.5× faster
    than fp32 on the AVX-512 machine of the README's table, and 10–14× slower on an AVX2-only one, which
    emulates them (docs/performance.md "Speed")."""
    return "bf16" if capability.startswith("AVX512") else "fp32"


def fast_numerics(device: torch.device, capability: str | None = None) -> tuple[str, Numerics]:
    """The default trainer of the device with the speed knobs that suit it, for the knobs' row.

    CPU (plain): NHWC, oneDNN's fastest layout, with bf16 autocast where the CPU runs it at speed
    (`capability`: torch's, by default). CUDA (graphed): bf16 autocast, NCHW (NHWC ran resnet20's
    captured step 1.2× slower on one H100, docs/gpu.md "On a GPU").
    """
    name = trainer_name("auto", device)
    if name == "plain":
        precision = cpu_precision(capability or torch.backends.cpu.get_cpu_capability())
        return name, Numerics(precision, channels_last=True)
    return name, Numerics("bf16")


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def timed(
    runs: dict[str, Callable[[], object]], device: torch.device, repeats: int
) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Seconds of each run and its peak memory in MiB. Repeats are interleaved (A B C A B C …) after
    one warm-up of each, so that a machine whose speed drifts (shared or throttled CPUs) biases none."""
    for run in runs.values():
        run()
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    peaks = {name: 0.0 for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            synchronize(device)
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
            start = time.perf_counter()
            run()
            synchronize(device)
            seconds[name].append(time.perf_counter() - start)
            peaks[name] = max(peaks[name], peak_memory_mib(device))
    return seconds, peaks


def peak_memory_mib(device: torch.device) -> float:
    """Peak device memory since the last reset on CUDA; on the CPU the process's peak resident size so far."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def matmul_tflops(device: torch.device) -> float:
    """The device's fp32 (IEEE) matrix-multiply rate: the yardstick for the trainers' TFLOP/s."""
    Numerics().apply_globally()
    n = 8192 if device.type == "cuda" else 2048
    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
    best = min(timed({"matmul": lambda: a @ b}, device, repeats=3)[0]["matmul"])
    return 2 * n**3 / best / 1e12


def flops_per_sample(model: nn.Module, shape: tuple[int, ...], device: torch.device) -> float:
    """Forward + backward FLOPs of one training sample, counted by torch on a batch of 8."""
    x = torch.randn(8, *shape, device=device)
    y = torch.zeros(8, dtype=torch.long, device=device)
    with FlopCounterMode(display=False) as counter:
        F.nll_loss(model(x), y).backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops() / 8


def bench_case(case: Case, device: torch.device, repeats: int) -> list[dict]:
    """One row per trainer (and the reference loop): seconds per round, throughput, memory, TFLOP/s."""
    runs, flops = case_runs(case, device)
    all_seconds, peaks = timed(runs, device, repeats)
    Numerics().apply_globally()
    seconds = {name: float(np.median(values)) for name, values in all_seconds.items()}
    samples = case.per_round * case.samples * case.epochs
    return [
        {
            "case": case.name,
            "trainer": name,
            "device": str(device),
            "clients": case.clients,
            "clients_per_round": case.per_round,
            "samples_per_client": case.samples,
            "batch_size": case.batch_size,
            "local_epochs": case.epochs,
            "seconds_per_round": round(value, 4),
            "samples_per_second": round(samples / value, 1),
            "speedup": round(seconds["reference loop"] / value, 2),
            "peak_memory_mib": round(peaks[name], 1),  # CUDA: of this trainer; CPU: of the process so far
            "tflops": round(flops / value / 1e12, 4),
        }
        for name, value in seconds.items()
    ]


def case_runs(case: Case, device: torch.device) -> tuple[dict[str, Callable[[], object]], float]:
    """One round of the case for the reference loop and for every trainer, on the same clients, each
    under its own numeric switches; and the round's FLOPs."""
    channels, height, width = case.shape
    info = DatasetInfo(
        case.name, tuple(map(str, range(10))), channels, (height, width), (0.0,) * channels, (1.0,) * channels, 255.0
    )
    model = build_model(case.model, info, seed=0).to(device)
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    n = case.per_round * case.samples  # only the clients of one round need data
    generator = torch.Generator().manual_seed(0)
    images = torch.randn(n, *case.shape, generator=generator).to(device)
    labels = torch.randint(0, 10, (n,), generator=generator).to(device)
    clients = [torch.arange(c * case.samples, (c + 1) * case.samples, device=device) for c in range(case.per_round)]
    tasks = [LocalTask(start, idx, (1e-3,) * case.epochs, shuffle_key(0, c, 0)) for c, idx in enumerate(clients)]
    fast_trainer, fast = fast_numerics(device)
    settings = LocalSettings(case.batch_size)  # Adam, as the paper
    trainers = {
        "plain": PlainTrainer(model, images, labels, settings),
        "vectorised": VectorisedTrainer(model, images, labels, settings),
        f"{fast_trainer} {fast.precision}{' nhwc' if fast.channels_last else ''}": trainer_class(fast_trainer, device)(
            copy.deepcopy(model), images, labels, LocalSettings(case.batch_size, numerics=fast)
        ),
    }
    if device.type == "cuda":  # the CPU runs the graphed step uncaptured: the plain trainer's work
        trainers["graphed"] = GraphedTrainer(model, images, labels, settings)

    def reference() -> None:
        reference_round(model, start, images, labels, clients, case.epochs, case.batch_size, device)

    runs = {"reference loop": with_numerics(Numerics(), reference)}
    runs.update(
        {
            name: with_numerics(trainer.settings.numerics, partial(trainer.train, tasks))
            for name, trainer in trainers.items()
        }
    )
    return runs, flops_per_sample(model, case.shape, device) * n * case.epochs


def with_numerics(numerics: Numerics, train: Callable[[], object]) -> Callable[[], object]:
    """`train` under `numerics`' process-wide switches (TF32), set just before it runs."""

    def run() -> object:
        numerics.apply_globally()
        return train()

    return run


WORLD_ON = ", clients' world on"


def format_table(rows: list[dict]) -> str:
    columns = ("case", "trainer", "seconds_per_round", "samples_per_second", "speedup", "peak_memory_mib", "tflops")
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in columns}
    lines = ["  ".join(c.ljust(widths[c]) for c in columns)]
    lines += ["  ".join(str(r[c]).ljust(widths[c]) for c in columns) for r in rows]
    return "\n".join(lines)


def run_bench(
    device_name: str,
    quick: bool,
    report: Callable[[str], None] = print,
    sweep: Path | None = None,
    engine_only: bool = False,
    scales: tuple[int, ...] | None = None,
) -> dict:
    """The whole benchmark: every case × trainer, the engine's share of the fastest cnn round, then
    the paper round through the real engine and the projected cost of the `sweep` config; last, the
    engine at cross-device scale (`scale.engine_scale`, at `scales` clients: None, its own). `engine_only`:
    that last part alone.

    `report` gets each part as it is measured (the full run takes minutes); the JSON-ready result is returned.
    """
    device = choose_device(device_name)
    result: dict = {"device": str(device), "torch": torch.__version__, "quick": quick}
    if not engine_only:
        result |= trainer_bench(device, quick, report, sweep)
    result["engine_scale"] = engine_scale(scales or (QUICK_SCALES if quick else SCALES), report)
    return result


def trainer_bench(device: torch.device, quick: bool, report: Callable[[str], None], sweep: Path | None) -> dict:
    """Every case × trainer, the engine's share of the fastest cnn round, and the paper round."""
    peak = matmul_tflops(device)
    report(f"{device}: an fp32 matrix multiply runs at {peak:.3f} TFLOP/s here (to read the tflops column against)")
    rows = [row for case in cases(quick) for row in bench_case(case, device, repeats=1 if quick else 3)]
    report(format_table(rows))
    fastest_cnn_round = min(r["seconds_per_round"] for r in rows if r["case"] == "cnn-28x28")
    engines = []
    for world in (False, True):
        with tempfile.TemporaryDirectory() as scratch:
            engine = engine_overhead(1000 if quick else 10_000, 100, 5 if quick else 20, Path(scratch), world)
        engine["share_of_cnn_round"] = round(engine["seconds_per_round"] / fastest_cnn_round, 4)
        report(
            f"engine{WORLD_ON if world else ''}: {engine['arrivals_per_second']} arrivals/s with "
            f"{engine['clients']} clients and J = {engine['clients_per_round']} ({engine['seconds_per_round']} s "
            f"per round, {engine['share_of_cnn_round']:.1%} of the fastest cnn-28x28 round above)"
        )
        engines.append(engine)
    # graphed on the CPU is the plain trainer's step uncaptured: only CUDA has something to measure
    trainers = ("plain", "vectorised", "graphed") if device.type == "cuda" else ("plain", "vectorised")
    paper = paper_round_bench(device, quick, trainers, sweep) if sweep else None
    if paper:
        fastest = min(r["paper_seconds_per_round"] for r in paper["rounds"] if r["model"] == "cnn")
        report(format_paper_rounds(paper, device))
        for engine in engines:
            engine["share_of_paper_cnn_round"] = round(engine["seconds_per_round"] / fastest, 4)
            on = WORLD_ON if engine["world"] else ""
            report(f"engine{on}: {engine['share_of_paper_cnn_round']:.2%} of the fastest paper cnn round")
    return {
        "matmul_fp32_tflops": round(peak, 4),
        "trainers": rows,
        "engine": engines[0],
        "engine_world": engines[1],
        "paper_round": paper,
    }
