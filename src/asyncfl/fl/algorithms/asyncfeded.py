"""AsyncFedED (Wang et al. 2022, "AsyncFedED: Asynchronous Federated Learning with Euclidean Distance
based Adaptive Weight Aggregation"): every arrival is a round, stepped by how far the global model has
moved since the update's start relative to the update's own length.

At an arrival of Δ = θ_c − θ_start (θ_start the global model it started from, θ the global model now):
γ = ‖θ − θ_start‖ / ‖Δ‖, the staleness as a distance; η = λ / (γ + ε); θ ← θ + η·Δ. A fresh update (γ = 0)
steps λ/ε; an update from far behind, little. An update of length 0 moves nothing (γ = ∞).

As the one public implementation codes it (hugo94140/FedOpt, `Federation/AsyncFedED/AsyncFedED.py`; no
authors' code is public), the norms over the model's whole state: here over its floating entries
(parameters and BatchNorm's running statistics) in float64, integer counts taking the largest, as in
every asyncfl algorithm. Not built: the paper's adaptive local epochs (a client's next epochs moved by
⌊κ·(γ̄ − γ)⌋): every dispatch trains the run's `local_epochs`. s(τ) plays no part (γ is the staleness).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from asyncfl.fl.strategy import AsyncParameters, AsyncStrategy, Update
from asyncfl.settings.rules import POSITIVE, Group, setting

if TYPE_CHECKING:
    from asyncfl.models import ModelState
    from asyncfl.settings.config import TrainConfig


@dataclass(frozen=True)
class AsyncFedEDParameters(AsyncParameters):
    """Attributes:
    concurrency: M, clients kept in flight [J] (`AsyncParameters`).
    """

    asyncfeded_lambda: float = setting(Group.SERVER, 0.1, lowest=POSITIVE, at_most=1e6)
    """λ of AsyncFedED's step λ/(γ + ε) (**project's choice**: FedOpt's; the paper tunes it)"""
    asyncfeded_epsilon: float = setting(Group.SERVER, 1.0, lowest=POSITIVE, at_most=1e6)
    """ε of AsyncFedED's step λ/(γ + ε), at most λ/ε (**project's choice**: FedOpt's)"""


class AsyncFedED(AsyncStrategy):
    """θ ← θ + λ/(γ + ε)·Δ, γ = ‖θ − θ_start‖/‖Δ‖, at every arrival (`AsyncFedEDParameters`)."""

    convex = False  # a step on the update, scaled by its distance

    def __init__(self, config: TrainConfig):
        super().__init__(config)
        self.parameters: AsyncFedEDParameters = AsyncFedEDParameters.of(config)

    def aggregate(self, global_model: ModelState, updates: list[Update]) -> tuple[ModelState, list[float]]:
        from asyncfl.fl.aggregation import linear_combination  # torch: loaded here, not with the config

        (update,) = updates
        gamma = distance_ratio(global_model, update.start, update.state)
        step = self.parameters.asyncfeded_lambda / (gamma + self.parameters.asyncfeded_epsilon)
        return linear_combination([(1.0, global_model), (step, update.state), (-step, update.start)]), [step]


def distance_ratio(global_model: ModelState, start: ModelState, state: ModelState) -> float:
    """γ = ‖θ − θ_start‖ / ‖θ_c − θ_start‖ over the floating entries, in float64 (∞ for an update of length 0)."""
    floating = [key for key, value in global_model.items() if value.is_floating_point()]
    moved = sum(float(((global_model[k].double() - start[k].double()) ** 2).sum()) for k in floating)
    length = sum(float(((state[k].double() - start[k].double()) ** 2).sum()) for k in floating)
    return math.sqrt(moved) / math.sqrt(length) if length > 0 else math.inf
