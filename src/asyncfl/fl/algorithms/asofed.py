"""ASO-Fed (Chen et al., IEEE Big Data 2020, "Asynchronous Online Federated Learning for Edge Devices
with Non-IID Data"): each arrival steps the global model by its client's progress corrected by that
client's previous progress and a running average of it, weighted by the client's share of the samples,
so that a client's repeated pull in one direction counts once, not every time it arrives.

As AFL-Lib codes it (`alg/asofed.py`, commit b6dab18 of https://github.com/boyi-liu/AFL-Lib): at every
arrival of client c, with s = θ_start − θ_c (its progress from the model it was sent), s_prev and h
client c's previous s and running average (0 before its first arrival), β the average's weight,
    ζ = s − s_prev + h,   h ← β·h + (1 − β)·s_prev,   s_prev ← s,   θ ← θ − (n_c/n)·ζ,
n_c its samples, n every client's. AFL-Lib keeps s_prev and h on the clients; here the server keeps
them (the same values: each depends only on its client's own arrivals), in each entry's dtype, in the
checkpoint with n. The clients' proximal term λ is `prox_mu`, FedProx's (μ/2)·‖θ_c − θ_start‖² (0 unless
set: AFL-Lib's λ·‖θ_c − θ_start‖/2 is taken on detached weights, so it moves no gradient). Not built:
the paper's server-side feature weighting (AFL-Lib leaves it commented out) and its clients'
staleness-dependent step size (AFL-Lib has none). Integer entries take the largest count, as in every
asyncfl algorithm. s(τ) plays no part.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from asyncfl.fl.strategy import AsyncParameters, RemembersAcrossRounds, ServerMemory, Update
from asyncfl.settings.rules import UNIT_INTERVAL, Group, setting

if TYPE_CHECKING:
    import numpy as np

    from asyncfl.models import ModelState
    from asyncfl.settings.config import TrainConfig


@dataclass(frozen=True)
class ASOFedParameters(AsyncParameters):
    """Attributes:
    concurrency: M, clients kept in flight [J] (`AsyncParameters`).
    """

    asofed_beta: float = setting(Group.SERVER, 0.5, lowest=UNIT_INTERVAL)
    """β of ASO-Fed's h ← β·h + (1 − β)·s_prev (AFL-Lib's)"""


class ASOFed(RemembersAcrossRounds):
    """At every arrival, θ ← θ − (n_c/n)·(s − s_prev + h) (`ASOFedParameters`)."""

    convex = False  # a step on corrected progress

    def __init__(self, config: TrainConfig):
        super().__init__(config)
        self.parameters: ASOFedParameters = ASOFedParameters.of(config)

    def initial_memory(self, sizes: np.ndarray) -> ServerMemory:
        """n, every client's samples, which weighs each step."""
        return {"samples": int(sizes.sum())}

    def aggregate_with_memory(
        self, global_model: ModelState, updates: list[Update], memory: ServerMemory, clients: int
    ) -> tuple[ModelState, list[float], ServerMemory]:
        """The memory's "previous" and "average" hold each client's s_prev and h (absent: 0), "samples"
        n; the updates step one after another (there is one: every arrival is a round)."""
        import torch  # loaded here, not with the config

        beta, samples = self.parameters.asofed_beta, memory["samples"]
        floating = [key for key, value in global_model.items() if value.is_floating_point()]
        previous, average = dict(memory.get("previous", {})), dict(memory.get("average", {}))
        model = {key: global_model[key].double() for key in floating}
        for update in updates:
            progress = {key: update.start[key].double() - update.state[key].double() for key in floating}
            before, momentum = (remembered(kept.get(update.client), progress) for kept in (previous, average))
            share = update.size / samples
            model = {key: model[key] - share * (progress[key] - before[key] + momentum[key]) for key in floating}
            dtypes = {key: update.state[key].dtype for key in floating}
            average[update.client] = {
                key: (beta * momentum[key] + (1 - beta) * before[key]).to(dtypes[key]) for key in floating
            }
            previous[update.client] = {key: progress[key].to(dtypes[key]) for key in floating}
        new = {}
        for key, value in global_model.items():
            if key in floating:
                new[key] = model[key].to(value.dtype)
            else:
                counts = [value, *(u.state[key] for u in updates), *(u.start[key] for u in updates)]
                new[key] = torch.stack(counts).amax(dim=0)
        shares = [update.size / samples for update in updates]
        return new, shares, {"samples": samples, "previous": previous, "average": average}


def remembered(kept: ModelState | None, like: ModelState) -> ModelState:
    """A client's remembered state in float64, or zeros shaped as `like` before its first arrival."""
    import torch  # loaded here, not with the config

    if kept is None:
        return {key: torch.zeros_like(value) for key, value in like.items()}
    return {key: kept[key].double() for key in like}
