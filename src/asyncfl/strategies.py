"""The federated algorithms as small objects, in the spirit of Flower's strategies.

The engine's event loop is the same for every algorithm; a strategy answers the four questions
in which they differ: how many arrivals make a round (K), how many clients start, how many are
dispatched after an arrival, and how the arrived updates combine into the next global model
(README "Training"). The arithmetic lives in `algorithms` as pure functions.

Adding an algorithm: a subclass here, registered under its name, and that name with its display
name in `names.ALGORITHMS` (the workflow and the figures read it from there).
"""

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

from asyncfl.algorithms import State, fedasync_update, fedbuff_update, staleness_aware_average
from asyncfl.config import TrainConfig
from asyncfl.errors import InputError
from asyncfl.names import ALGORITHMS


@dataclass(frozen=True)
class Update:
    """One arrived client update, as the server aggregates it."""

    state: State  # the client's model after local training
    start: State  # the global model it started from
    size: int  # n_c, the client's training samples
    weight: float  # s(τ), its staleness weight


class Strategy(ABC):
    """What distinguishes one algorithm from another; the engine does the rest."""

    def __init__(self, config: TrainConfig):
        self.config = config

    @property
    def arrivals_per_round(self) -> int:
        """K: arrivals the server collects before it aggregates."""
        return self.config.clients_per_round

    @property
    def initial_clients(self) -> int:
        """Clients dispatched at the start: the asynchronous algorithms keep M in flight."""
        return self.config.concurrency_or_default

    def clients_after_arrival(self, aggregated: bool) -> int:
        """Clients to dispatch after an arrival (and the aggregation it may complete): one replaces it."""
        return 1

    def check(self, clients: int) -> None:
        """Settings that only make sense against the number of clients: one clear line each."""
        if not self.config.replacement and self.config.concurrency_or_default > clients:
            raise InputError(
                f"concurrency (M) = {self.config.concurrency_or_default} exceeds the {clients} clients; "
                "lower it or set replacement: true"
            )

    @abstractmethod
    def aggregate(self, global_state: State, updates: list[Update]) -> tuple[State, list[float]]:
        """The next global model and each update's coefficient in it."""


STRATEGIES: dict[str, type[Strategy]] = {}


def register(name: str) -> Callable[[type[Strategy]], type[Strategy]]:
    def add(cls: type[Strategy]) -> type[Strategy]:
        STRATEGIES[name] = cls
        return cls

    return add


@register("afl")
class AFL(Strategy):
    """The paper's AFL: M clients in flight, aggregate every J arrivals, weights n_c·s(τ_c), mixing β."""

    @property
    def mixing(self) -> float:
        """β of θ ← (1−β)θ + β·aggregate."""
        return self.config.mixing

    def aggregate(self, global_state: State, updates: list[Update]) -> tuple[State, list[float]]:
        return staleness_aware_average(
            global_state,
            [u.state for u in updates],
            [u.size for u in updates],
            [u.weight for u in updates],
            self.mixing,
        )


@register("sync")
class Sync(AFL):
    """FedAvg: J clients per round, wait for all (τ = 0, so s = 1), the size-weighted mean replaces the model."""

    @property
    def mixing(self) -> float:
        return 1.0

    @property
    def initial_clients(self) -> int:
        return self.config.clients_per_round

    def clients_after_arrival(self, aggregated: bool) -> int:
        return self.config.clients_per_round if aggregated else 0

    def check(self, clients: int) -> None:
        """Sync never keeps more than J in flight: M does not apply."""


@register("fedasync")
class FedAsync(Strategy):
    """FedAsync: every arrival is a round, θ ← (1−α_t)θ + α_t θ_c with α_t = α·s(τ)."""

    @property
    def arrivals_per_round(self) -> int:
        return 1

    def aggregate(self, global_state: State, updates: list[Update]) -> tuple[State, list[float]]:
        (update,) = updates
        new, alpha_t = fedasync_update(global_state, update.state, self.config.fedasync_alpha, update.weight)
        return new, [alpha_t]


@register("fedbuff")
class FedBuff(Strategy):
    """FedBuff: buffer K arrivals, θ ← θ + η_g·Σ s(τ_c)(θ_c − θ_start,c)/K."""

    @property
    def arrivals_per_round(self) -> int:
        return self.config.buffer_size or self.config.clients_per_round

    def aggregate(self, global_state: State, updates: list[Update]) -> tuple[State, list[float]]:
        return fedbuff_update(
            global_state,
            [u.state for u in updates],
            [u.start for u in updates],
            [u.weight for u in updates],
            self.config.server_lr,
        )


def make_strategy(config: TrainConfig) -> Strategy:
    return STRATEGIES[config.algorithm](config)


if set(STRATEGIES) != set(ALGORITHMS):  # names.ALGORITHMS and the registry must list the same algorithms
    raise ImportError(f"strategies {sorted(STRATEGIES)} do not match names.ALGORITHMS {sorted(ALGORITHMS)}")
