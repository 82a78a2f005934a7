"""MIFA (Gu et al., NeurIPS 2021, "Fast Federated Learning in the Presence of Arbitrary Device
Unavailability"): the server remembers every client's latest update and steps on their average over all
N clients, so that a client that is away (slow, offline) still counts with the last update it sent.

As APPFL codes it (`appfl/algorithm/aggregator/mifa_aggregator.py` with its `MIFATrainer`, commit
4914bb79): every K arrivals, θ ← θ + (1/N)·Σ_c Δ_c over the memory of each client's latest update
Δ_c = θ_c − θ_start,c (0 for a client never heard from), this round's arrivals included (a client heard
twice in one round counts with its later update); no server step size. APPFL keeps the memory on the
clients, which upload the difference from their previous update; here the server keeps it (the same
sum), in each entry's dtype, and it is part of the checkpoint. Integer entries take the largest count,
as in every asyncfl algorithm. s(τ) plays no part.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from asyncfl.fl.strategy import BufferedParameters, RemembersAcrossRounds, ServerMemory, Update

if TYPE_CHECKING:
    from asyncfl.models import ModelState
    from asyncfl.settings.config import TrainConfig


@dataclass(frozen=True)
class MIFAParameters(BufferedParameters):
    """Attributes:
    concurrency: M, clients kept in flight [J] (`AsyncParameters`).
    buffer_size: K, arrivals per aggregation [J] (`BufferedParameters`).
    """


class MIFA(RemembersAcrossRounds):
    """Every K arrivals, θ ← θ + (1/N)·Σ_c Δ_c, Δ_c client c's latest update (`MIFAParameters`)."""

    convex = False  # a step on the remembered updates

    def __init__(self, config: TrainConfig):
        super().__init__(config)
        self.parameters: MIFAParameters = MIFAParameters.of(config)

    def aggregate_with_memory(
        self, global_model: ModelState, updates: list[Update], memory: ServerMemory, clients: int
    ) -> tuple[ModelState, list[float], ServerMemory]:
        """The memory's "latest" holds each client's latest update Δ_c; `clients` is N."""
        return step_on_latest(global_model, updates, memory, 1.0, clients)


def step_on_latest(
    global_model: ModelState, updates: list[Update], memory: ServerMemory, step: float, clients: int
) -> tuple[ModelState, list[float], ServerMemory]:
    """θ + step·Σ_c Δ_c / N over the memory's "latest" Δ_c of every client heard from, `updates` stored
    first (a client's later update replacing its earlier one), N = `clients`: MIFA's step (1) and ACE's (η)."""
    import torch  # loaded here, not with the config

    floating = [key for key, value in global_model.items() if value.is_floating_point()]
    latest = dict(memory.get("latest", {}))
    for update in updates:
        latest[update.client] = {
            key: (update.state[key].double() - update.start[key].double()).to(update.state[key].dtype)
            for key in floating
        }
    new = {}
    for key, value in global_model.items():
        if key in floating:  # a fixed order: the sum's rounding does not depend on arrival order
            total = sum((latest[client][key].double() for client in sorted(latest)), torch.zeros_like(value.double()))
            new[key] = (value.double() + step * total / clients).to(value.dtype)
        else:
            counts = [value, *(u.state[key] for u in updates), *(u.start[key] for u in updates)]
            new[key] = torch.stack(counts).amax(dim=0)
    return new, [step / clients] * len(updates), {"latest": latest}
