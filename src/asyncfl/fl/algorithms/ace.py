"""ACE (Chang et al. 2025, "Mitigating Participation Imbalance Bias in Asynchronous Federated Learning",
arXiv 2511.19066; All-Client Engagement): every arrival is a round, and the server steps on the average of
every client's latest update, so a fast client's frequent updates no longer outweigh a slow one's.

At an arrival of client c's Δ_c = θ_c − θ_start: the memory's Δ_c is replaced, then θ ← θ + η·(1/N)·Σ_i Δ_i
over all N clients, a client never heard from counting 0 (the paper averages over all n clients; its own
start fills the memory by one round of every client first). MIFA's step with a round of one arrival and a
server step size η (`fl/algorithms/mifa.py`'s `step_on_latest`). As the one public implementation codes it
(anon8281714-boop/FedStaleAsync, `strategy/ace.py` on `fedstaleasync.py`; no authors' code is public),
except: it divides by the clients heard from so far (N once its optional first round has filled the
memory), and it forces one local step a dispatch (here every dispatch trains the run's `local_epochs`,
equal client work for every algorithm). Not built: ACED, the delay-aware variant (its cut-off is not in
any public code). s(τ) plays no part.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from asyncfl.fl.algorithms.mifa import step_on_latest
from asyncfl.fl.strategy import AsyncParameters, RemembersAcrossRounds, ServerMemory, Update

if TYPE_CHECKING:
    from asyncfl.models import ModelState
    from asyncfl.settings.config import TrainConfig


@dataclass(frozen=True)
class ACEParameters(AsyncParameters):
    """Attributes:
    concurrency: M, clients kept in flight [J] (`AsyncParameters`).
    server_lr: η, the server's step on the average of the latest updates [1.0: the project's choice; the
        peer's code requires one, the paper tunes it].
    """

    server_lr: float


class ACE(RemembersAcrossRounds):
    """At every arrival, θ ← θ + η·(1/N)·Σ_c Δ_c, Δ_c client c's latest update (`ACEParameters`)."""

    convex = False  # a step on the remembered updates

    def __init__(self, config: TrainConfig):
        super().__init__(config)
        self.parameters: ACEParameters = ACEParameters.of(config)

    def aggregate_with_memory(
        self, global_model: ModelState, updates: list[Update], memory: ServerMemory, clients: int
    ) -> tuple[ModelState, list[float], ServerMemory]:
        """The memory's "latest" holds each client's latest update Δ_c; `clients` is N."""
        return step_on_latest(global_model, updates, memory, self.parameters.server_lr, clients)
