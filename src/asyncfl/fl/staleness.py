"""Staleness functions s(τ): how much an update computed τ versions ago still counts (docs/design.md "Training").

Each is a small object that carries its own parameters, as FLSim's and pfl-research's weightings
do; `staleness_function` builds the one a config names from `staleness`, `staleness_a` and
`staleness_b`. τ = version at aggregation − version at dispatch (`sim.state.Job.staleness`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from asyncfl.settings.config import TrainConfig


class StalenessFunction(Protocol):
    def __call__(self, tau: int) -> float: ...


@dataclass(frozen=True)
class Constant:
    """s ≡ 1: every update counts by its size only (the paper's §V)."""

    def __call__(self, tau: int) -> float:
        return 1.0


@dataclass(frozen=True)
class Inverse:
    """s = 1 / (1 + a·τ)."""

    a: float

    def __call__(self, tau: int) -> float:
        return 1.0 / (1.0 + self.a * tau)


@dataclass(frozen=True)
class Polynomial:
    """s = (1 + τ)^−a, FedAsync's polynomial staleness function."""

    a: float

    def __call__(self, tau: int) -> float:
        return (1.0 + tau) ** -self.a


@dataclass(frozen=True)
class Hinge:
    """s = 1 up to τ = b, then 1 / (a·(τ − b) + 1): FedAsync's hinge."""

    a: float
    b: float

    def __call__(self, tau: int) -> float:
        return 1.0 if tau <= self.b else 1.0 / (self.a * (tau - self.b) + 1.0)


# Each s(τ) by its config name (the choices of the config's `staleness`), built from the config's
# staleness_a and staleness_b
FUNCTIONS: dict[str, Callable[[TrainConfig], StalenessFunction]] = {
    "constant": lambda config: Constant(),
    "inverse": lambda config: Inverse(config.staleness_a),
    "polynomial": lambda config: Polynomial(config.staleness_a),
    "hinge": lambda config: Hinge(config.staleness_a, config.staleness_b),
}


def staleness_function(config: TrainConfig) -> StalenessFunction:
    """The config's s(τ) with its parameters."""
    return FUNCTIONS[config.staleness](config)
