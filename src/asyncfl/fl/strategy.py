"""What every federated algorithm shares, in the spirit of Flower's strategies: the engine's event loop
is the same for every algorithm, and a strategy answers the questions in which they differ: how many
arrivals make a round (K), how many clients start, how many are dispatched after an arrival, how the
arrived updates combine into the next global model, and what a client starts from and trains with
(docs/design.md "Training"). Each algorithm is one file of `fl/algorithms/`, its own settings a small
frozen dataclass beside it, read from the config by field name and checked by the rules of the config
keys they come from; a setting only it reads is declared there (`setting(...)` and its docstring), and
`TrainConfig` gains it as a key.

Kept free of torch at import, as the algorithms' files are: the config, which the workflow reads while
it plans, collects their settings from them.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from asyncfl.fl.learning_rate import Schedule
from asyncfl.fl.staleness import StalenessFunction, staleness_function
from asyncfl.settings.names import updates_per_round

if TYPE_CHECKING:
    import numpy as np

    from asyncfl.models import ModelState
    from asyncfl.settings.config import TrainConfig

# What a strategy's server keeps across rounds, by names of its own: tensors and plain data, which the
# checkpoint holds as they are (empty for a strategy without one, and then absent from the checkpoint)
ServerMemory = dict[str, Any]


@dataclass(frozen=True)
class Update:
    """One arrived client update, as the server aggregates it."""

    state: ModelState  # the client's model after local training
    start: ModelState  # the global model it started from
    size: int  # n_c, the client's training samples
    staleness_weight: float  # s(τ)
    staleness: int  # τ: the versions the global model moved on since it was sent
    client: int  # which client sent it (CA2FL caches each client's last update)
    lrs: tuple[float, ...] = ()  # γ of each local epoch it trained (FedAC's control variate reads it)
    # what the server's memory held when the update's version was sent (`Strategy.dispatch_snapshot`)
    sent_memory: ServerMemory = field(default_factory=dict)
    # virtual seconds of its dispatch outside training, latency and transfers, where the strategy
    # `reads_delays` (FedQueue's admission); 0 otherwise (a phase drawn again per update costs the engine)
    delay: float = 0.0
    train_loss: float = math.nan  # the client's loss over its last local epoch (FedASMU's factors learn from it)
    started: int = 0  # the version it was sent: t = started + τ + 1 aggregations with this one (FedASMU's)
    duration: float = 0.0  # virtual seconds from its dispatch to its arrival (Pisces's response time)


@dataclass(frozen=True)
class ServerClients:
    """Who is where at a server's step (`Strategy.step`): `buffered` (reported, not yet aggregated) and
    `running` (started, not yet reported), `idle` (neither, and online), each in id order; `total` clients."""

    buffered: list[int]
    running: list[int]
    idle: list[int]
    total: int


@dataclass(frozen=True)
class Parameters:
    """An algorithm's own settings: each field is the config key of that name, checked by its rule."""

    def __post_init__(self) -> None:
        from asyncfl.settings.config import check_setting  # the config imports this module while it is made

        for item in fields(self):
            check_setting(item.name, getattr(self, item.name), type(self).__name__)

    @classmethod
    def of(cls, config: TrainConfig, **resolved: Any) -> Any:
        """The settings as `config` gives them, each field read from the key of its name; `resolved`:
        those whose default depends on another setting (M defaults to J)."""
        return cls(**{**{item.name: getattr(config, item.name) for item in fields(cls)}, **resolved})


@dataclass(frozen=True)
class AsyncParameters(Parameters):
    """Attributes:
    concurrency: M, clients kept in flight [J: the project's reading of the paper]; without
        replacement at most the number of clients.
    max_staleness: the staleness cap: an update more than this many versions behind is over it
        [null: no cap; FedScale's and FLSim's `max_staleness`].
    stale_updates: what becomes of an update over the cap: "drop" (rejected, its work lost) or "keep"
        (aggregated with its staleness weight s(τ) like any other, and counted) ["drop"].
    """

    concurrency: int
    max_staleness: int | None
    stale_updates: str

    def check(self, clients: int, replacement: bool) -> None:
        from asyncfl.settings.config import check_concurrency  # the config imports this module while it is made

        check_concurrency(self.concurrency, clients, replacement, "config")

    @classmethod
    def of(cls, config: TrainConfig, **resolved: Any) -> Any:
        return super().of(config, concurrency=config.concurrency_or_default, **resolved)


@dataclass(frozen=True)
class BufferedParameters(AsyncParameters):
    """Attributes:
    buffer_size: K, arrivals per aggregation (FedBuff's buffer) [J].
    """

    buffer_size: int

    @classmethod
    def of(cls, config: TrainConfig, **resolved: Any) -> Any:
        return super().of(config, buffer_size=config.buffer_size or config.clients_per_round, **resolved)


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
    # A dispatch that would miss the deadline trains only the local steps that fit before it (sync's `partial_work`)
    partial_work = False
    # The engine's arrival groups give each dispatch its local steps and say when to aggregate (FedCompass's
    # scheduler, `sim/compass.py`) instead of a round of K arrivals
    schedules_groups = False
    # The strategy gives each of a round's dispatches its local steps and step size (`dispatch_work`: FedQueue)
    budgets_work = False
    # Its updates carry their seconds outside training (`Update.delay`: FedQueue's admission reads them)
    reads_delays = False
    # Each dispatch asks for the global model after `merge_after(steps)` of its local steps and merges it
    # into its own with weight `merge_weight` (FedASMU's device side)
    merges_fresh_model = False
    # The server acts on a clock of steps (`step_seconds`): each `step` says whom to start and whether to
    # aggregate what arrived (Pisces); arrivals only buffer
    steps_the_server = False

    def __init__(self, config: TrainConfig):
        self.clients_per_round = config.clients_per_round
        self.schedule = Schedule.of(config)
        self.staleness_weight: StalenessFunction = staleness_function(config)
        self.replacement = config.replacement
        self.round_size = updates_per_round(config.algorithm, config.clients_per_round, config.buffer_size)

    @property
    def cuts_local_work(self) -> bool:
        """Some dispatches train fewer samples than their local epochs' (partial work, FedCompass's and
        FedQueue's steps): events.csv records the samples each update trained."""
        return self.partial_work or self.schedules_groups or self.budgets_work

    def dispatch_work(
        self, clients: list[int], memory: ServerMemory, rates: list[float], whole: list[int]
    ) -> list[tuple[int, float]]:
        """Where `budgets_work`: each of a round's `clients`' local steps and the factor on its learning
        rate, from `rates` (its local steps per virtual second) and `whole` (its local epochs' steps);
        here every dispatch's whole steps at the schedule's rate."""
        return [(most, 1.0) for most in whole]

    def merge_after(self, steps: int) -> int:
        """Where `merges_fresh_model`: the local steps, of a dispatch's `steps`, before it asks for the
        global model (1 to `steps`); never asked here."""
        raise NotImplementedError(f"{type(self).__name__} merges no fresher model mid-training")

    def merge_weight(self, client: int, started: int, fresh: int, memory: ServerMemory) -> float:
        """Where `merges_fresh_model`: β, the weight with which `client`'s dispatch, sent version `started`,
        merges the fresher version `fresh` into its model, from the server's `memory` at the request."""
        raise NotImplementedError(f"{type(self).__name__} merges no fresher model mid-training")

    @property
    def step_seconds(self) -> float:
        """Where `steps_the_server`: virtual seconds between its steps."""
        raise NotImplementedError(f"{type(self).__name__} has no steps")

    def step(self, now: float, clients: ServerClients, memory: ServerMemory) -> tuple[list[int], bool, ServerMemory]:
        """Where `steps_the_server`: at a step at `now`, the clients to start (after the aggregation, if any),
        whether to aggregate the buffered updates, and the memory after."""
        raise NotImplementedError(f"{type(self).__name__} has no steps")

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

    @property
    def most_in_flight(self) -> int:
        """The clients it may keep in flight (the engine's self-check): those it starts with, unless its
        steps start them (Pisces)."""
        return self.initial_clients

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

    def dispatch_snapshot(self, memory: ServerMemory) -> ServerMemory:
        """What of the server's memory a client is sent with the global model (FedAC's control variate
        C), kept per version in flight and handed back with its update (`Update.sent_memory`); nothing
        here."""
        return {}

    def initial_memory(self, sizes: np.ndarray) -> ServerMemory:
        """What the server knows before the first round, from the clients' sample counts `sizes` (ASO-Fed's
        n); nothing here. A checkpoint keeps it with the rest of the memory."""
        return {}

    @abstractmethod
    def aggregate(self, global_model: ModelState, updates: list[Update]) -> tuple[ModelState, list[float]]:
        """The next global model and each update's coefficient in it."""

    def aggregate_with_memory(
        self, global_model: ModelState, updates: list[Update], memory: ServerMemory, clients: int
    ) -> tuple[ModelState, list[float], ServerMemory]:
        """`aggregate`, for a server that keeps a memory of its own across rounds (`memory`, over
        `clients` clients: CA2FL's cache of each client's last update, FedStaleWeight's staleness
        history): the memory after the step besides. The engine calls this; a strategy without a memory
        aggregates as `aggregate` does and leaves it empty."""
        new, coefficients = self.aggregate(global_model, updates)
        return new, coefficients, memory


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


class RemembersAcrossRounds(AsyncStrategy):
    """An asynchronous algorithm whose server keeps a memory across rounds: the engine calls
    `aggregate_with_memory`; `aggregate` is its step from an empty memory."""

    def aggregate(self, global_model: ModelState, updates: list[Update]) -> tuple[ModelState, list[float]]:
        """The step of a server that remembers nothing yet, whose clients are this round's."""
        clients = len({update.client for update in updates})
        new, coefficients, _ = self.aggregate_with_memory(global_model, updates, {}, clients)
        return new, coefficients

    @abstractmethod
    def aggregate_with_memory(
        self, global_model: ModelState, updates: list[Update], memory: ServerMemory, clients: int
    ) -> tuple[ModelState, list[float], ServerMemory]:
        """The next global model, each update's coefficient in it, and the memory after the step."""
