"""`asyncfl bench`'s paper-round case: the real engine on random data of the paper's sizes, and what
the paper sweep in config/config.yaml would cost at that speed (docs/performance.md "Speed").

A paper round is AFL with C = 10, J = 5, I = 10, batch 64: `cnn` and `mlp` on 1×28×28 with 6,000 samples
per client (MNIST) and `resnet20` on 3×32×32 with 5,000 (CIFAR-10). Each trainer runs a few rounds of
`Simulation` in a scratch folder; seconds per round are the median of its training rounds from its own
timings.csv, the first (warm-up) and the last (the run's evaluation) excluded, each reported. --quick
shrinks the clients (not the shapes) and says so in every row.
"""

import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from asyncfl.bench.synthetic import RunWalls, synthetic_data, synthetic_run
from asyncfl.planning.plan import plan_workflow
from asyncfl.planning.run_cost import DATASET_SIZES, run_updates
from asyncfl.settings.config import make_config
from asyncfl.settings.errors import InputError
from asyncfl.settings.names import MODELS, base_algorithm
from asyncfl.settings.yaml_files import read_yaml

CLIENTS, PER_ROUND, EPOCHS = 10, 5, 10


@dataclass(frozen=True)
class PaperShape:
    model: str
    shape: tuple[int, int, int]
    samples: int  # per client, the paper's dataset split over C = 10


# The MLP (McMahan et al.'s 2NN, the straggler sweeps' model) on MNIST, the task it was made for
PAPER_SHAPES = (
    PaperShape("cnn", (1, 28, 28), 6000),
    PaperShape("resnet20", (3, 32, 32), 5000),
    PaperShape("mlp", (1, 28, 28), 6000),
)
if {shape.model for shape in PAPER_SHAPES} != set(MODELS):  # every model a sweep can train is measured
    raise ImportError(f"paper shapes {[s.model for s in PAPER_SHAPES]} differ from the models {list(MODELS)}")
QUICK_SAMPLES, QUICK_EPOCHS = 64, 1


# Rounds timed per row (--quick: a check of the measure, extrapolated): a run trains two more (the first
# warms up, the last evaluates)
MEASURED_ROUNDS, QUICK_MEASURED_ROUNDS = 4, 2


def round_walls(shape: PaperShape, trainer: str, device: torch.device, quick: bool) -> list[float]:
    """The wall seconds of MEASURED_ROUNDS training rounds of a real AFL run (`RunWalls.training_rounds`)."""
    measured = QUICK_MEASURED_ROUNDS if quick else MEASURED_ROUNDS
    samples, epochs = (QUICK_SAMPLES, QUICK_EPOCHS) if quick else (shape.samples, EPOCHS)
    return paper_run(shape, trainer, device, samples, epochs, measured).training_rounds()


def paper_run(
    shape: PaperShape, trainer: str, device: torch.device, samples: int, epochs: int, measured: int
) -> RunWalls:
    """A real AFL run of the paper's C = 10, J = 5 on clients of `samples` random images of `shape`, I =
    `epochs`, batch 64, for `measured` training rounds and two more (the first warms up, the last
    evaluates), in a scratch folder: its walls."""
    dataset, partition = synthetic_data("paper-round", shape.shape, CLIENTS, samples)
    settings = {
        "model": shape.model,
        "clients_per_round": PER_ROUND,
        "rounds": measured + 2,
        "local_epochs": epochs,
        "device": device.type,
        "trainer": trainer,
    }
    with tempfile.TemporaryDirectory() as scratch:
        return synthetic_run(dataset, partition, settings, Path(scratch))


def load_sweep(path: Path, together: int | None = None) -> dict[str, dict[str, int]]:
    """Client updates per model of the workflow config at `path`, checked as the workflow checks it."""
    from asyncfl.planning.workflow_config import check_workflow_config

    config = read_yaml(path)
    try:
        check_workflow_config(config)
        return sweep_updates(config, together)
    except (KeyError, TypeError, AttributeError, ValueError) as error:
        raise InputError(
            f"--sweep {path} is not a workflow config ({type(error).__name__}: {error}); give one like "
            "config/config.yaml, or omit --sweep"
        ) from None


def sweep_updates(config: dict, together: int | None = None) -> dict[str, dict[str, int]]:
    """Client updates the sweep trains, per stage and model: "runs", every run the workflow plans
    (budgets at reference_J, rounds × J elsewhere, `run_cost.run_updates`' estimate under a virtual-time
    budget, at every severity), and "tuning", the runs of the experiments' `tune:` grids; with
    `together`, a third, "together": those of them in jobs of at least that many runs (a severity's, a
    `pack_runs` pack's, a tuning grid's), which `asyncfl train-many` steps together."""
    totals: dict[str, dict[str, int]] = {"runs": {}, "tuning": {}}
    if together:
        totals["together"] = {}
    for name, plan in plan_workflow(config).experiments.items():
        experiment, model = config["experiments"][name], config["experiments"][name]["model"]
        kept = 1 - experiment.get("validation_fraction", 0)  # the clients' share of the training set
        per_client = DATASET_SIZES[experiment["dataset"]][0] * kept / experiment["clients"]
        jobs = {"runs": plan.jobs, "tuning": plan.tunings}
        for stage, stage_jobs in jobs.items():
            for job in stage_jobs:
                for run in job.runs:
                    settings = {**run.settings, "algorithm": base_algorithm(run.name), "clients_per_round": run.j}
                    updates = run_updates(make_config(settings), per_client)
                    totals[stage][model] = totals[stage].get(model, 0) + updates
                    if together and len(job.runs) >= together:
                        totals["together"][model] = totals["together"].get(model, 0) + updates
    return totals


def paper_round_bench(device: torch.device, quick: bool, trainers: tuple[str, ...], sweep: Path) -> dict:
    """Seconds per paper round per model and trainer, and the sweep's projected device-hours."""
    rows: list[dict] = []
    for shape in PAPER_SHAPES:
        for trainer in trainers:
            walls = round_walls(shape, trainer, device, quick)
            seconds = float(np.median(walls))
            # A client update's cost scales with samples × epochs: --quick extrapolates to the paper's.
            scale = (shape.samples * EPOCHS) / (QUICK_SAMPLES * QUICK_EPOCHS) if quick else 1.0
            rows.append(
                {
                    "model": shape.model,
                    "trainer": trainer,
                    "samples_per_client": QUICK_SAMPLES if quick else shape.samples,
                    "local_epochs": QUICK_EPOCHS if quick else EPOCHS,
                    "seconds_per_round": round(seconds, 4),
                    "round_walls": [round(wall, 4) for wall in walls],
                    "paper_seconds_per_round": round(seconds * scale, 3),
                    "extrapolated": quick,
                }
            )
    updates = load_sweep(Path(sweep))
    per_update = {m: min(r["paper_seconds_per_round"] for r in rows if r["model"] == m) / PER_ROUND for m in MODELS}
    models = sorted({model for stage in updates.values() for model in stage})
    hours = {m: round(sum(stage.get(m, 0) for stage in updates.values()) * per_update[m] / 3600, 2) for m in models}
    return {
        "rounds": rows,
        "sweep": str(sweep),
        "sweep_client_updates": updates,
        "sweep_device_hours": {**hours, "total": round(sum(hours.values()), 2)},
    }


def format_paper_rounds(result: dict, device: torch.device) -> str:
    lines = [f"paper round (AFL, C = {CLIENTS}, J = {PER_ROUND}, I = {EPOCHS}, batch 64) on {device}:"]
    for row in result["rounds"]:
        note = f" (measured on {row['samples_per_client']}-sample clients, I = {row['local_epochs']}; extrapolated)"
        lines.append(
            f"  {row['model']:9} {row['trainer']:11} {row['paper_seconds_per_round']:10.3f} s per round"
            + (note if row["extrapolated"] else "")
        )
    hours, updates = result["sweep_device_hours"], result["sweep_client_updates"]
    tuning = sum(updates["tuning"].values())
    lines.append(
        f"{result['sweep']}: {sum(updates['runs'].values()) + tuning:,} client updates ({tuning:,} of them "
        f"tuning runs) → {hours['total']} device-hours at the fastest trainer per model ({device})"
    )
    return "\n".join(lines)
