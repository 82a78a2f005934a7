"""The server's own optimizer (Reddi et al. 2021, "Adaptive Federated Optimization", Algorithm 2;
Hsu et al. 2019's FedAvgM), applied after any algorithm's aggregation: the aggregate θ̄ gives the
pseudo-gradient Δ = θ̄ − θ, and the server steps θ ← θ + η·(its optimizer's direction from Δ), with
moments of its own kept across rounds (checkpointed with the model, so a resumed run steps as an
uninterrupted one). Off by default (`server_optimizer: none`: the aggregate is the new model, the
bytes every run had).

- `sgd` (FedAvgM): m ← μ·m + Δ; θ ← θ + η·m.
- `adagrad`, `adam`, `yogi` (FedAdagrad, FedAdam, FedYogi): m ← β1·m + (1 − β1)·Δ, and
  v ← v + Δ² (adagrad), β2·v + (1 − β2)·Δ² (adam), v − (1 − β2)·Δ²·sign(v − Δ²) (yogi), from
  v = τ²; θ ← θ + η·m / (√v + τ). As in the paper, no bias correction.

Only the model's parameters step; its buffers (BatchNorm's running statistics and counts) take the
aggregate's values, as they are no descent direction. Arithmetic in float64, cast back to each
entry's dtype, as the aggregation rules do.
"""

from dataclasses import dataclass

import torch

from asyncfl.fl.strategy import Parameters
from asyncfl.models import ModelState
from asyncfl.spec.config import TrainConfig

Moments = dict[str, ModelState]  # "m" and, for the adaptive ones, "v": per parameter, float64


@dataclass(frozen=True)
class ServerOptimizerParameters(Parameters):
    """Attributes:
    server_optimizer: none | sgd | adagrad | adam | yogi [none].
    server_optimizer_lr: η, the server's step [the optimizer's own: 1.0 for sgd (the aggregate itself
        without momentum), 0.1 for adagrad and adam, 0.01 for yogi: Flower's defaults].
    server_momentum: μ of sgd (FedAvgM) [0.9: Hsu et al. 2019's].
    server_beta1, server_beta2: β1 of the adaptive ones, β2 of adam and yogi [0.9, 0.99: Reddi et al.'s].
    server_tau: τ, the adaptive ones' floor of √v [1e-3: Reddi et al.'s].
    """

    server_optimizer: str
    server_optimizer_lr: float
    server_momentum: float
    server_beta1: float
    server_beta2: float
    server_tau: float


class ServerOptimizer:
    """One run's server optimizer: its settings, and `step`, a pure function of the old model, the
    aggregate and the moments so far."""

    def __init__(self, config: TrainConfig, parameter_names: list[str]):
        lr = config.server_optimizer_lr_or_default
        self.parameters = ServerOptimizerParameters.of(config, server_optimizer_lr=lr)
        self.names = parameter_names

    @classmethod
    def of(cls, config: TrainConfig, parameter_names: list[str]) -> "ServerOptimizer | None":
        """The run's server optimizer, or None under `server_optimizer: none`."""
        return None if config.server_optimizer == "none" else cls(config, parameter_names)

    def step(self, old: ModelState, aggregate: ModelState, moments: Moments) -> tuple[ModelState, Moments]:
        """The new global model and the moments after this round's step."""
        p = self.parameters
        new, m, v = dict(aggregate), dict(moments.get("m", {})), dict(moments.get("v", {}))
        for name in self.names:
            delta = aggregate[name].double() - old[name].double()
            if p.server_optimizer == "sgd":
                m[name] = p.server_momentum * m[name] + delta if name in m else delta
                direction = m[name]
            else:
                m[name] = p.server_beta1 * m.get(name, torch.zeros_like(delta)) + (1 - p.server_beta1) * delta
                v[name] = self.second_moment(v.get(name, torch.full_like(delta, p.server_tau**2)), delta)
                direction = m[name] / (v[name].sqrt() + p.server_tau)
            new[name] = (old[name].double() + p.server_optimizer_lr * direction).to(old[name].dtype)
        return new, ({"m": m, "v": v} if v else {"m": m})

    def second_moment(self, v: torch.Tensor, delta: torch.Tensor) -> torch.Tensor:
        """v after Δ: Adagrad's sum, Adam's moving average, or Yogi's additive step."""
        squared, beta2 = delta * delta, self.parameters.server_beta2
        if self.parameters.server_optimizer == "adagrad":
            return v + squared
        if self.parameters.server_optimizer == "adam":
            return beta2 * v + (1 - beta2) * squared
        return v - (1 - beta2) * squared * torch.sign(v - squared)
