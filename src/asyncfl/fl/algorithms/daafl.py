"""DAAFL (Jiang et al., AAAI 2024, "Data Disparity and Temporal Unavailability Aware Asynchronous
Federated Learning for Predictive Maintenance on Transportation Fleets"): every arrival mixes its
client's model into the global one with a weight that keeps each client's total weight on the course
of its share of the data, so that a client that arrives often (fast, always online) does not outweigh
one that arrives rarely, and one back after a long absence catches up.

As AFL-Lib codes it (`alg/daafl.py`, commit b6dab18 of https://github.com/boyi-liu/AFL-Lib): at the
v-th aggregation (v = 0, 1, …), the arrival of client c with d_c = n_c/n its share of the samples, N
the clients and A_c the sum of its weights so far (0 before its first arrival),
    α = min(1, d_c/N·(v + 1) − A_c),   θ ← α·θ_c + (1 − α)·θ,   A_c ← A_c + α,   v ← v + 1.
α stays in (0, 1]: each weight brings A_c to its course d_c/N·(v + 1) (or short of it, where the 1
caps it), and the course grows with v. Where this differs from that code: BatchNorm's
running statistics combine with the same α as the parameters, as in every asyncfl algorithm (AFL-Lib's
server keeps its own: it mixes the parameters only), and integer entries take the largest count. The
server keeps v, every A_c and n in its memory, checkpointed. s(τ) plays no part.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from asyncfl.fl.strategy import AsyncParameters, RemembersAcrossRounds, ServerMemory, Update

if TYPE_CHECKING:
    import numpy as np

    from asyncfl.models import ModelState
    from asyncfl.settings.config import TrainConfig


@dataclass(frozen=True)
class DAAFLParameters(AsyncParameters):
    """Attributes:
    concurrency: M, clients kept in flight [J] (`AsyncParameters`).
    """


class DAAFL(RemembersAcrossRounds):
    """At every arrival, θ ← α·θ_c + (1 − α)·θ, α = min(1, d_c/N·(v + 1) − A_c) (`DAAFLParameters`)."""

    def __init__(self, config: TrainConfig):
        super().__init__(config)
        self.parameters: DAAFLParameters = DAAFLParameters.of(config)

    def initial_memory(self, sizes: np.ndarray) -> ServerMemory:
        """n, every client's samples, of which a client's share d_c is taken."""
        return {"samples": int(sizes.sum())}

    def aggregate_with_memory(
        self, global_model: ModelState, updates: list[Update], memory: ServerMemory, clients: int
    ) -> tuple[ModelState, list[float], ServerMemory]:
        """The memory's "version" is v, "weights" each client's A_c (absent: 0), "samples" n; `clients`
        is N. The updates mix in one after another (there is one: every arrival is a round)."""
        from asyncfl.fl.aggregation import linear_combination  # torch: loaded here, not with the config

        version, weights, samples = memory.get("version", 0), dict(memory.get("weights", {})), memory["samples"]
        model, coefficients = global_model, list[float]()
        for update in updates:
            alpha = daafl_weight(update.size / samples, clients, version, weights.get(update.client, 0.0))
            model = linear_combination([(1.0 - alpha, model), (alpha, update.state)])
            weights[update.client] = weights.get(update.client, 0.0) + alpha
            version, coefficients = version + 1, [*coefficients, alpha]
        return model, coefficients, {"samples": samples, "version": version, "weights": weights}


def daafl_weight(share: float, clients: int, version: int, so_far: float) -> float:
    """α = min(1, d_c/N·(v + 1) − A_c): the weight that brings the client's total A_c to its share's
    course d_c/N·(v + 1), at most the whole model."""
    return min(1.0, share / clients * (version + 1) - so_far)
