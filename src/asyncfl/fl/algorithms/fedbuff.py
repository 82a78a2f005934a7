"""FedBuff (Nguyen et al. 2022): buffered asynchronous aggregation."""

from dataclasses import dataclass

from asyncfl.fl.aggregation import fedbuff_update
from asyncfl.fl.strategy import AsyncParameters, AsyncStrategy, Update
from asyncfl.models import ModelState
from asyncfl.settings.config import TrainConfig


@dataclass(frozen=True)
class FedBuffParameters(AsyncParameters):
    """Attributes:
    concurrency: M, clients kept in flight [J] (`AsyncParameters`).
    buffer_size: K, arrivals per aggregation [J].
    server_lr: η_g, the server's step on the mean update, > 0 [1.0: the mean update itself].
    """

    buffer_size: int
    server_lr: float


class FedBuff(AsyncStrategy):
    """Buffer K arrivals, θ ← θ + η_g·Σ s(τ_c)(θ_c − θ_start,c)/K (`FedBuffParameters`)."""

    convex = False  # a step on the mean update, scaled by η_g

    def __init__(self, config: TrainConfig):
        super().__init__(config)
        buffer_size = config.buffer_size or config.clients_per_round
        self.parameters: FedBuffParameters = FedBuffParameters.of(config, buffer_size=buffer_size)

    def aggregate(self, global_model: ModelState, updates: list[Update]) -> tuple[ModelState, list[float]]:
        return fedbuff_update(
            global_model,
            [u.state for u in updates],
            [u.start for u in updates],
            [u.staleness_weight for u in updates],
            self.parameters.server_lr,
        )
