"""FedAC (as AFL-Lib codes it, `alg/fedac.py`, commit b6dab18 of https://github.com/boyi-liu/AFL-Lib):
SCAFFOLD's control variates made asynchronous, and an Adam-like server step over a buffer of K updates
each weighted by how well it agrees with the global model's move since its client was sent.

Client c, sent θ_start and the server's control variate C with it, trains to θ_c, then corrects once,
θ'_c = θ_c − γ·(C − C_c) (γ its learning rate), and renews its own control variate
Ĉ_c = (θ_start − θ'_c)/(E·γ) − (C − C_c) (E its local epochs), sending Δ_c = θ'_c − θ_start and
ΔC_c = Ĉ_c − C_c. Every K arrivals the server weighs each by r_c = max(cos(θ − θ_start,c, Δ_c), 0.1),
w_c = r_c/(Σ r + ε), and with Δ = Σ w_c·Δ_c steps
    m ← β1·m + (1 − β1)·Δ,  v ← β2·v + (1 − β2)·Δ²,  θ ← θ + η·(β1·m + (1 − β1)·Δ)/(√v + ε),
    C ← C + Σ w_c·ΔC_c,   ε = 1e-8.
The client's correction comes after its training, so the server makes it here, from the client's
model, its learning rate (the dispatch's first epoch's γ), the C its version was sent with
(`Strategy.dispatch_snapshot`) and the client's C_c, which it keeps (each a function of its client's own
arrivals, as on the client); every tensor is in the memory, so a checkpoint holds it. Where AFL-Lib
differs: its first K arrivals take cos(θ, Δ_c) (the global model itself, not its move: its round
counter has not passed K), here the move from the start; it steps the parameters alone, here every
floating entry (batch-norm statistics too, as every asyncfl algorithm). Integer entries take the
largest count. s(τ) plays no part.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from asyncfl.fl.strategy import BufferedParameters, RemembersAcrossRounds, ServerMemory, Update
from asyncfl.settings.rules import NON_NEGATIVE, POSITIVE, Group, setting

if TYPE_CHECKING:
    import torch

    from asyncfl.models import ModelState
    from asyncfl.settings.config import TrainConfig

EPSILON = 1e-8  # AFL-Lib's, in the weights' and the step's denominators
LEAST_AGREEMENT = 0.1  # r_c's floor: an update against the global move still counts a little


@dataclass(frozen=True)
class FedACParameters(BufferedParameters):
    """Attributes:
    concurrency: M, clients kept in flight [J] (`AsyncParameters`).
    buffer_size: K, arrivals per aggregation [J] (`BufferedParameters`; AFL-Lib's 5).
    """

    fedac_lr: float = setting(Group.SERVER, 0.001, lowest=POSITIVE, at_most=1e6)
    """η of FedAC's server step (AFL-Lib's)"""
    fedac_beta1: float = setting(Group.SERVER, 0.6, lowest=NON_NEGATIVE, under=1.0)
    """β1 of FedAC's first moment (AFL-Lib's)"""
    fedac_beta2: float = setting(Group.SERVER, 0.9, lowest=NON_NEGATIVE, under=1.0)
    """β2 of FedAC's second moment (AFL-Lib's)"""


class FedAC(RemembersAcrossRounds):
    """Every K arrivals, an Adam-like step on the agreement-weighted corrected updates (`FedACParameters`)."""

    convex = False  # an adaptive step, not a combination of models

    def __init__(self, config: TrainConfig):
        super().__init__(config)
        self.parameters: FedACParameters = FedACParameters.of(config)
        self.local_epochs = config.local_epochs

    def dispatch_snapshot(self, memory: ServerMemory) -> ServerMemory:
        """The server's control variate C, sent with the model (absent before the first aggregation: 0)."""
        return {"control": memory["control"]} if "control" in memory else {}

    def aggregate_with_memory(
        self, global_model: ModelState, updates: list[Update], memory: ServerMemory, clients: int
    ) -> tuple[ModelState, list[float], ServerMemory]:
        """The memory's "control" is C, "controls" each client's C_c, "m" and "v" the moments (absent: 0)."""
        import torch  # loaded here, not with the config

        floating = [key for key, value in global_model.items() if value.is_floating_point()]
        theta = {key: global_model[key].double() for key in floating}
        controls = dict(memory.get("controls", {}))
        steps, renewals, agreements = [], [], []
        for update in updates:
            step, renewal = self.corrected(update, controls.get(update.client), floating)
            controls[update.client] = {key: value.to(global_model[key].dtype) for key, value in renewal[1].items()}
            moved = {key: theta[key] - update.start[key].double() for key in floating}
            agreements.append(max(cosine(moved, step), LEAST_AGREEMENT))
            steps.append(step)
            renewals.append(renewal[0])
        weights = [agreement / (sum(agreements) + EPSILON) for agreement in agreements]
        beta1, beta2, lr = self.parameters.fedac_beta1, self.parameters.fedac_beta2, self.parameters.fedac_lr
        m, v, control = (remembered(memory.get(name), theta) for name in ("m", "v", "control"))
        new, kept_m, kept_v, kept_control = {}, {}, {}, {}
        for key in floating:
            delta = sum((w * step[key] for w, step in zip(weights, steps, strict=True)), torch.zeros_like(theta[key]))
            first = beta1 * m[key] + (1 - beta1) * delta
            second = beta2 * v[key] + (1 - beta2) * delta**2
            new[key] = theta[key] + lr * (beta1 * first + (1 - beta1) * delta) / (second.sqrt() + EPSILON)
            change = sum((w * dc[key] for w, dc in zip(weights, renewals, strict=True)), torch.zeros_like(theta[key]))
            dtype = global_model[key].dtype
            kept_m[key], kept_v[key], kept_control[key] = (
                first.to(dtype),
                second.to(dtype),
                (control[key] + change).to(dtype),
            )
        model = {
            key: new[key].to(value.dtype) if key in floating else largest_count(key, global_model, updates)
            for key, value in global_model.items()
        }
        after = {"m": kept_m, "v": kept_v, "control": kept_control, "controls": controls}
        return model, [lr * w for w in weights], after

    def corrected(
        self, update: Update, own: ModelState | None, floating: list[str]
    ) -> tuple[dict[str, torch.Tensor], tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]]:
        """Δ_c of the client's corrected model, and (ΔC_c, Ĉ_c): its control variate's change and renewal."""
        gamma = update.lrs[0]
        start = {key: update.start[key].double() for key in floating}
        sent, mine = remembered(update.sent_memory.get("control"), start), remembered(own, start)
        gap = {key: sent[key] - mine[key] for key in floating}
        model = {key: update.state[key].double() - gamma * gap[key] for key in floating}
        renewed = {key: (start[key] - model[key]) / (self.local_epochs * gamma) - gap[key] for key in floating}
        step = {key: model[key] - start[key] for key in floating}
        return step, ({key: renewed[key] - mine[key] for key in floating}, renewed)


def remembered(kept: ModelState | None, like: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A remembered state in float64, or zeros shaped as `like` where there is none yet."""
    import torch  # loaded here, not with the config

    if kept is None:
        return {key: torch.zeros_like(value) for key, value in like.items()}
    return {key: kept[key].double() for key in like}


def cosine(first: dict[str, torch.Tensor], second: dict[str, torch.Tensor]) -> float:
    """cos of two states taken as one vector each (0 where either has length 0)."""
    dot = sum(float((first[k] * second[k]).sum()) for k in first)
    lengths = math.sqrt(sum(float((first[k] ** 2).sum()) for k in first)) * math.sqrt(
        sum(float((second[k] ** 2).sum()) for k in first)
    )
    return dot / lengths if lengths > 0 else 0.0


def largest_count(key: str, global_model: ModelState, updates: list[Update]) -> torch.Tensor:
    """An integer entry (a batch-norm count) after the step: the largest of the model's and the updates'."""
    import torch  # loaded here, not with the config

    counts = [global_model[key], *(u.state[key] for u in updates), *(u.start[key] for u in updates)]
    return torch.stack(counts).amax(dim=0)
