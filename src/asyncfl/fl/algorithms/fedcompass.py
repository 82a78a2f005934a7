"""FedCompass (Li et al., ICLR 2024, "FedCompass: Efficient Cross-Silo Federated Learning on Heterogeneous
Client Devices Using a Computing Power-Aware Scheduler"; APPFL's `CompassScheduler` and
`FedCompassAggregator`): a scheduler gives each dispatch as many local steps as bring its client back
with an arrival group, and the server aggregates a group when it is complete or at its deadline.

The scheduler is the engine's (`sim/compass.py`, driven by `sim/compass_round.py`); this file is the
server's step and the settings. An aggregation takes a group's arrivals with the late updates held
since (or, for a client not heard from before, its one update) and steps
θ ← θ + Σ_i α·s(τ_i)/M·(θ_i − θ_start,i), APPFL's gradient-based aggregator with its weights "equal";
the weight 1/M (M clients in flight) where APPFL's is 1/N is the project's choice, as is drawing the
clients of each dispatch as every other asynchronous name does (docs/algorithms.md "FedCompass").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from asyncfl.fl.strategy import AsyncParameters, AsyncStrategy, Update

if TYPE_CHECKING:
    from asyncfl.models import ModelState
    from asyncfl.settings.config import TrainConfig


@dataclass(frozen=True)
class FedCompassParameters(AsyncParameters):
    """Attributes:
    concurrency: M, clients kept in flight [J] (`AsyncParameters`).
    compass_alpha: α, the server's step [0.9: APPFL's].
    compass_min_steps: Q_min as a fraction of Q_max, a dispatch's whole local work [0.2: APPFL's example,
        20 of 100 steps].
    latest_time_factor: λ, a group's deadline over its expected duration, ≥ 1 [1.5: APPFL's example].
    speed_momentum: m of a client's smoothed seconds per step [0.9: APPFL's example].
    """

    compass_alpha: float
    compass_min_steps: float
    latest_time_factor: float
    speed_momentum: float

    def step_bounds(self, whole: int) -> tuple[int, int]:
        """(Q_min, Q_max) of a client whose dispatch is `whole` local steps: Q_max = `whole`, Q_min the
        fraction of it, at least one step."""
        return max(1, math.ceil(self.compass_min_steps * whole)), whole


class FedCompass(AsyncStrategy):
    """θ ← θ + Σ α·s(τ_i)/M·(θ_i − θ_start,i) over a group's arrivals and the late updates
    (`FedCompassParameters`); the engine schedules the groups (`schedules_groups`)."""

    convex = False  # a step on the updates, however many an aggregation takes
    schedules_groups = True

    def __init__(self, config: TrainConfig):
        super().__init__(config)
        self.parameters: FedCompassParameters = FedCompassParameters.of(config)

    def aggregate(self, global_model: ModelState, updates: list[Update]) -> tuple[ModelState, list[float]]:
        step = self.parameters.compass_alpha / self.parameters.concurrency
        return compass_update(
            global_model,
            [u.state for u in updates],
            [u.start for u in updates],
            [u.staleness_weight for u in updates],
            step,
        )


def compass_update(
    global_model: ModelState, states: list[ModelState], starts: list[ModelState], weights: list[float], step: float
) -> tuple[ModelState, list[float]]:
    """FedCompass: θ ← θ + Σ_i step·s(τ_i)·(θ_i − θ_start,i), `step` = α/M (APPFL's gradient-based
    aggregator: each update its own weight, however many an aggregation takes)."""
    from asyncfl.fl.aggregation import linear_combination  # torch: loaded here, not with the config

    coefficients = [step * s for s in weights]
    terms = [(1.0, global_model)]
    for coefficient, state, start in zip(coefficients, states, starts, strict=True):
        terms += [(coefficient, state), (-coefficient, start)]
    return linear_combination(terms), coefficients
