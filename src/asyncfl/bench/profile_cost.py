"""`asyncfl bench --profile-cost`: what the `fast` speed profile (bf16 autocast and channels_last,
`settings/populations.PROFILES`) costs in accuracy against fp32, and whether it stays deterministic.

Paired seeds on real data: for each seed, one partition, one clients' world and one initial model, an
AFL run in fp32 and one in the fast profile, so the numerics alone differ. Reported per seed and as
the mean paired difference (fast − fp32) with its 95 % paired t-interval: the final test accuracy, and
the virtual time to the target (90 % of the better profile's mean final accuracy, the convention of
the `algorithms_compared` figure; a run that never reaches it counts as its budget). The first seed's
fast run is trained twice: the same metrics and model bytes, or the profile is not deterministic.

The case is the smallest meaningful one the CPU carries (bf16 without native support is emulated and
slow there): ResNet-20, the model the profile speeds up most on a GPU, on scikit-learn's digits (real
8×8 images), C = 10, α = 0.5, J = 5, I = 1, 10 rounds, the quick pipeline's `digits_resnet20` settings.
"""

import contextlib
import hashlib
import io
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from scipy import stats

from asyncfl.data.dataset import Dataset
from asyncfl.data.loading import load_dataset
from asyncfl.data.partition import DirichletSplit
from asyncfl.planning.layout import METRICS, MODEL
from asyncfl.settings.config import make_config

CLIENTS, ALPHA = 10, 0.5
CASE = {
    "algorithm": "afl",
    "model": "resnet20",
    "clients_per_round": 5,
    "rounds": 10,
    "local_epochs": 1,
    "gamma0": 0.003,
    "lr_time": "equivalent_round",
    "eval_every": 2,
    "eval_gradient": False,
    "checkpoint_every": 10,
}
COMPARED = {"fp32": {}, "fast": {"profile": "fast"}}  # the settings each side adds
TARGET_SHARE, CONFIDENCE = 0.9, 0.95


def train_case(dataset: Dataset, seed: int, profile: str, device: torch.device, out: Path) -> dict:
    """One run of the case; its final accuracy, the accuracy curve, wall seconds and bytes' hash."""
    from asyncfl.sim.engine import Simulation
    from asyncfl.training.runtime import configure_process

    partition, _ = DirichletSplit(CLIENTS, ALPHA, seed).partition(dataset.train_labels.numpy(), "digits")
    config = make_config({**CASE, **COMPARED[profile], "seed": seed, "device": device.type})
    configure_process(config.precision)
    started = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):  # its rounds' progress lines
        Simulation(config, dataset, partition, out).run()
    wall = time.perf_counter() - started
    rows = np.genfromtxt(out / METRICS, delimiter=",", names=True)
    evaluated = rows[~np.isnan(rows["test_accuracy"])]
    digest = hashlib.sha256((out / METRICS).read_bytes() + (out / MODEL).read_bytes()).hexdigest()
    return {
        "seed": seed,
        "profile": profile,
        "final_accuracy": float(evaluated["test_accuracy"][-1]),
        "curve": list(zip(map(float, evaluated["virtual_time"]), map(float, evaluated["test_accuracy"]), strict=True)),
        "budget": float(rows["virtual_time"][-1]),
        "wall_seconds": round(wall, 2),
        "sha256": digest,
    }


def time_to(curve: list[tuple[float, float]], target: float, budget: float) -> float:
    """Virtual seconds to the first evaluation at or above `target`; the budget where none is."""
    return next((t for t, accuracy in curve if accuracy >= target), budget)


def paired_t(differences: np.ndarray) -> dict:
    """Mean of paired differences and its 95 % t-interval (n − 1 degrees of freedom)."""
    mean = float(differences.mean())
    half = float(stats.t.ppf((1 + CONFIDENCE) / 2, len(differences) - 1) * stats.sem(differences))
    if not np.isfinite(half):  # no spread
        half = 0.0
    return {"mean": round(mean, 4), "low": round(mean - half, 4), "high": round(mean + half, 4)}


def profile_cost(device: torch.device, seeds: int) -> dict:
    """Every paired run, the differences with their intervals, and the determinism check."""
    dataset, runs = load_dataset("digits"), []
    with tempfile.TemporaryDirectory() as scratch:
        for seed in range(seeds):
            for profile in COMPARED:  # interleaved: drift in speed touches both alike
                runs.append(train_case(dataset, seed, profile, device, Path(scratch) / f"{profile}-{seed}"))
        rerun = train_case(dataset, 0, "fast", device, Path(scratch) / "fast-0-again")
    by = {(run["seed"], run["profile"]): run for run in runs}
    means = {p: np.mean([by[s, p]["final_accuracy"] for s in range(seeds)]) for p in COMPARED}
    target = TARGET_SHARE * max(means.values())
    for run in runs:
        run["time_to_target"] = time_to(run["curve"], target, run["budget"])
    differences = {
        key: np.array([by[s, "fast"][key] - by[s, "fp32"][key] for s in range(seeds)])
        for key in ("final_accuracy", "time_to_target", "wall_seconds")
    }
    return {
        "device": str(device),
        "case": {**CASE, "dataset": "digits", "clients": CLIENTS, "alpha": ALPHA},
        "seeds": seeds,
        "target_accuracy": round(target, 4),
        "runs": [{k: v for k, v in run.items() if k != "curve"} for run in runs],
        "fast_minus_fp32": {key: paired_t(values) for key, values in differences.items()},
        "fast_rerun_identical": rerun["sha256"] == by[0, "fast"]["sha256"],
    }


def format_profile_cost(result: dict) -> str:
    lines = [
        f"fast profile against fp32 on {result['device']}: AFL, resnet20 on digits, {result['seeds']} paired seeds, "
        f"target {result['target_accuracy']:.3f} (90 % of the better mean final accuracy)"
    ]
    for run in result["runs"]:
        lines.append(
            f"  seed {run['seed']} {run['profile']:4}  final accuracy {run['final_accuracy']:.4f}  "
            f"time to target {run['time_to_target']:7.2f} s  wall {run['wall_seconds']:6.2f} s"
        )
    for key, interval in result["fast_minus_fp32"].items():
        lines.append(
            f"  fast − fp32, {key.replace('_', ' ')}: {interval['mean']:+.4f} "
            f"[{interval['low']:+.4f}, {interval['high']:+.4f}] (95 % paired t)"
        )
    again = "identical" if result["fast_rerun_identical"] else "DIFFERS"
    lines.append(f"  the fast run of seed 0 trained again: {again}")
    return "\n".join(lines)
