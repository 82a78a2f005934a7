"""`asyncfl bench --costs FILE`: what a run of each model costs on this device, measured, as the rows of
the cost table the workflow's jobs ask their minutes from (planning/run_cost.py; docs/cluster.md "What each
job asks for").

Each model trains a real AFL run (`Simulation`, the device's default trainer, fp32) on random data of
its paper shape: a training step is the median training round (`RunWalls.training_rounds`) over its
J × I × steps a client; a scored sample is the median of three evaluations of SCORED samples
(`evaluate`, as the runs score theirs); a run's start is a fresh process's imports of the training
stack plus the run's setup. The rows of this device kind replace its earlier ones; other kinds' stay.
"""

import csv
import datetime
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from asyncfl.bench.paper_round import MEASURED_ROUNDS, PAPER_SHAPES, PER_ROUND, paper_run
from asyncfl.bench.synthetic import synthetic_data
from asyncfl.files import atomic_path
from asyncfl.planning.run_cost import COLUMNS, MeasuredCost, read_cost_table
from asyncfl.runs.provenance import git
from asyncfl.settings.config import TrainConfig
from asyncfl.settings.names import MODELS

SAMPLES, EPOCHS = 640, 2  # 10 steps of 64 a client and epoch: 100 steps a round of J = 5
QUICK_SAMPLES, QUICK_EPOCHS = 128, 1
BATCH = TrainConfig.batch_size  # the runs' default batch, which the measured steps train
SCORED = 2048
IMPORTS = "import asyncfl.launch, asyncfl.sim.engine, asyncfl.training.evaluation"


def device_kind(device: torch.device) -> str:
    """The device kind a cost row names: `cuda-` and the card's name (`cuda-h100-80gb-hbm3`), or `cpu-`,
    torch's kernels and its threads (`cpu-avx512-2threads`): a CPU's speed depends on both."""
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device).lower().removeprefix("nvidia ")
        return "cuda-" + re.sub(r"[^a-z0-9.]+", "-", name).strip("-")
    capability = torch.backends.cpu.get_cpu_capability().lower().replace("-", "")
    return f"cpu-{capability}-{torch.get_num_threads()}threads"


def import_seconds() -> float:
    """A fresh process's imports of the training stack (torch's first: seconds on a cold filesystem)."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", IMPORTS], check=True, capture_output=True)
    return time.perf_counter() - started


def scored_sample_seconds(model_name: str, shape: tuple[int, int, int], device: torch.device) -> float:
    """One sample's share of an evaluation of SCORED random samples (the median of three, after one)."""
    from asyncfl.models import build_model
    from asyncfl.training.evaluation import evaluate

    dataset, _ = synthetic_data("cost", shape, 1, 16)
    model = build_model(model_name, dataset.info, 0).to(device)
    state = {name: value.detach().clone() for name, value in model.state_dict().items()}
    images = torch.randn((SCORED, *shape), generator=torch.Generator().manual_seed(0)).to(device)
    labels = torch.zeros(SCORED, dtype=torch.int64, device=device)
    walls = []
    for _ in range(4):
        started = time.perf_counter()
        evaluate(model, state, images, labels)  # .item() inside: the device has finished
        walls.append(time.perf_counter() - started)
    return statistics.median(walls[1:]) / SCORED


def measure_costs(device: torch.device, quick: bool, models: tuple[str, ...] = tuple(MODELS)) -> list[MeasuredCost]:
    """Each of `models`' row for this device (--quick: smaller clients, two steps a round's client, said
    in its `measured` column)."""
    samples, epochs = (QUICK_SAMPLES, QUICK_EPOCHS) if quick else (SAMPLES, EPOCHS)
    steps = PER_ROUND * epochs * -(-samples // BATCH)
    imports = import_seconds()
    when = f"{datetime.date.today().isoformat()} torch {torch.__version__} {git('rev-parse', '--short', 'HEAD')}"
    rows = []
    for shape in (shape for shape in PAPER_SHAPES if shape.model in models):
        walls = paper_run(shape, "auto", device, samples, epochs, MEASURED_ROUNDS)
        step = statistics.median(walls.training_rounds()) / steps
        scored = scored_sample_seconds(shape.model, shape.shape, device)
        measured = f"{when}{' (--quick)' if quick else ''}"
        rows.append(
            MeasuredCost(device_kind(device), shape.model, BATCH, step, scored, imports + walls.setup, measured)
        )
    return rows


def write_costs(path: Path, rows: list[MeasuredCost]) -> None:
    """`rows` into the table at `path` (created where missing), replacing the rows of their device kind."""
    kept = read_cost_table(path) if path.exists() else {}
    kinds = {row.device for row in rows}
    table = [row for (kind, _), row in kept.items() if kind not in kinds] + rows
    table.sort(key=lambda row: (row.device, row.model))
    with atomic_path(path) as tmp, open(tmp, "w", newline="") as stream:
        writer = csv.writer(stream, lineterminator="\n")
        writer.writerow(COLUMNS)
        for row in table:
            writer.writerow([format_field(getattr(row, column)) for column in COLUMNS])


def format_field(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def format_costs(rows: list[MeasuredCost], path: Path) -> str:
    lines = [f"{path}: {rows[0].device} ({rows[0].measured})"]
    for row in rows:
        lines.append(
            f"  {row.model:9} step of {row.batch_size} {row.step_seconds * 1e3:9.3f} ms, scored sample "
            f"{row.scored_sample_seconds * 1e6:8.2f} µs, start {row.start_seconds:6.2f} s"
        )
    return "\n".join(lines)
