"""The federated algorithms as small objects, in the spirit of Flower's strategies.

The engine's event loop is the same for every algorithm; a strategy answers the questions in which
they differ: how many arrivals make a round (K), how many clients start, how many are dispatched
after an arrival, how the arrived updates combine into the next global model, and what a client
starts from and trains with (docs/design.md "Training"). The arithmetic lives in `aggregation` as pure
functions; an algorithm's own settings are a small dataclass beside it, documented there and
checked by the rules of the config keys they come from.

Adding an algorithm: a subclass here, registered under its name, and that name with its display
name in `names.ALGORITHMS` (the workflow and the figures read it from there).
"""

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, fields, replace

from asyncfl.fl.aggregation import fedasync_update, fedbuff_update, staleness_aware_average
from asyncfl.fl.learning_rate import Schedule
from asyncfl.fl.staleness import StalenessFunction, staleness_function
from asyncfl.models import ModelState
from asyncfl.spec.config import TrainConfig, check_concurrency, check_setting, updates_per_round
from asyncfl.spec.errors import InputError
from asyncfl.spec.names import ALGORITHMS


@dataclass(frozen=True)
class Update:
    """One arrived client update, as the server aggregates it."""

    state: ModelState  # the client's model after local training
    start: ModelState  # the global model it started from
    size: int  # n_c, the client's training samples
    staleness_weight: float  # s(τ)


@dataclass(frozen=True)
class Parameters:
    """An algorithm's own settings: each field is the config key of that name, checked by its rule."""

    def __post_init__(self) -> None:
        for item in fields(self):
            check_setting(item.name, getattr(self, item.name), type(self).__name__)


@dataclass(frozen=True)
class AsyncParameters(Parameters):
    """Attributes:
    concurrency: M, clients kept in flight (default J, the project's reading of the paper); without
        replacement at most the number of clients.
    max_staleness: the staleness cap: an update more than this many versions behind is over it (None:
        no cap; FedScale's and FLSim's `max_staleness`).
    stale_updates: what becomes of an update over the cap: "drop" (rejected, its work lost) or "keep"
        (aggregated with its staleness weight s(τ) like any other, and counted).
    """

    concurrency: int
    max_staleness: int | None
    stale_updates: str

    def check(self, clients: int, replacement: bool) -> None:
        check_concurrency(self.concurrency, clients, replacement, "config")


@dataclass(frozen=True)
class SyncParameters(Parameters):
    """Straggler handling of synchronous FL as production systems run it (Bonawitz et al. 2019,
    "Towards Federated Learning at Scale"); both off by default, which waits for all J clients.

    Attributes:
    over_selection: ε: each round dispatches ⌈J·(1+ε)⌉ clients and aggregates the first J arrivals
        (their 130 %: ε = 0.3); the rest are discarded.
    round_deadline: D, virtual seconds: a round still open at its start + D aggregates what arrived, or
        is abandoned (costing D, the model unchanged) with fewer than ⌈min_report_fraction·J⌉ reports.
    min_report_fraction: of J, the reports a round needs by its deadline (project's choice: 0.8).
    """

    over_selection: float
    round_deadline: float | None
    min_report_fraction: float


@dataclass(frozen=True)
class AFLParameters(AsyncParameters):
    """Attributes:
    concurrency: M, as `AsyncParameters`.
    mixing: β of θ ← (1−β)θ + β·aggregate, in (0, 1] (the paper: 1, the aggregate replaces θ).
    """

    mixing: float


@dataclass(frozen=True)
class FedAsyncParameters(AsyncParameters):
    """Attributes:
    concurrency: M, as `AsyncParameters`.
    fedasync_alpha: α of α_t = α·s(τ), in (0, 1] (FedAsync's paper: 0.6).
    """

    fedasync_alpha: float


@dataclass(frozen=True)
class FedBuffParameters(AsyncParameters):
    """Attributes:
    concurrency: M, as `AsyncParameters`.
    buffer_size: K, arrivals per aggregation (default J).
    server_lr: η_g, the server's step on the mean update (> 0; 1: the mean update itself).
    """

    buffer_size: int
    server_lr: float


class Strategy(ABC):
    """What distinguishes one algorithm from another; the engine does the rest.

    Every strategy holds what all algorithms share: J (`clients_per_round`), the learning-rate
    `schedule`, the staleness function s(τ) (`staleness_weight`) and whether clients are drawn with
    replacement; a subclass adds its own `Parameters`.
    """

    # Clients start each dispatch from the global model they are sent (False: from their own last model,
    # the first time from their own seeded initial model, as the paper's reference code does)
    clients_load_global_model = True
    # metrics.csv also logs the "server loss" as the paper's reference code computed it
    logs_reference_loss = False
    # The new model is a convex combination of the old one and the updates (the engine's self-check)
    convex = True
    # The local optimizer's state (Adam's moments) is created afresh at every dispatch (True: every epoch)
    optimizer_per_epoch = False

    # Rounds of J distinct clients, each drawn at most once a round (replacements of lost dispatches included)
    synchronous = False
    # A round closes at its aggregation: what it dispatched and has not arrived is discarded
    closes_rounds = False
    # A round ends at this many virtual seconds after its dispatches, aggregated or abandoned (None: no deadline)
    round_deadline: float | None = None

    def __init__(self, config: TrainConfig):
        self.clients_per_round = config.clients_per_round
        self.schedule = Schedule.of(config)
        self.staleness_weight: StalenessFunction = staleness_function(config)
        self.replacement = config.replacement
        self.round_size = updates_per_round(config.algorithm, config.clients_per_round, config.buffer_size)

    @property
    def lr_clock(self) -> str:
        """What t of the learning rate counts, recorded in run.json for the figures."""
        return self.schedule.clock

    def learning_rates(self, version: int, updates: int, delay: float) -> tuple[float, ...]:
        """γ of each local epoch of a dispatch (`Schedule.rates`)."""
        return self.schedule.rates(version, updates, delay)

    @property
    def arrivals_per_round(self) -> int:
        """K: arrivals the server collects before it aggregates (`names.UPDATES_PER_ROUND`)."""
        return self.round_size

    @property
    @abstractmethod
    def initial_clients(self) -> int:
        """Clients dispatched at the start."""

    def clients_after_arrival(self, aggregated: bool) -> int:
        """Clients to dispatch after an arrival (and the aggregation it may complete): one replaces it."""
        return 1

    def clients_after_loss(self, in_round: int) -> int:
        """Clients to dispatch after a lost dispatch, with `in_round` results still to come or in (one)."""
        return 1

    @property
    def min_reports(self) -> int:
        """Reports a round needs by its deadline (`round_deadline`; none without one)."""
        return 1

    def over_cap(self, staleness: int) -> bool:
        """Whether an update `staleness` versions behind is over the staleness cap (none here)."""
        return False

    @property
    def drops_stale(self) -> bool:
        """Updates over the cap are rejected (True) or aggregated and counted."""
        return False

    def check(self, clients: int) -> None:
        """Settings that only make sense against the number of clients: one clear line each (none here)."""
        return

    @abstractmethod
    def aggregate(self, global_model: ModelState, updates: list[Update]) -> tuple[ModelState, list[float]]:
        """The next global model and each update's coefficient in it."""


class AsyncStrategy(Strategy):
    """An asynchronous algorithm: M clients in flight, each arrival replaced by a new dispatch."""

    parameters: AsyncParameters

    @property
    def initial_clients(self) -> int:
        return self.parameters.concurrency

    def check(self, clients: int) -> None:
        self.parameters.check(clients, self.replacement)

    def over_cap(self, staleness: int) -> bool:
        cap = self.parameters.max_staleness
        return cap is not None and staleness > cap

    @property
    def drops_stale(self) -> bool:
        return self.parameters.max_staleness is not None and self.parameters.stale_updates == "drop"


STRATEGIES: dict[str, type[Strategy]] = {}


def register(name: str) -> Callable[[type[Strategy]], type[Strategy]]:
    def add(cls: type[Strategy]) -> type[Strategy]:
        STRATEGIES[name] = cls
        return cls

    return add


@register("afl")
class AFL(AsyncStrategy):
    """The paper's AFL: M clients in flight, aggregate every J arrivals, weights n_c·s(τ_c), mixing β
    (`AFLParameters`)."""

    def __init__(self, config: TrainConfig):
        super().__init__(config)
        self.parameters: AFLParameters = AFLParameters(
            config.concurrency_or_default, config.max_staleness, config.stale_updates, config.mixing
        )

    def aggregate(self, global_model: ModelState, updates: list[Update]) -> tuple[ModelState, list[float]]:
        return staleness_aware_average(
            global_model,
            [u.state for u in updates],
            [u.size for u in updates],
            [u.staleness_weight for u in updates],
            self.parameters.mixing,
        )


@register("sync")
class Sync(Strategy):
    """FedAvg: J clients per round, wait for all (τ = 0, so s = 1), the size-weighted mean replaces the
    model; or, with straggler handling (`SyncParameters`), over-select and/or end rounds at a deadline.
    M does not apply: a round keeps its own dispatches in flight."""

    synchronous = True

    def __init__(self, config: TrainConfig):
        super().__init__(config)
        self.parameters = SyncParameters(config.over_selection, config.round_deadline, config.min_report_fraction)
        self.round_deadline = self.parameters.round_deadline
        self.closes_rounds = self.parameters.over_selection > 0 or self.round_deadline is not None

    @property
    def initial_clients(self) -> int:
        """⌈J·(1+ε)⌉, rounded first so that a product like 10 × 1.3 = 13.000000000000002 asks for 13."""
        return math.ceil(round(self.clients_per_round * (1 + self.parameters.over_selection), 9))

    @property
    def min_reports(self) -> int:
        """Reports a round needs by its deadline: ⌈min_report_fraction·J⌉."""
        return math.ceil(round(self.parameters.min_report_fraction * self.clients_per_round, 9))

    def clients_after_arrival(self, aggregated: bool) -> int:
        return self.initial_clients if aggregated else 0

    def clients_after_loss(self, in_round: int) -> int:
        """A lost dispatch is replaced only where the round could no longer gather J results."""
        return max(0, self.clients_per_round - in_round)

    def check(self, clients: int) -> None:
        if not self.replacement and self.initial_clients > clients:
            raise InputError(
                f"config: over_selection = {self.parameters.over_selection} asks for {self.initial_clients} clients "
                f"a round (⌈J·(1 + over_selection)⌉, J = {self.clients_per_round}), more than the {clients} there are; "
                "lower it"
            )

    def aggregate(self, global_model: ModelState, updates: list[Update]) -> tuple[ModelState, list[float]]:
        sizes, weights = [u.size for u in updates], [u.staleness_weight for u in updates]
        return staleness_aware_average(global_model, [u.state for u in updates], sizes, weights, 1.0)


@register("fedasync")
class FedAsync(AsyncStrategy):
    """FedAsync: every arrival is a round, θ ← (1−α_t)θ + α_t θ_c with α_t = α·s(τ) (`FedAsyncParameters`)."""

    def __init__(self, config: TrainConfig):
        super().__init__(config)
        self.parameters: FedAsyncParameters = FedAsyncParameters(
            config.concurrency_or_default, config.max_staleness, config.stale_updates, config.fedasync_alpha
        )

    def aggregate(self, global_model: ModelState, updates: list[Update]) -> tuple[ModelState, list[float]]:
        (update,) = updates
        new, alpha_t = fedasync_update(
            global_model, update.state, self.parameters.fedasync_alpha, update.staleness_weight
        )
        return new, [alpha_t]


@register("fedbuff")
class FedBuff(AsyncStrategy):
    """FedBuff: buffer K arrivals, θ ← θ + η_g·Σ s(τ_c)(θ_c − θ_start,c)/K (`FedBuffParameters`)."""

    convex = False  # a step on the mean update, scaled by η_g

    def __init__(self, config: TrainConfig):
        super().__init__(config)
        self.parameters: FedBuffParameters = FedBuffParameters(
            config.concurrency_or_default,
            config.max_staleness,
            config.stale_updates,
            config.buffer_size or config.clients_per_round,
            config.server_lr,
        )

    def aggregate(self, global_model: ModelState, updates: list[Update]) -> tuple[ModelState, list[float]]:
        return fedbuff_update(
            global_model,
            [u.state for u in updates],
            [u.start for u in updates],
            [u.staleness_weight for u in updates],
            self.parameters.server_lr,
        )


@register("afl_as_coded")
class AFLAsCoded(Sync):
    """AFL as the paper's public reference code runs it, for regenerating the paper's published curves;
    not the algorithm the paper describes (that is `afl`). Emulated, as the code behaves:

    - clients never load the global model: each trains on from its own last local model, the first
      time from its own seeded initial model (the reference initialises every client's model and the
      server's separately), so the global model is only ever an average, never a starting point;
    - the server waits for all J dispatched clients (an `asyncio.gather` barrier) and takes their
      size-weighted mean, as `sync` does;
    - the delay-aware learning rate uses t = the local epoch and a constant delay d_c = 2 s, whatever
      the client's real duration (the virtual clock still runs on the real durations);
    - Adam is created afresh at every local epoch, so its moments never outlive an epoch.

    `lr_time` and `lr_delay` do not apply; every other setting (γ0, α, I, batch size, μ) does.
    """

    clients_load_global_model = False
    logs_reference_loss = True
    optimizer_per_epoch = True
    CODED_DELAY = 2.0  # seconds: the constant the reference code passes as every client's delay

    def __init__(self, config: TrainConfig):
        super().__init__(config)
        self.schedule = replace(self.schedule, clock="epoch")

    def learning_rates(self, version: int, updates: int, delay: float) -> tuple[float, ...]:
        return self.schedule.rates(version, updates, self.CODED_DELAY)


@register("sync_as_coded")
class SyncAsCoded(Sync):
    """Synchronous FL as the paper's reference code runs it for its AFL-vs-sync figures (README
    "Training"): J clients drawn per round without replacement, the server waits for all of them and
    takes their size-weighted mean, and, as in its AFL script, clients never load the global model:
    each trains on from its own last model, the first time from its own seeded initial model. Local
    training (optimizer per dispatch, learning-rate schedule) is `sync`'s. Not FedAvg: that is `sync`.
    """

    clients_load_global_model = False
    logs_reference_loss = True


def make_strategy(config: TrainConfig) -> Strategy:
    return STRATEGIES[config.algorithm](config)


def check_registry(strategies: dict[str, type[Strategy]]) -> None:
    """names.ALGORITHMS and the registry list the same algorithms (checked at import)."""
    if set(strategies) != set(ALGORITHMS):
        raise ImportError(f"strategies {sorted(strategies)} do not match names.ALGORITHMS {sorted(ALGORITHMS)}")


check_registry(STRATEGIES)
