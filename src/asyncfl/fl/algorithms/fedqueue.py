"""FedQueue (Li et al. 2026, "FedQueue: Queue-Aware Federated Learning for Cross-Facility HPC Training"):
synchronous rounds whose clients each get the local work that fits a round period after their predicted
delay, an admission that defers an update whose delay ran over its prediction to the next round, and a
staleness-aware mean of the admitted and the deferred.

As APPFL's example codes it (`examples/QFL/algorithms/queue_async.py`, commit b9fdb2c of
https://github.com/APPFL/APPFL): in round r, each client k, with q̂_k its predicted delay and c_k its
local steps per second (measured once, by a warm-up), trains
    E_k = max(1, ⌊c_k·J_k⌋) steps, J_k = max(0.5, T − q̂_k − θ),   at η_k = max(γ·E_min/E_k, ρ·γ)
(E_min the round's least E_k: a client that steps more steps smaller). The round waits for every
client; then, for each, q̂_k ← (1 − β)·q̂_k + β·q_k (q_k its delay this round), and its update is admitted
if q_k ≤ q̂_k + α·T, else deferred to the next round. The new model is θ + Σ w_i·Δ_i / Σ w_i over the
admitted (w = φ(0) = 1) and the deferred of the round before (w = φ(1) = 1/2, the example's harmonic
1/(1 + s)), Δ = θ_k − θ_start; the example's default equal client weights cancel.

Where this differs from that example: a client's delay q_k is its dispatch's time outside training
(latency and transfers, the clients' world's), not a batch queue's wait; c_k is its steps per virtual
second at its median compute (the warm-up's measure, taken at no cost); E_k is at most the run's
`local_epochs` of steps (a dispatch trains its epochs' sample orders, cut); the round's clients are J
drawn as sync draws them (the example trains all), and one replacing a lost dispatch takes its E_min from
those dispatched with it (the example loses none); integer entries take the largest count (every
asyncfl algorithm's). A deferred update's coefficient is logged 0 in its own round's events.csv. The
server keeps every q̂_k and the deferred updates in its memory, checkpointed. s(τ) plays no part.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from asyncfl.fl.strategy import Parameters, ServerMemory, Strategy, Update
from asyncfl.settings.rules import NON_NEGATIVE, POSITIVE, UNIT_INTERVAL, Group, setting

if TYPE_CHECKING:
    import numpy as np

    from asyncfl.models import ModelState
    from asyncfl.settings.config import TrainConfig

LEAST_BUDGET = 0.5  # J_k's floor, seconds (the example's)


@dataclass(frozen=True)
class FedQueueParameters(Parameters):
    """FedQueue's round period, its budget's safety margin, its admission and its predictor."""

    fedqueue_period: float = setting(Group.SERVER, 10.0, lowest=POSITIVE, at_most=1e9)
    """T, virtual seconds: the round period a client's work is budgeted in (APPFL's example's `Tsync`)"""
    fedqueue_safety: float = setting(Group.SERVER, 2.0, lowest=NON_NEGATIVE, at_most=1e9)
    """θ, virtual seconds: the margin kept out of a client's budget J_k = T − q̂_k − θ (the example's)"""
    fedqueue_slack: float = setting(Group.SERVER, 0.2, lowest=NON_NEGATIVE, at_most=1e6)
    """α: an update is admitted when its delay is at most q̂_k + α·T, else deferred a round (the example's)"""
    fedqueue_smoothing: float = setting(Group.SERVER, 0.5, lowest=UNIT_INTERVAL)
    """β of the delay predictor q̂_k ← (1 − β)·q̂_k + β·q_k (the example's)"""
    fedqueue_initial_delay: float = setting(Group.SERVER, 0.0, lowest=NON_NEGATIVE, at_most=1e9)
    """q̂_k before a client's first arrival, virtual seconds (the example's `q_init`)"""
    fedqueue_lr_floor: float = setting(Group.SERVER, 0.25, lowest=UNIT_INTERVAL)
    """ρ: a client's step size γ·E_min/E_k is at least ρ·γ (the example's `lr_clip_lo`)"""


class FedQueue(Strategy):
    """Rounds of J clients, each with the steps that fit the period after its predicted delay; late
    updates deferred a round at half weight (`FedQueueParameters`)."""

    synchronous = True
    budgets_work = True
    reads_delays = True
    convex = False  # a deferred update is a step from another round's model

    def __init__(self, config: TrainConfig):
        super().__init__(config)
        self.parameters: FedQueueParameters = FedQueueParameters.of(config)

    @property
    def initial_clients(self) -> int:
        return self.clients_per_round

    def clients_after_arrival(self, aggregated: bool) -> int:
        return self.clients_per_round if aggregated else 0

    def clients_after_loss(self, in_round: int) -> int:
        """A lost dispatch is replaced only where the round could no longer gather J results."""
        return max(0, self.clients_per_round - in_round)

    def initial_memory(self, sizes: np.ndarray) -> ServerMemory:
        """Every client's predicted delay q̂_k, and no deferred update yet."""
        return {"predicted": [self.parameters.fedqueue_initial_delay] * len(sizes), "deferred": []}

    def dispatch_work(
        self, clients: list[int], memory: ServerMemory, rates: list[float], whole: list[int]
    ) -> list[tuple[int, float]]:
        """Each client's (E_k, η_k/γ): `rates` its steps per virtual second, `whole` its local epochs' steps."""
        period, safety = self.parameters.fedqueue_period, self.parameters.fedqueue_safety
        steps = [
            min(most, max(1, math.floor(rate * max(LEAST_BUDGET, period - memory["predicted"][client] - safety))))
            for client, rate, most in zip(clients, rates, whole, strict=True)
        ]
        least = min(steps)
        return [(count, max(least / count, self.parameters.fedqueue_lr_floor)) for count in steps]

    def aggregate(self, global_model: ModelState, updates: list[Update]) -> tuple[ModelState, list[float]]:
        """The step of a server that remembers nothing yet: every q̂ at its initial value, nothing deferred."""
        clients = max(update.client for update in updates) + 1
        memory = {"predicted": [self.parameters.fedqueue_initial_delay] * clients, "deferred": []}
        new, coefficients, _ = self.aggregate_with_memory(global_model, updates, memory, clients)
        return new, coefficients

    def aggregate_with_memory(
        self, global_model: ModelState, updates: list[Update], memory: ServerMemory, clients: int
    ) -> tuple[ModelState, list[float], ServerMemory]:
        """The round's updates admitted or deferred by their delays; the admitted and the round before's
        deferred combined (`fedqueue_step`)."""
        predicted, slack = list(memory["predicted"]), self.parameters.fedqueue_slack * self.parameters.fedqueue_period
        late = []
        for update in updates:
            predicted[update.client] = next_prediction(predicted[update.client], update.delay, self.parameters)
            late.append(update.delay > predicted[update.client] + slack)
        carried = [(entry["state"], entry["start"]) for entry in memory["deferred"]]
        fresh = [(update.state, update.start) for update, deferred in zip(updates, late, strict=True) if not deferred]
        new, shares = fedqueue_step(global_model, fresh, carried)
        admitted = iter(shares)
        coefficients = [0.0 if deferred else next(admitted) for deferred in late]
        kept = [
            {"client": update.client, "state": update.state, "start": update.start}
            for update, deferred in zip(updates, late, strict=True)
            if deferred
        ]
        return new, coefficients, {"predicted": predicted, "deferred": kept}


def next_prediction(predicted: float, delay: float, parameters: FedQueueParameters) -> float:
    """q̂_k after an arrival of delay q_k: (1 − β)·q̂_k + β·q_k."""
    beta = parameters.fedqueue_smoothing
    return (1.0 - beta) * predicted + beta * delay


def fedqueue_step(
    global_model: ModelState, fresh: list[tuple[ModelState, ModelState]], carried: list[tuple[ModelState, ModelState]]
) -> tuple[ModelState, list[float]]:
    """θ + Σ w·(θ_k − θ_start)/Σ w over the fresh updates (w = 1) and the carried ones (w = 1/2), each a
    (state, start) pair; the model unchanged where there is none. Returns the fresh updates' shares w/Σw."""
    from asyncfl.fl.aggregation import linear_combination  # torch: loaded here, not with the config

    weights = [1.0] * len(fresh) + [0.5] * len(carried)
    total = sum(weights)
    if not total:
        return global_model, []
    terms = [(1.0, global_model)]
    for weight, (state, start) in zip(weights, [*fresh, *carried], strict=True):
        terms += [(weight / total, state), (-weight / total, start)]
    return linear_combination(terms), [weight / total for weight in weights[: len(fresh)]]
