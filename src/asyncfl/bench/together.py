"""`asyncfl bench --together K`: what stepping K runs together in one process (`sim.lockstep`, as
`asyncfl train-many` does) gains over training them one at a time, per paper model (docs/gpu.md
"Many runs in one process").

K AFL runs of the paper's shapes (C = 10, J = 5, batch 64, the paper's samples per client; seeds
0…K−1, so their clients differ) are stepped together, and one run alone. Each run's training rounds
are timed from its own timings.csv as the paper round times them (`RunWalls.training_rounds`: the
first, warm-up and CUDA graph captures, and the last, the evaluation, left out); together, a run's
round lasts a round of all K, since a training call waits for every run. The gain is K runs' rounds
per second together over one run's alone: the median round alone × K over the median round together.
I = 1 local epoch (a round's cost is I times one epoch's, and I only changes how long a measure
takes); --quick shrinks the clients too and says so.
"""

import contextlib
import csv
import functools
import io
import tempfile
from pathlib import Path

import numpy as np
import torch

from asyncfl.bench.paper_round import CLIENTS, EPOCHS, PAPER_SHAPES, PER_ROUND, QUICK_SAMPLES, PaperShape, load_sweep
from asyncfl.bench.synthetic import RunWalls, synthetic_data
from asyncfl.data.dataset import Dataset
from asyncfl.data.partition import Partition
from asyncfl.planning.layout import TIMINGS
from asyncfl.settings.config import make_config
from asyncfl.sim.engine import Simulation
from asyncfl.sim.lockstep import Lockstep
from asyncfl.training.runtime import configure_process

MEASURED_ROUNDS, QUICK_MEASURED_ROUNDS = 4, 2  # per run; each run trains two more (warm-up, evaluation)


def lockstep_rounds(data: tuple[Dataset, Partition], settings: dict, runs: int, out: Path) -> tuple[list[float], int]:
    """The training rounds' walls (`RunWalls.training_rounds`) of `runs` runs of `settings` (seeds
    0…runs−1) stepped together, every run's, and the largest training call's clients."""
    configs = [make_config({**settings, "seed": seed}) for seed in range(runs)]
    configure_process(configs[0].precision)
    lockstep = Lockstep()

    def job(seed: int) -> dict:
        return Simulation(configs[seed], *data, out / f"seed{seed}", pool=lockstep).run()

    with contextlib.redirect_stdout(io.StringIO()):
        outcomes = lockstep.run([functools.partial(job, seed) for seed in range(runs)])
    errors = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
    if errors:
        raise errors[0]
    walls = []
    for seed in range(runs):
        with open(out / f"seed{seed}" / TIMINGS) as stream:
            rounds = [float(row["wall_seconds"]) for row in csv.DictReader(stream)]
        walls += RunWalls(0.0, rounds).training_rounds()
    return walls, max(lockstep.calls)


def together_row(
    shape: PaperShape, runs: int, device: torch.device, trainer: str, profile: str | None, quick: bool
) -> dict:
    """One model's gain from stepping `runs` runs together, with the round walls it comes from."""
    rounds = (QUICK_MEASURED_ROUNDS if quick else MEASURED_ROUNDS) + 2
    data = synthetic_data("together", shape.shape, CLIENTS, QUICK_SAMPLES if quick else shape.samples)
    settings = {
        "algorithm": "afl",
        "model": shape.model,
        "clients_per_round": PER_ROUND,
        "local_epochs": 1,
        "rounds": rounds,
        "eval_every": rounds,
        "checkpoint_every": rounds,
        "device": device.type,
        "trainer": trainer,
        "eval_gradient": False,
    } | ({"profile": profile} if profile else {})
    with tempfile.TemporaryDirectory() as scratch:
        alone, _ = lockstep_rounds(data, settings, 1, Path(scratch) / "alone")
        together, largest = lockstep_rounds(data, settings, runs, Path(scratch) / "together")
    per_round_alone, per_round_together = float(np.median(alone)), float(np.median(together))
    return {
        "model": shape.model,
        "trainer": trainer,
        "profile": profile or "fp32",
        "runs": runs,
        "samples_per_client": QUICK_SAMPLES if quick else shape.samples,
        "round_walls_alone": [round(wall, 4) for wall in alone],
        "round_walls_together": [round(wall, 4) for wall in together],
        "seconds_per_round_alone": round(per_round_alone, 4),
        "seconds_per_round_together": round(per_round_together, 4),
        "gain": round(runs * per_round_alone / per_round_together, 3),
        "largest_call": largest,
    }


def together_bench(device: torch.device, runs: int, trainer: str, profile: str | None, quick: bool) -> list[dict]:
    """Every paper model's gain at `runs` runs per process."""
    return [together_row(shape, runs, device, trainer, profile, quick) for shape in PAPER_SHAPES]


def sweep_projection(rows: list[dict], sweep: Path, runs: int) -> dict:
    """The `sweep` config's device-hours at these rows' speeds, one run per process and with its jobs of
    at least `runs` runs stepped together (the others trained alone): a row's I = 1 round scaled to the
    paper's I = 10 (and, --quick, to the paper's samples), a client update a fifth of a round (J = 5)."""
    updates = load_sweep(sweep, runs)
    alone, together = {}, {}
    for row in rows:
        model = row["model"]
        (shape,) = [shape for shape in PAPER_SHAPES if shape.model == model]
        scale = EPOCHS * shape.samples / row["samples_per_client"]
        per_update = row["seconds_per_round_alone"] * scale / PER_ROUND
        total = updates["runs"].get(model, 0) + updates["tuning"].get(model, 0)
        stepped = updates["together"].get(model, 0)
        alone[model] = round(total * per_update / 3600, 2)
        together[model] = round((total - stepped + stepped / row["gain"]) * per_update / 3600, 2)
    return {
        "sweep": str(sweep),
        "sweep_client_updates": updates,
        "device_hours_alone": alone | {"total": round(sum(alone.values()), 2)},
        "device_hours_together": together | {"total": round(sum(together.values()), 2)},
    }


def format_together(rows: list[dict], device: torch.device) -> str:
    first = rows[0]
    lines = [
        f"{first['runs']} runs stepped together in one process against one alone on {device} (AFL, C = {CLIENTS}, "
        f"J = {PER_ROUND}, I = 1, trainer {first['trainer']}, profile {first['profile']}):"
    ]
    for row in rows:
        quick = f" ({row['samples_per_client']}-sample clients)" if row["samples_per_client"] == QUICK_SAMPLES else ""
        lines.append(
            f"  {row['model']:9} alone {row['seconds_per_round_alone']:8.4f} s a round, together "
            f"{row['seconds_per_round_together']:8.4f} s a round of all {row['runs']}: {row['gain']:.2f}× the rounds "
            f"per second (largest call {row['largest_call']} clients){quick}"
        )
    return "\n".join(lines)


def format_projection(projection: dict, runs: int) -> str:
    updates = projection["sweep_client_updates"]
    stepped = sum(updates["together"].values())
    total = sum(updates["runs"].values()) + sum(updates["tuning"].values())
    alone, together = projection["device_hours_alone"], projection["device_hours_together"]
    return (
        f"{projection['sweep']}: {total:,} client updates, {stepped:,} of them in jobs of at least {runs} runs → "
        f"{alone['total']} device-hours one run at a time, {together['total']} with those jobs' runs stepped together"
    )
