"""Process setup for a run: the device, determinism, the numeric switches and the trainer that suits them.

Everything here is process-wide state that must be set before any tensor work, so the engine,
the bench and the checks read it from one place.
"""

import os

import torch

from asyncfl.spec.config import TrainConfig
from asyncfl.spec.errors import InputError
from asyncfl.training.graphed import GraphedTrainer
from asyncfl.training.numerics import Numerics
from asyncfl.training.plain import LocalTrainer, PlainTrainer
from asyncfl.training.vectorised import VectorisedTrainer


def choose_device(name: str) -> torch.device:
    """auto: CUDA when a device is really there (a SLURM fake GPU sets CUDA_VISIBLE_DEVICES but has none)."""
    if name == "cuda" and not torch.cuda.is_available():
        raise InputError("device cuda requested but no CUDA device is available; use device: auto or cpu")
    return torch.device("cuda" if name != "cpu" and torch.cuda.is_available() else "cpu")


def make_deterministic(seed: int) -> None:
    """Same seed → same bytes: deterministic kernels and a seeded global generator (model initialisation)."""
    # cuBLAS repeats its sums only with a fixed workspace, read when its first handle is made (CUDA)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.manual_seed(seed)


def numerics_for(config: TrainConfig) -> Numerics:
    """The run's numeric switches, applied to the process (TF32 is a global switch)."""
    numerics = Numerics(config.precision, config.channels_last)
    numerics.apply_globally()
    return numerics


def trainer_name(name: str, device: torch.device) -> str:
    """`trainer: auto` is vectorised on CUDA and plain on the CPU, where oneDNN runs vmap's grouped
    convolutions slower than one client's plain ones (asyncfl bench, README "Speed"). `graphed` is
    chosen by name only until the GPU benchmark has measured it (README "Speed")."""
    if name == "auto":
        return "vectorised" if device.type == "cuda" else "plain"
    return name


TRAINER_CLASSES: dict[str, type[LocalTrainer]] = {
    "plain": PlainTrainer,
    "vectorised": VectorisedTrainer,
    "graphed": GraphedTrainer,
}


def trainer_class(name: str, device: torch.device) -> type[LocalTrainer]:
    return TRAINER_CLASSES[trainer_name(name, device)]
