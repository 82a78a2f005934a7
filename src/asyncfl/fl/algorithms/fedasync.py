"""FedAsync (Xie et al. 2019): every arrival is a round."""

from dataclasses import dataclass

from asyncfl.fl.aggregation import fedasync_update
from asyncfl.fl.strategy import AsyncParameters, AsyncStrategy, Update
from asyncfl.models import ModelState
from asyncfl.settings.config import TrainConfig


@dataclass(frozen=True)
class FedAsyncParameters(AsyncParameters):
    """Attributes:
    concurrency: M, clients kept in flight [J] (`AsyncParameters`).
    fedasync_alpha: α of α_t = α·s(τ), in (0, 1] [0.6: FedAsync's paper].
    """

    fedasync_alpha: float


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
