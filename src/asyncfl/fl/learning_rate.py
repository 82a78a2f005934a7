"""The delay-aware learning rate of the paper's Algorithm 1, the one schedule of the runs and of
`asyncfl theory` (docs/design.md "Training")."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from asyncfl.settings.config import TrainConfig


def delay_aware_lr(gamma0: float, t: float, alpha_lr: float, delay: float) -> float:
    """γ = γ0 / (√(t+1) · (1 + α·d)): later rounds and slower clients take smaller steps."""
    return gamma0 / (math.sqrt(t + 1) * (1.0 + alpha_lr * delay))


@dataclass(frozen=True)
class Schedule:
    """γ of each local epoch of a dispatch: γ = γ0 / (√(t+1)·(1 + α·d_c)).

    Attributes:
        gamma0: γ0 (config `gamma0`).
        alpha: α of the delay term (config `alpha_lr`).
        clock: what t counts (config `lr_time`): "round", the server version at dispatch (the
            paper); "equivalent_round", client updates aggregated / J, the same for every algorithm;
            "epoch", the local epoch (the paper's reference code).
        epochs: I, local epochs per dispatch.
        clients_per_round: J, the unit of the equivalent round.
    """

    gamma0: float
    alpha: float
    clock: str
    epochs: int
    clients_per_round: int

    @classmethod
    def of(cls, config: TrainConfig) -> Schedule:
        return cls(config.gamma0, config.alpha_lr, config.lr_time, config.local_epochs, config.clients_per_round)

    def rates(self, version: int, updates: int, delay: float) -> tuple[float, ...]:
        """γ of each local epoch of a dispatch made at global `version`, after `updates` client updates
        were aggregated, by a client whose delay d_c is `delay`."""
        clocks = CLOCKS[self.clock](self, version, updates)
        return tuple(delay_aware_lr(self.gamma0, t, self.alpha, delay) for t in clocks)


# t of γ for each local epoch of a dispatch, by the config's lr_time (its choices)
CLOCKS: dict[str, Callable[[Schedule, int, int], list[float]]] = {
    "round": lambda schedule, version, updates: [version] * schedule.epochs,
    "equivalent_round": lambda schedule, version, updates: [updates / schedule.clients_per_round] * schedule.epochs,
    "epoch": lambda schedule, version, updates: list(range(schedule.epochs)),
}
