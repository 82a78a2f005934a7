"""FedASMU (Liu et al., AAAI 2024, "FedASMU: Efficient Asynchronous Federated Learning with Dynamic
Staleness-aware Model Update"): every arrival is a round, mixed in with a weight that a per-client
staleness factor sets and learns; and every client, partway through its training, asks for the global
model and merges it into its own.

Server, at an arrival of client c's θ_c that started from version v, the global model at version t − 1
(t aggregations counting this one) and o = τ + 1 versions behind:
ξ = λ_c·√t / (t·o^σ_c) + ι_c (at least 0), α = μ_α·ξ / (1 + μ_α·ξ), θ ← (1 − α)·θ + α·θ_c (the paper's
equations (1) and (2)). Device, after k = max(1, round(f·S)) of its S local steps, if the global model
moved on to version t′ > v: φ = γ_c/√(t′ + 1) · (1 − υ_c/√(t′ − v + 2)) (at least 0),
β = μ_β·φ / (1 + μ_β·φ), θ_local ← θ_local + β·(θ_t′ − θ_local) (equations (7) and (8)); the fresh model's
transfer overlaps the training (the paper's "additional downlink bandwidth"), so it adds no time.

The paper's own equations are not public in a form this project could read, nor its code: this is the
form of a public transcription (wangpengyu2004/AFVLM_CM, `code/afl_vlm/methods/fedasmu.py`, commit
24c2b011), which cites the paper's equations, with its defaults: λ 1, σ 0.5, ι 0, γ 1, υ 0.5 per client at
the start, μ_α = μ_β = 1, f = 0.5. As there, the paper's gradient steps on the factors are a signal
r = clip(ℓ_prev − ℓ, −1, 1), the drop in the client's training loss since its previous update (0 for its
first): λ += ηr, σ −= ηr, ι += ηr/o, γ += ηr, υ −= ηr (λ, γ at least 1e-6; σ, ι, υ at least 0), η 0.01;
and the paper's learned choice of when to ask (a reinforcement-learning policy) is the fixed share f.
Where this differs from the transcription: ℓ is the client's mean loss over its last local epoch (there,
its last step's); a device's γ and υ learn when its update reaches the server (there, at its upload); an
update over the staleness cap (`max_staleness`, o > cap + 1 there) changes no factor. s(τ) plays no part
(docs/client-work.md "FedASMU").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from asyncfl.fl.strategy import AsyncParameters, RemembersAcrossRounds, ServerMemory, Update
from asyncfl.settings.rules import POSITIVE, Group, setting

if TYPE_CHECKING:
    from asyncfl.models import ModelState
    from asyncfl.settings.config import TrainConfig

# Each client's factors at the start (λ, σ, ι of the server's weight; γ, υ of the device's), the
# transcription's defaults
INITIAL_FACTORS = {"lambda": 1.0, "sigma": 0.5, "iota": 0.0, "gamma": 1.0, "upsilon": 0.5}
SMALLEST_SCALE = 1e-6  # λ and γ stay at least this, as in the transcription


@dataclass(frozen=True)
class FedASMUParameters(AsyncParameters):
    """Attributes:
    concurrency: M, clients kept in flight [J] (`AsyncParameters`).
    """

    fedasmu_refresh_fraction: float = setting(Group.SERVER, 0.5, lowest=POSITIVE, at_most=1.0)
    """f: a client asks for the global model after round(f·S) of its S local steps (at least one)
    (**project's choice**: the transcription's fixed share, for the paper's learned request time)"""
    fedasmu_mu_alpha: float = setting(Group.SERVER, 1.0, lowest=POSITIVE, at_most=1e6)
    """μ_α of the server's weight α = μ_α·ξ/(1 + μ_α·ξ) (the transcription's default)"""
    fedasmu_mu_beta: float = setting(Group.SERVER, 1.0, lowest=POSITIVE, at_most=1e6)
    """μ_β of the device's merge weight β = μ_β·φ/(1 + μ_β·φ) (the transcription's default)"""
    fedasmu_meta_lr: float = setting(Group.SERVER, 0.01, lowest=POSITIVE, at_most=1e6)
    """η, the step of every client's factors on its loss signal (the transcription's default, on both sides)"""


class FedASMU(RemembersAcrossRounds):
    """θ ← (1 − α)θ + α·θ_c with a learned staleness factor; each client merges the fresher global model
    mid-training (`FedASMUParameters`)."""

    merges_fresh_model = True

    def __init__(self, config: TrainConfig):
        super().__init__(config)
        self.parameters: FedASMUParameters = FedASMUParameters.of(config)

    def merge_after(self, steps: int) -> int:
        return min(steps, max(1, round(steps * self.parameters.fedasmu_refresh_fraction)))

    def merge_weight(self, client: int, started: int, fresh: int, memory: ServerMemory) -> float:
        factors = memory.get("factors", {}).get(client, INITIAL_FACTORS)
        phi = factors["gamma"] / math.sqrt(fresh + 1) * (1.0 - factors["upsilon"] / math.sqrt(fresh - started + 2))
        return bounded(self.parameters.fedasmu_mu_beta, max(0.0, phi))

    def aggregate_with_memory(
        self, global_model: ModelState, updates: list[Update], memory: ServerMemory, clients: int
    ) -> tuple[ModelState, list[float], ServerMemory]:
        """The memory holds each client's factors ("factors") and its last training loss ("loss"); the
        version t is read off the update (its start version plus τ), so the step needs no clock of its own."""
        from asyncfl.fl.aggregation import linear_combination  # torch: loaded here, not with the config

        (update,) = updates
        factors = dict(memory.get("factors", {}).get(update.client, INITIAL_FACTORS))
        aggregations = update.staleness + update.started + 1  # t: this aggregation's number
        behind = update.staleness + 1  # o
        xi = factors["lambda"] * math.sqrt(aggregations) / (aggregations * behind ** factors["sigma"]) + factors["iota"]
        alpha = bounded(self.parameters.fedasmu_mu_alpha, max(0.0, xi))
        losses = dict(memory.get("loss", {}))
        signal = loss_signal(losses.get(update.client, update.train_loss), update.train_loss)
        losses[update.client] = update.train_loss
        step = self.parameters.fedasmu_meta_lr * signal
        factors = {
            "lambda": max(SMALLEST_SCALE, factors["lambda"] + step),
            "sigma": max(0.0, factors["sigma"] - step),
            "iota": max(0.0, factors["iota"] + step / behind),
            "gamma": max(SMALLEST_SCALE, factors["gamma"] + step),
            "upsilon": max(0.0, factors["upsilon"] - step),
        }
        new = linear_combination([(1.0 - alpha, global_model), (alpha, update.state)])
        return new, [alpha], {"factors": {**memory.get("factors", {}), update.client: factors}, "loss": losses}


def bounded(mu: float, value: float) -> float:
    """μ·x/(1 + μ·x): FedASMU's weights, in [0, 1) for x ≥ 0."""
    return mu * value / (1.0 + mu * value)


def loss_signal(previous: float, loss: float) -> float:
    """r = clip(ℓ_prev − ℓ, −1, 1): how much a client's training loss fell since its previous update (0
    where either is not a number, as in a timing-only run)."""
    drop = previous - loss
    return max(-1.0, min(1.0, drop)) if math.isfinite(drop) else 0.0
