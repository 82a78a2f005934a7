"""PORT (Su & Li, IWQoS 2022, "How Asynchronous can Federated Learning Be?"): FedBuff's buffer of K
arrivals, each client model weighted by how fresh it is and by how well its update agrees with the global
model's last step, so that a stale update pulling against the current direction counts less.

As the authors' group codes it (Plato, `servers/strategies/aggregation/port.py` and
`examples/async/port/port_server.py`): over the K arrivals, with Δ_i = θ_i − θ (from the *current* global
model θ), n_i client i's samples and τ_i its staleness,
    sim_i = cos(θ − θ_prev, Δ_i) if τ_i > 1 and a previous step exists, else 1,
    p_i ∝ n_i·((sim_i + 1)/2·w_sim + B/(τ_i + B)·w_stale),  θ ← θ + Σ_i p_i·Δ_i = Σ_i p_i·θ_i,
θ_prev the global model before the last aggregation (kept in the server memory, and so checkpointed), the
cosine over the floating entries in float64 (0 where a vector has length 0); weights all 0 average
uniformly. Not built: Plato's server waiting for clients more than B versions behind and asking them
for an early report (every dispatch trains the run's `local_epochs`). s(τ) plays no part.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from asyncfl.fl.strategy import BufferedParameters, RemembersAcrossRounds, ServerMemory, Update
from asyncfl.settings.rules import MANY, NON_NEGATIVE, POSITIVE, Group, setting

if TYPE_CHECKING:
    from asyncfl.models import ModelState
    from asyncfl.settings.config import TrainConfig


@dataclass(frozen=True)
class PORTParameters(BufferedParameters):
    """Attributes:
    concurrency: M, clients kept in flight [J] (`AsyncParameters`).
    buffer_size: K, arrivals per aggregation [J] (`BufferedParameters`).
    """

    port_similarity_weight: float = setting(Group.SERVER, 1.0, lowest=NON_NEGATIVE, at_most=1e6)
    """w_sim of PORT's weight n·((cos + 1)/2·w_sim + B/(τ + B)·w_stale) (Plato's example)"""
    port_staleness_weight: float = setting(Group.SERVER, 3.0, lowest=NON_NEGATIVE, at_most=1e6)
    """w_stale of PORT's weight (Plato's example)"""
    port_staleness_bound: int = setting(Group.SERVER, 10, lowest=POSITIVE, at_most=MANY)
    """B of PORT's B/(τ + B) (Plato's)"""


class PORT(RemembersAcrossRounds):
    """Every K arrivals, θ ← Σ_i p_i·θ_i, p_i from size, freshness and agreement (`PORTParameters`)."""

    def __init__(self, config: TrainConfig):
        super().__init__(config)
        self.parameters: PORTParameters = PORTParameters.of(config)

    def aggregate_with_memory(
        self, global_model: ModelState, updates: list[Update], memory: ServerMemory, clients: int
    ) -> tuple[ModelState, list[float], ServerMemory]:
        """The memory's "previous" is the global model before the last aggregation."""
        from asyncfl.fl.aggregation import linear_combination  # torch: loaded here, not with the config

        previous = memory.get("previous")
        floating = [key for key, value in global_model.items() if value.is_floating_point()]
        # the global model's last step, the same for every update of the round: taken once
        step = None if previous is None else {k: global_model[k].double() - previous[k].double() for k in floating}
        total = sum(update.size for update in updates)
        bound = self.parameters.port_staleness_bound
        raw = []
        for update in updates:
            agreement = 1.0
            if update.staleness > 1 and step is not None:
                agreement = cosine(step, {k: update.state[k].double() - global_model[k].double() for k in floating})
            freshness = bound / (update.staleness + bound)
            raw.append(
                update.size
                / total
                * ((agreement + 1) / 2 * self.parameters.port_similarity_weight
                   + freshness * self.parameters.port_staleness_weight)
            )  # fmt: skip
        mass = sum(raw)
        weights = [w / mass for w in raw] if mass > 0 else [1 / len(raw)] * len(raw)
        terms = [(0.0, global_model), *((w, u.state) for w, u in zip(weights, updates, strict=True))]
        return linear_combination(terms), weights, {"previous": global_model}


def cosine(step: ModelState, update: ModelState) -> float:
    """cos(θ − θ_prev, θ_c − θ) of two float64 states entry by entry (0 where either has length 0)."""
    dot = sum(float((step[k] * update[k]).sum()) for k in step)
    lengths = math.sqrt(sum(float((step[k] ** 2).sum()) for k in step)) * math.sqrt(
        sum(float((update[k] ** 2).sum()) for k in step)
    )
    return dot / lengths if lengths > 0 else 0.0
