"""CA2FL (Wang et al., ICLR 2024, "Tackling the Data Heterogeneity in Asynchronous Federated Learning with
Cached Update Calibration", Algorithm 1): FedBuff's buffer of K arrivals, each update calibrated by the
server's cache of its client's last one.

The server keeps h_c, client c's last update, for every client; a round of K arrivals steps
θ ← θ + η·(h + Σ_a (Δ_a − h_{c_a}) / K), where h is the mean of every client's cache as the round begins
(zero for one not yet heard from), and each arrival's update then replaces its client's cache. With
stale updates from fast clients dominating a buffer, h stands in for the slow clients' data, which is
the paper's answer to heterogeneous data under asynchrony. The cache is part of the checkpoint.

Where this follows the two public implementations: an arrival's update is calibrated by its client's
cache as it stands when it arrives (so a client heard twice in one buffer is calibrated by its first
update the second time), as FLGo's does; AFL-Lib's computes h after the round's caches are renewed and,
never recording which clients its buffer holds, calibrates nothing (its v is the caches' mean alone):
not the paper's box, so not emulated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from asyncfl.fl.strategy import AsyncStrategy, BufferedParameters, ServerMemory, Update

if TYPE_CHECKING:
    from asyncfl.models import ModelState
    from asyncfl.settings.config import TrainConfig


@dataclass(frozen=True)
class CA2FLParameters(BufferedParameters):
    """Attributes:
    concurrency: M, clients kept in flight [J] (`AsyncParameters`).
    buffer_size: K, arrivals per aggregation [J] (`BufferedParameters`).
    server_lr: η, the server's step on the calibrated update, > 0 [1.0: FLGo's default; the paper tunes
        it; AFL-Lib's 0.01].
    """

    server_lr: float


class CA2FL(AsyncStrategy):
    """Buffer K arrivals, θ ← θ + η·(h + Σ s(τ_a)(Δ_a − h_{c_a})/K), then h_{c_a} ← Δ_a (`CA2FLParameters`;
    s(τ) ≡ 1, the paper's, unless the run sets a staleness function: the project's choice to allow one)."""

    convex = False  # a step on the calibrated update, scaled by η

    def __init__(self, config: TrainConfig):
        super().__init__(config)
        self.parameters: CA2FLParameters = CA2FLParameters.of(config)

    def aggregate(self, global_model: ModelState, updates: list[Update]) -> tuple[ModelState, list[float]]:
        """The step from an empty cache (CA2FL's first round: h = 0, FedBuff's mean update times η)."""
        new, coefficients, _ = self.aggregate_with_memory(global_model, updates, {}, 1)
        return new, coefficients

    def aggregate_with_memory(
        self, global_model: ModelState, updates: list[Update], memory: ServerMemory, clients: int
    ) -> tuple[ModelState, list[float], ServerMemory]:
        """The step on the calibrated update; the memory's "cache" holds h_c, by client."""
        arrivals = [(u.client, u.state, u.start, u.staleness_weight) for u in updates]
        new, coefficients, cache = calibrated_update(
            global_model, arrivals, memory.get("cache", {}), clients, self.parameters.server_lr
        )
        return new, coefficients, {"cache": cache}


def calibrated_update(
    global_model: ModelState,
    updates: list[tuple[int, ModelState, ModelState, float]],
    cache: dict[int, ModelState],
    clients: int,
    server_lr: float,
) -> tuple[ModelState, list[float], dict[int, ModelState]]:
    """CA2FL: θ ← θ + η·(h + Σ_a s(τ_a)(Δ_a − h_{c_a}) / K), over the K arrivals a = (client c_a, θ_a,
    θ_start,a, s(τ_a)), Δ_a = θ_a − θ_start,a; h = Σ_c h_c / n, the mean of the `cache` of every one of
    the n = `clients` clients' last update as the round begins (0 for a client not yet heard from); h_{c_a}
    the cache as the update arrives, which it then replaces. Over floating entries, in float64, the
    cache kept in each entry's dtype; integer entries take the largest count, as everywhere.

    Returns the new state, each update's coefficient η·s(τ_a)/K, and the cache after the round.
    """
    import torch  # loaded here, not with the config

    floating = [key for key, value in global_model.items() if value.is_floating_point()]
    direction = {key: torch.zeros_like(global_model[key], dtype=torch.float64) for key in floating}
    for client in sorted(cache):  # a fixed order: the sum's rounding does not depend on arrival order
        for key in floating:
            direction[key] += cache[client][key].double() / clients
    after, coefficients = dict(cache), []
    for client, state, start, weight in updates:
        delta = {key: state[key].double() - start[key].double() for key in floating}
        for key in floating:
            previous = after[client][key].double() if client in after else 0.0
            direction[key] += weight * (delta[key] - previous) / len(updates)
        after[client] = {key: delta[key].to(state[key].dtype) for key in floating}
        coefficients.append(server_lr * weight / len(updates))
    new = {}
    for key, value in global_model.items():
        if key in direction:
            new[key] = (value.double() + server_lr * direction[key]).to(value.dtype)
        else:
            counts = [value, *(state[key] for _, state, _, _ in updates), *(start[key] for _, _, start, _ in updates)]
            new[key] = torch.stack(counts).amax(dim=0)
    return new, coefficients, after
