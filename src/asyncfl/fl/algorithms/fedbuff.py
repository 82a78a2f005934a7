"""FedBuff (Nguyen et al. 2022): buffered asynchronous aggregation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from asyncfl.fl.strategy import AsyncStrategy, BufferedParameters, Update

if TYPE_CHECKING:
    from asyncfl.models import ModelState
    from asyncfl.settings.config import TrainConfig


@dataclass(frozen=True)
class FedBuffParameters(BufferedParameters):
    """Attributes:
    concurrency: M, clients kept in flight [J] (`AsyncParameters`).
    buffer_size: K, arrivals per aggregation [J] (`BufferedParameters`).
    server_lr: η_g, the server's step on the mean update, > 0 [1.0: the mean update itself].
    """

    server_lr: float


class FedBuff(AsyncStrategy):
    """Buffer K arrivals, θ ← θ + η_g·Σ s(τ_c)(θ_c − θ_start,c)/K (`FedBuffParameters`)."""

    convex = False  # a step on the mean update, scaled by η_g

    def __init__(self, config: TrainConfig):
        super().__init__(config)
        self.parameters: FedBuffParameters = FedBuffParameters.of(config)

    def aggregate(self, global_model: ModelState, updates: list[Update]) -> tuple[ModelState, list[float]]:
        return fedbuff_update(
            global_model,
            [u.state for u in updates],
            [u.start for u in updates],
            [u.staleness_weight for u in updates],
            self.parameters.server_lr,
        )


def fedbuff_update(
    global_model: ModelState, states: list[ModelState], starts: list[ModelState], weights: list[float], server_lr: float
) -> tuple[ModelState, list[float]]:
    """FedBuff: θ ← θ + η_g · Σ s(τ_c)·(θ_c − θ_start,c) / K."""
    from asyncfl.fl.aggregation import linear_combination  # torch: loaded here, not with the config

    coefficients = [server_lr * s / len(states) for s in weights]
    terms = [(1.0, global_model)]
    for coefficient, state, start in zip(coefficients, states, starts, strict=True):
        terms += [(coefficient, state), (-coefficient, start)]
    return linear_combination(terms), coefficients
