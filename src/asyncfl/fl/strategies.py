"""The federated algorithms as small objects, in the spirit of Flower's strategies.

The engine's event loop is the same for every algorithm; a strategy answers the questions in which
they differ: how many arrivals make a round (K), how many clients start, how many are dispatched
after an arrival, how the arrived updates combine into the next global model, and what a client
starts from and trains with (README "Training"). The arithmetic lives in `aggregation` as pure
functions.

Adding an algorithm: a subclass here, registered under its name, and that name with its display
name in `names.ALGORITHMS` (the workflow and the figures read it from there).
"""

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

from asyncfl.fl.aggregation import State, delay_aware_lr, fedasync_update, fedbuff_update, staleness_aware_average
from asyncfl.spec.config import TrainConfig
from asyncfl.spec.errors import InputError
from asyncfl.spec.names import ALGORITHMS


@dataclass(frozen=True)
class Update:
    """One arrived client update, as the server aggregates it."""

    state: State  # the client's model after local training
    start: State  # the global model it started from
    size: int  # n_c, the client's training samples
    weight: float  # s(τ), its staleness weight


class Strategy(ABC):
    """What distinguishes one algorithm from another; the engine does the rest."""

    # Clients start each dispatch from the global model they are sent (False: from their own last model)
    clients_load_global_model = True
    # The local optimizer's state (Adam's moments) is created afresh at every dispatch (True: every epoch)
    optimizer_per_epoch = False

    def __init__(self, config: TrainConfig):
        self.config = config

    @property
    def lr_clock(self) -> str:
        """What t of the learning rate counts (config `lr_time`), recorded in run.json for the figures."""
        return self.config.lr_time

    def learning_rates(self, version: int, updates: int, delay: float) -> tuple[float, ...]:
        """γ of each local epoch of a dispatch made at global `version`, after `updates` client updates
        were aggregated, by a client whose delay d_c is `delay`: γ = γ0 / (√(t+1)·(1 + α·d_c)), with t
        as `lr_time` says. The one schedule of the runs and of `asyncfl theory`."""
        config = self.config
        if config.lr_time == "epoch":
            clocks: list[float] = list(range(config.local_epochs))
        else:
            t = version if config.lr_time == "round" else updates / config.clients_per_round
            clocks = [t] * config.local_epochs
        return tuple(delay_aware_lr(config.gamma0, t, config.alpha_lr, delay) for t in clocks)

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


@register("afl_as_coded")
class AFLAsCoded(Sync):
    """AFL as the paper's public reference code runs it, for regenerating the paper's published curves;
    not the algorithm the paper describes (that is `afl`). Emulated, as the code behaves:

    - clients never load the global model: each trains on from its own last local model (the first
      dispatch starts from the initial model), so the global model is only ever an average, never a
      starting point;
    - the server waits for all J dispatched clients (an `asyncio.gather` barrier) and takes their
      size-weighted mean, as `sync` does;
    - the delay-aware learning rate uses t = the local epoch and a constant delay d_c = 2 s, whatever
      the client's real duration (the virtual clock still runs on the real durations);
    - Adam is created afresh at every local epoch, so its moments never outlive an epoch.

    `lr_time` and `lr_delay` do not apply; every other setting (γ0, α, I, batch size, μ) does.
    """

    clients_load_global_model = False
    optimizer_per_epoch = True
    CODED_DELAY = 2.0  # seconds: the constant the reference code passes as every client's delay

    @property
    def lr_clock(self) -> str:
        return "epoch"

    def learning_rates(self, version: int, updates: int, delay: float) -> tuple[float, ...]:
        config = self.config
        return tuple(
            delay_aware_lr(config.gamma0, epoch, config.alpha_lr, self.CODED_DELAY)
            for epoch in range(config.local_epochs)
        )


def make_strategy(config: TrainConfig) -> Strategy:
    return STRATEGIES[config.algorithm](config)


if set(STRATEGIES) != set(ALGORITHMS):  # names.ALGORITHMS and the registry must list the same algorithms
    raise ImportError(f"strategies {sorted(STRATEGIES)} do not match names.ALGORITHMS {sorted(ALGORITHMS)}")
