"""FedStaleWeight (Ma, Tu, Chen and Janapa Reddi 2024, "FedStaleWeight: Buffered Asynchronous Federated
Learning with Fair Aggregation via Staleness Reweighting"): FedBuff's buffer of K arrivals, each update
weighted by its client's average observed staleness, so that a slow client, whose updates arrive rarely
and stale, is not outweighed by the fast ones that fill most buffers.

As the authors' test bench codes it (`afl_bench/experiments/expected_staleness.py`): the server keeps
each client's last W stalenesses τ; at a round it first records every buffered update's τ, then weights
update a by w_a = τ̄_{c_a} / Σ_b τ̄_{c_b} (τ̄ the mean of the client's kept τ) and steps θ ← θ + Σ_a w_a Δ_a,
Δ_a = θ_a − θ_start,a, with no server step size. A buffer whose clients have all only ever been fresh
(every τ̄ = 0, as the first round's) weighs nothing: the model stays, and the version still counts.

Where this differs from that code: the window drops a client's oldest τ once it holds W (theirs drops
the newest, against its own comment, so that it keeps the first W − 1 for good); BatchNorm's running
statistics combine with the same weights as the parameters, as in every asyncfl algorithm (theirs
leaves entries named "bn" at the global model's). s(τ) plays no part: the average staleness is the
weight (the staleness settings do not apply).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from asyncfl.fl.strategy import BufferedParameters, RemembersAcrossRounds, ServerMemory, Update
from asyncfl.settings.rules import MANY, POSITIVE, Group, setting

if TYPE_CHECKING:
    from asyncfl.models import ModelState
    from asyncfl.settings.config import TrainConfig


@dataclass(frozen=True)
class FedStaleWeightParameters(BufferedParameters):
    """Attributes:
    concurrency: M, clients kept in flight [J] (`AsyncParameters`).
    buffer_size: K, arrivals per aggregation [J] (`BufferedParameters`).
    """

    staleness_window: int = setting(Group.SERVER, 5, lowest=POSITIVE, at_most=MANY)
    """W: FedStaleWeight averages a client's last W stalenesses (the authors' window)"""


class FedStaleWeight(RemembersAcrossRounds):
    """Buffer K arrivals, θ ← θ + Σ_a τ̄_{c_a}/Σ_b τ̄_{c_b} · Δ_a, τ̄_c the mean of client c's last W
    stalenesses, this round's included (`FedStaleWeightParameters`)."""

    convex = False  # a step on the weighted updates

    def __init__(self, config: TrainConfig):
        super().__init__(config)
        self.parameters: FedStaleWeightParameters = FedStaleWeightParameters.of(config)

    def aggregate_with_memory(
        self, global_model: ModelState, updates: list[Update], memory: ServerMemory, clients: int
    ) -> tuple[ModelState, list[float], ServerMemory]:
        """The memory's "staleness" holds each client's last W stalenesses, oldest first."""
        from asyncfl.fl.aggregation import linear_combination  # torch: loaded here, not with the config

        history = recorded_staleness(
            memory.get("staleness", {}), [(u.client, u.staleness) for u in updates], self.parameters.staleness_window
        )
        coefficients = staleness_reweighting([sum(history[u.client]) / len(history[u.client]) for u in updates])
        terms = [(1.0, global_model)]
        for coefficient, update in zip(coefficients, updates, strict=True):
            terms += [(coefficient, update.state), (-coefficient, update.start)]
        return linear_combination(terms), coefficients, {"staleness": history}


def recorded_staleness(
    history: dict[int, list[int]], arrivals: list[tuple[int, int]], window: int
) -> dict[int, list[int]]:
    """Each client's last `window` stalenesses after the arrivals (client, τ) are recorded in order."""
    after = {client: list(kept) for client, kept in history.items()}
    for client, staleness in arrivals:
        after[client] = [*after.get(client, []), staleness][-window:]
    return after


def staleness_reweighting(average_staleness: list[float]) -> list[float]:
    """w_a = τ̄_a / Σ_b τ̄_b; all 0 where every τ̄ is 0 (the authors': such a buffer moves nothing)."""
    total = sum(average_staleness)
    return [value / total if total > 0 else 0.0 for value in average_staleness]
