"""FedAsync (Xie et al. 2019): every arrival is a round."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from asyncfl.fl.strategy import AsyncParameters, AsyncStrategy, Update
from asyncfl.settings.rules import UNIT_INTERVAL, Group, setting

if TYPE_CHECKING:
    from asyncfl.models import ModelState
    from asyncfl.settings.config import TrainConfig


@dataclass(frozen=True)
class FedAsyncParameters(AsyncParameters):
    """Attributes:
    concurrency: M, clients kept in flight [J] (`AsyncParameters`).
    """

    fedasync_alpha: float = setting(Group.SERVER, 0.6, lowest=UNIT_INTERVAL)
    """α: α_t = α·s(τ) (**project's choice**, from FedAsync's paper)"""


class FedAsync(AsyncStrategy):
    """θ ← (1−α_t)θ + α_t θ_c with α_t = α·s(τ) (`FedAsyncParameters`)."""

    def __init__(self, config: TrainConfig):
        super().__init__(config)
        self.parameters: FedAsyncParameters = FedAsyncParameters.of(config)

    def aggregate(self, global_model: ModelState, updates: list[Update]) -> tuple[ModelState, list[float]]:
        (update,) = updates
        new, alpha_t = fedasync_update(
            global_model, update.state, self.parameters.fedasync_alpha, update.staleness_weight
        )
        return new, [alpha_t]


def fedasync_update(
    global_model: ModelState, state: ModelState, alpha: float, weight: float
) -> tuple[ModelState, float]:
    """FedAsync: θ ← (1−α_t)θ + α_t θ_c with α_t = α·s(τ), computed afresh for every arrival."""
    from asyncfl.fl.aggregation import linear_combination  # torch: loaded here, not with the config

    alpha_t = alpha * weight
    return linear_combination([(1.0 - alpha_t, global_model), (alpha_t, state)]), alpha_t
