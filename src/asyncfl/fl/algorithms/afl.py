"""AFL, the paper's algorithm (Algorithm 1, docs/design.md "Training")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from asyncfl.fl.strategy import AsyncParameters, AsyncStrategy, Update
from asyncfl.settings.rules import UNIT_INTERVAL, Group, setting

if TYPE_CHECKING:
    from asyncfl.models import ModelState
    from asyncfl.settings.config import TrainConfig


@dataclass(frozen=True)
class AFLParameters(AsyncParameters):
    """Attributes:
    concurrency: M, clients kept in flight [J] (`AsyncParameters`).
    """

    mixing: float = setting(Group.SERVER, 1.0, lowest=UNIT_INTERVAL)
    """β: θ ← (1−β)θ + β·aggregate (1: the aggregate replaces the model, **paper**)"""


class AFL(AsyncStrategy):
    """M clients in flight, aggregate every J arrivals, weights n_c·s(τ_c), mixing β (`AFLParameters`)."""

    def __init__(self, config: TrainConfig):
        super().__init__(config)
        self.parameters: AFLParameters = AFLParameters.of(config)

    def aggregate(self, global_model: ModelState, updates: list[Update]) -> tuple[ModelState, list[float]]:
        from asyncfl.fl.aggregation import staleness_aware_average  # torch: loaded here, not with the config

        return staleness_aware_average(
            global_model,
            [u.state for u in updates],
            [u.size for u in updates],
            [u.staleness_weight for u in updates],
            self.parameters.mixing,
        )
