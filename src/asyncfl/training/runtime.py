"""Process setup for a run: the device, the process-wide switches and the trainer that suits them.

The switches (deterministic kernels, cuBLAS's workspace, TF32) belong to the process, so the command
that runs sets them once, before any tensor work (`configure_process`); building a run changes none.
"""

import os

import torch

from asyncfl.settings.errors import InputError
from asyncfl.settings.names import TIMING_ONLY, TRAINERS
from asyncfl.training.gpus import held_gpu
from asyncfl.training.graphed import GraphedTrainer
from asyncfl.training.interface import LocalTrainer
from asyncfl.training.numerics import Numerics
from asyncfl.training.plain import PlainTrainer
from asyncfl.training.vectorised import VectorisedTrainer


def choose_device(name: str) -> torch.device:
    """auto: CUDA when a device is really there (a SLURM fake GPU sets CUDA_VISIBLE_DEVICES but has none).
    On CUDA, the free GPU this process holds for its life (`gpus.held_gpu`)."""
    if name == "cuda" and not torch.cuda.is_available():
        raise InputError("device cuda requested but no CUDA device is available; use device: auto or cpu")
    return held_gpu() if name != "cpu" and torch.cuda.is_available() else torch.device("cpu")


def configure_process(precision: str = "fp32") -> None:
    """Same seed → same bytes: deterministic kernels and, on CUDA, cuBLAS's fixed workspace; TF32 on only
    for `precision: tf32`. Called by `asyncfl train`, `asyncfl theory` and the bench, before their runs."""
    # cuBLAS repeats its sums only with a fixed workspace, read when its first handle is made (CUDA)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    # Debug mode 1 is `use_deterministic_algorithms(True, warn_only=True)` without its import of
    # TorchInductor's config (~1.4 s of every process's start on a CPU; nothing here compiles)
    torch.set_deterministic_debug_mode(1)
    Numerics(precision).apply_globally()


def trainer_name(name: str, device: torch.device, graphable: bool = True) -> str:
    """`trainer: auto` is graphed on CUDA, the fastest trainer measured there for every model (one H100,
    docs/gpu.md "On a GPU"), or vectorised for a run whose clients need what a captured step
    lacks (`graphable` false: `graphed.graphable_run`); plain on the CPU, where oneDNN runs vmap's grouped
    convolutions slower than one client's plain ones and nothing is captured (docs/performance.md "Speed")."""
    if name != "auto":
        return name
    if device.type != "cuda":
        return "plain"
    return "graphed" if graphable else "vectorised"


TRAINER_CLASSES: dict[str, type[LocalTrainer]] = {
    "plain": PlainTrainer,
    "vectorised": VectorisedTrainer,
    "graphed": GraphedTrainer,
}


# the config's choices are exactly the trainers here, auto and the timing-only run's none (`timing_only`)
if {"auto", TIMING_ONLY, *TRAINER_CLASSES} != set(TRAINERS):
    raise ImportError(f"trainers {sorted(TRAINER_CLASSES)} (and auto, none) differ from names.TRAINERS {TRAINERS}")


def trainer_class(name: str, device: torch.device, graphable: bool = True) -> type[LocalTrainer]:
    return TRAINER_CLASSES[trainer_name(name, device, graphable)]
