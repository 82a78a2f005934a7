"""The settings of one training run: the paper's defaults, overridden by a YAML file and the command line."""

import dataclasses
import os
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from asyncfl.spec.classes import parse_classes
from asyncfl.spec.errors import InputError
from asyncfl.spec.names import (
    ALGORITHMS,
    ASYNCHRONOUS,
    DEVICES,
    MODELS,
    OPTIMIZERS,
    PRECISIONS,
    SERVER_OPTIMIZER_LR,
    SERVER_OPTIMIZER_OF,
    SERVER_OPTIMIZERS,
    TRAINERS,
    UPDATES_PER_ROUND,
)
from asyncfl.spec.populations import POPULATION_NAMES, with_population
from asyncfl.spec.rules import NON_NEGATIVE, POSITIVE, UNIT_INTERVAL, Group, setting
from asyncfl.spec.yaml_files import read_yaml

STALENESS_FUNCTIONS = ("constant", "inverse", "polynomial", "hinge")
DISTRIBUTIONS = ("lognormal", "constant")
LR_CLOCKS = ("round", "equivalent_round", "epoch")
AVAILABILITY_MODELS = ("always", "exponential", "lognormal", "diurnal", "trace")
ARRIVAL_PROCESSES = ("closed", "poisson")


# Algorithms that read the learning-rate clock settings: AFL as coded has its own (t = epoch, d = 2 s)
SCHEDULED = tuple(name for name in ALGORITHMS if name != "afl_as_coded")
MANY = 1 << 24  # an upper bound for counts of clients and samples
MAX_SEED = (1 << 63) - 1  # torch's and NumPy's generators both take it


@dataclass(frozen=True)
class TrainConfig:
    """Every knob of a run, flat, as YAML files and the command line give them; the objects that use
    them take their own group (`Strategy`, `ClientSystem`, `LocalSettings`). Comments mark the paper's
    values (Section V, Algorithm 1) and the project's choices where the paper gives none or another;
    config/README.md has the full table."""

    # -- what runs
    algorithm: str = setting(Group.RUN, "afl", tuple(ALGORITHMS))
    model: str = setting(Group.RUN, "cnn", tuple(MODELS))
    clients_per_round: int = setting(Group.RUN, 5, lowest=POSITIVE, at_most=MANY)  # J; afl aggregates every J arrivals
    # (paper: 5 of 10 in its comparisons)
    rounds: int = setting(Group.RUN, 1000, lowest=POSITIVE, at_most=100_000_000)  # server aggregations
    local_epochs: int = setting(Group.RUN, 10, lowest=POSITIVE, at_most=100_000)  # I (paper)
    seed: int = setting(Group.RUN, 0, lowest=NON_NEGATIVE, at_most=MAX_SEED)
    # -- local training
    batch_size: int = setting(Group.LOCAL, 64, lowest=POSITIVE, at_most=MANY)  # paper
    optimizer: str = setting(Group.LOCAL, "adam", OPTIMIZERS)  # or "sgd" (paper: Adam)
    gamma0: float = setting(Group.LOCAL, 1e-3, lowest=POSITIVE)  # γ0 of γ = γ0 / (√(t+1)·(1 + α_lr·d_c)) (paper)
    alpha_lr: float = setting(Group.LOCAL, 0.01, lowest=NON_NEGATIVE)  # paper
    # t of γ at dispatch: "round", the server round (paper); "equivalent_round", client updates aggregated
    # / J, which counts the same for every algorithm (project's choice, where algorithms are compared;
    # equal to "round" for afl and sync); "epoch", the local epoch (the paper's reference code)
    lr_time: str = setting(Group.LOCAL, "round", LR_CLOCKS, read_by=SCHEDULED)
    # d_c = the dispatch's whole duration (transfers included), or the latency only
    lr_delay: str = setting(Group.LOCAL, "duration", ("duration", "latency"), read_by=SCHEDULED)
    # -- the server's aggregation. s(τ): constant | inverse | polynomial | hinge. Project's choice: the
    # paper's §V weights by size only (constant), which config/config.yaml sets for the paper's experiments
    staleness: str = setting(Group.SERVER, "polynomial", STALENESS_FUNCTIONS, read_by=ASYNCHRONOUS)
    # project's choice (the paper gives no value)
    staleness_a: float = setting(Group.SERVER, 0.5, lowest=NON_NEGATIVE, read_by=ASYNCHRONOUS)
    # hinge threshold (project's)
    staleness_b: float = setting(Group.SERVER, 4.0, lowest=NON_NEGATIVE, read_by=ASYNCHRONOUS)
    # M clients in flight (afl, fedasync, fedbuff); default J (project's reading)
    concurrency: int | None = setting(Group.SERVER, None, lowest=POSITIVE, at_most=MANY, read_by=ASYNCHRONOUS)
    # K arrivals per fedbuff aggregation; default J
    buffer_size: int | None = setting(Group.SERVER, None, lowest=POSITIVE, at_most=MANY, read_by=("fedbuff",))
    # β of afl: θ ← (1−β)θ + β·aggregate (paper: the aggregate replaces θ)
    mixing: float = setting(Group.SERVER, 1.0, lowest=UNIT_INTERVAL, read_by=("afl",))
    fedasync_alpha: float = setting(Group.SERVER, 0.6, lowest=UNIT_INTERVAL, read_by=("fedasync",))  # α of α_t = α·s(τ)
    server_lr: float = setting(Group.SERVER, 1.0, lowest=POSITIVE, read_by=("fedbuff",))  # η_g of fedbuff
    # the server's own optimizer on the aggregate's pseudo-gradient (fl/server_optimizer.py; Reddi et al.
    # 2021; project's choice to offer it, off by default); its defaults are the papers' own
    server_optimizer: str = setting(Group.SERVER, "none", SERVER_OPTIMIZERS)
    # η; null: the optimizer's own (names.SERVER_OPTIMIZER_LR: 1.0 sgd, 0.1 adagrad and adam, 0.01 yogi)
    server_optimizer_lr: float | None = setting(Group.SERVER, None, lowest=POSITIVE, at_most=1e6)
    server_momentum: float = setting(Group.SERVER, 0.9, lowest=NON_NEGATIVE, at_most=1.0)  # μ of sgd (FedAvgM)
    server_beta1: float = setting(Group.SERVER, 0.9, lowest=NON_NEGATIVE, at_most=1.0)
    server_beta2: float = setting(Group.SERVER, 0.99, lowest=NON_NEGATIVE, at_most=1.0)
    server_tau: float = setting(Group.SERVER, 1e-3, lowest=POSITIVE, at_most=1e6)
    # early stopping on the client's epoch loss
    patience: int = setting(Group.LOCAL, 10, lowest=POSITIVE, at_most=100_000)
    # μ of FedProx's μ/2‖θ − θ_start‖² in every client's objective (0: none; paper: none)
    prox_mu: float = setting(Group.LOCAL, 0.0, lowest=NON_NEGATIVE, at_most=1e6)
    # stop when ‖θ_{v+1} − θ_v‖ ≤ κ over parameters only; 0 disables (paper gives no κ)
    kappa: float = setting(Group.ENDING, 0.0, lowest=NON_NEGATIVE)
    # rounds between test evaluations of the global model (and the last round)
    eval_every: int = setting(Group.EVALUATION, 1, lowest=POSITIVE)
    # or: evaluate at the first aggregation at or past every multiple of this many client updates, so
    # algorithms whose rounds cost different updates are evaluated at the same update counts (the
    # workflow sets it for the runs that compare algorithms: eval_every × reference_J)
    eval_every_updates: int | None = setting(Group.EVALUATION, None, lowest=POSITIVE, at_most=100_000_000)
    # each evaluation also computes the global model's full training loss and ‖∇L‖² (the gradient_norm
    # figure; most of an evaluation's cost on small test sets); false: the test metrics only
    eval_gradient: bool = setting(Group.EVALUATION, True)
    # also: the global model as it stands at every multiple of this many virtual seconds, evaluated on the
    # test set into evaluations.csv with the client work spent so far: one time grid for every algorithm
    # (project's choice, off by default; at least a millisecond)
    eval_every_seconds: float | None = setting(Group.EVALUATION, None, lowest=POSITIVE, at_most=1e9, at_least=1e-3)
    replacement: bool = setting(Group.SERVER, False)  # sample clients with replacement (paper: without)
    # -- the clients' system (project's choice: the paper gives no delay model)
    speed_distribution: str = setting(Group.WORLD, "lognormal", DISTRIBUTIONS)  # per-client compute speed, median 1
    speed_sigma: float = setting(Group.WORLD, 0.5, lowest=NON_NEGATIVE, at_most=10.0)
    latency_distribution: str = setting(Group.WORLD, "lognormal", DISTRIBUTIONS)  # per-client network latency
    latency_median: float = setting(Group.WORLD, 1.0, lowest=NON_NEGATIVE, at_most=1e9)  # virtual seconds
    latency_sigma: float = setting(Group.WORLD, 0.5, lowest=NON_NEGATIVE, at_most=10.0)
    # virtual compute seconds per sample-epoch at speed 1
    seconds_per_sample: float = setting(Group.WORLD, 0.001, lowest=NON_NEGATIVE, at_most=1e6)
    jitter_sigma: float = setting(Group.WORLD, 0.0, lowest=NON_NEGATIVE, at_most=10.0)  # per-dispatch lognormal jitter
    # a heavy tail: ⌈slow_fraction·C⌉ clients, drawn at random (their own stream), compute slow_factor
    # times slower than their drawn speed (off by default; 10×: "a few clients 10× slower")
    slow_fraction: float = setting(Group.WORLD, 0.0, lowest=NON_NEGATIVE, at_most=1.0)
    slow_factor: float = setting(Group.WORLD, 10.0, lowest=POSITIVE, at_most=1e6)
    # device classes: SHARE:FACTOR,… compute time FACTOR times the drawn one for each class's share of the
    # clients (`spec.classes`; e.g. AFL-Lib's edge devices 1:1,1:1.81,1:11.6); null: none
    speed_classes: str | None = setting(Group.WORLD, None)
    # -- the clients' links (project's choice, off by default: docs/design.md "The clients' world"):
    # downlink bandwidth in Mbit/s, the median over clients (null: transfers take no time)
    # (at least 1 bit/s; a run whose slowest transfer would outlast network.MAX_TRANSFER_SECONDS is refused)
    bandwidth_median: float | None = setting(Group.WORLD, None, lowest=POSITIVE, at_most=1e9, at_least=1e-6)
    # link classes instead of the lognormal: SHARE:LOW-HIGH,… Mbit/s down, uniform within each class's range
    link_classes: str | None = setting(Group.WORLD, None)
    bandwidth_sigma: float = setting(Group.WORLD, 0.5, lowest=NON_NEGATIVE, at_most=10.0)  # σ of its lognormal spread
    upload_fraction: float = setting(Group.WORLD, 0.25, lowest=UNIT_INTERVAL, at_least=1e-6)  # uplink = this × downlink
    # slow devices on slow links: the bandwidth factor is the speed
    bandwidth_follows_speed: bool = setting(Group.WORLD, False)
    # the server's own link in Mbit/s, shared by every dispatch's transfers, each booked when its dispatch is
    # made (`sim.server_link`); null: every transfer has its client's link to itself
    server_bandwidth: float | None = setting(Group.WORLD, None, lowest=POSITIVE, at_most=1e12, at_least=1e-6)
    # -- the clients' availability and arrivals (project's choice, off by default: docs/design.md "The
    # clients' world"): online/offline periods drawn per client (exponential or lognormal) or read from a
    # trace CSV (client,start,end online periods); a client offline before its upload completes drops the job
    availability: str = setting(Group.WORLD, "always", AVAILABILITY_MODELS)
    # a named population: a preset of the settings above and below (`spec.populations`), expanded first
    population: str | None = setting(Group.WORLD, None, POPULATION_NAMES)
    # mean online and offline periods, virtual seconds (at least a millisecond: periods far below a
    # dispatch only lose every dispatch, and below the clock's resolution they cannot be told apart)
    online_mean: float = setting(Group.WORLD, 60.0, lowest=POSITIVE, at_most=1e9, at_least=1e-3)
    offline_mean: float = setting(Group.WORLD, 20.0, lowest=POSITIVE, at_most=1e9, at_least=1e-3)
    availability_sigma: float = setting(Group.WORLD, 1.0, lowest=NON_NEGATIVE, at_most=10.0)  # σ of lognormal periods
    # diurnal: the online share follows a 24 h cycle whose population-wide peak is diurnal_swing times its
    # trough (Bonawitz et al. 2019, Fig. 5: a 4× swing in participating devices), each client's phase the
    # population's plus a uniform draw within ± diurnal_spread hours (the project's choice)
    diurnal_swing: float = setting(Group.WORLD, 4.0, lowest=POSITIVE, at_most=1000.0, at_least=1.0)
    diurnal_spread: float = setting(Group.WORLD, 1.0, lowest=NON_NEGATIVE, at_most=12.0)
    availability_trace: str | None = setting(Group.WORLD, None)  # the trace CSV's path, for availability: trace
    failure_probability: float = setting(Group.WORLD, 0.0, lowest=NON_NEGATIVE, at_most=0.99)  # per dispatch: no result
    # closed: M clients in flight, a new dispatch per arrival; poisson: clients check in at rate
    # checkin_rate per virtual second and are dispatched while fewer than M are in flight
    arrivals: str = setting(Group.WORLD, "closed", ARRIVAL_PROCESSES, read_by=ASYNCHRONOUS)
    # (at most 1e4 a virtual second: far beyond a real population's, and turned-away check-ins are skipped
    # over in chunks of draws, so a higher rate would only cost draws)
    checkin_rate: float | None = setting(Group.WORLD, None, lowest=POSITIVE, at_most=1e4, read_by=ASYNCHRONOUS)
    # -- stragglers (project's choice, off by default: docs/design.md "Stragglers"). Synchronous rounds as
    # production FL runs them (Bonawitz et al. 2019): dispatch ⌈J·(1 + over_selection)⌉ clients and
    # aggregate the first J arrivals (0.3: their "130 %", FedScale's overcommitment 1.3); end a round at
    # round_deadline virtual seconds after it starts with what arrived, or abandon it below
    # ⌈min_report_fraction·J⌉ reports (the model unchanged). Late results are discarded; with
    # partial_work, a client that would miss the deadline trains only the local steps that fit before it
    # and sends them (FedProx's inexact updates, FLGo's "completeness"): the project's choice, off.
    over_selection: float = setting(Group.STRAGGLERS, 0.0, lowest=NON_NEGATIVE, at_most=1000.0, read_by=("sync",))
    round_deadline: float | None = setting(Group.STRAGGLERS, None, lowest=POSITIVE, at_most=1e9, read_by=("sync",))
    min_report_fraction: float = setting(Group.STRAGGLERS, 0.8, lowest=UNIT_INTERVAL, read_by=("sync",))
    partial_work: bool = setting(Group.STRAGGLERS, False, read_by=("sync",))
    # Asynchronous updates staler than max_staleness versions (FedScale's max_staleness, FLSim's) are
    # dropped (rejected, never aggregated) or kept with their staleness weight s(τ) and counted
    max_staleness: int | None = setting(Group.STRAGGLERS, None, lowest=POSITIVE, at_most=MANY, read_by=ASYNCHRONOUS)
    stale_updates: str = setting(Group.STRAGGLERS, "drop", ("drop", "keep"), read_by=ASYNCHRONOUS)
    # -- when the run ends, and its checkpoints
    # stop at the first aggregation at or after this time
    max_virtual_time: float | None = setting(Group.ENDING, None, lowest=POSITIVE)
    # stop at the first aggregation at or after this many client updates
    max_updates: int | None = setting(Group.ENDING, None, lowest=POSITIVE, at_most=100_000_000)
    # stop at the first aggregation at or after this many dispatches (client work: aggregated or not)
    max_dispatches: int | None = setting(Group.ENDING, None, lowest=POSITIVE, at_most=100_000_000)
    checkpoint_every: int = setting(Group.ENDING, 10, lowest=POSITIVE)  # rounds between checkpoints
    # -- the machine: results do not depend on these beyond the numerics' documented rounding
    device: str = setting(Group.MACHINE, "auto", DEVICES)  # auto | cpu | cuda
    # vectorised: the clients in flight train as one batch (torch.func); plain: one after another (the
    # reference); graphed: each step a CUDA graph replay; auto: runtime.trainer_name (graphed on CUDA,
    # plain on CPU; docs/performance.md "Speed")
    trainer: str = setting(Group.MACHINE, "auto", TRAINERS)
    # optional speed knobs (numerics.Numerics): bf16 autocast, tf32 (CUDA only), NHWC memory layout
    precision: str = setting(Group.MACHINE, "fp32", PRECISIONS)
    channels_last: bool = setting(Group.MACHINE, False)

    @property
    def concurrency_or_default(self) -> int:
        return self.concurrency or self.clients_per_round

    @property
    def server_optimizer_lr_or_default(self) -> float:
        return self.server_optimizer_lr or SERVER_OPTIMIZER_LR[self.server_optimizer]


def settings_of(group: Group) -> tuple[str, ...]:
    """The settings of one group, in TrainConfig's order."""
    return tuple(item.name for item in dataclasses.fields(TrainConfig) if item.metadata["group"] == group)


# The clients' system and world (config/README.md "The clients' system and world"): `asyncfl train
# --help` lists it, and the runs drawn in one figure must share it
SYSTEM_MODEL = settings_of(Group.WORLD)


def system_model_help() -> str:
    """The group's settings as `key=default`, for `asyncfl train --help`."""
    defaults = {item.name: item.default for item in dataclasses.fields(TrainConfig)}
    shown = ", ".join(f"{key}={yaml.safe_dump(defaults[key]).splitlines()[0]}" for key in SYSTEM_MODEL)
    section = '"The clients\' system and world"'
    return (
        "The clients' system and world, settings for --config or --settings (each the project's choice; "
        f"config/README.md {section} says what each does): {shown}"
    )


def check_concurrency(concurrency: int, clients: int, replacement: bool, source: str) -> None:
    """M clients in flight, drawn without replacement, cannot exceed the C clients there are."""
    if not replacement and concurrency > clients:
        raise InputError(
            f"{source}: concurrency (M) = {concurrency} exceeds the {clients} clients; lower it (it defaults to J) "
            "or set replacement: true"
        )


SETTING_READERS: dict[str, tuple[str, ...]] = {
    item.name: item.metadata["read_by"] for item in dataclasses.fields(TrainConfig) if item.metadata.get("read_by")
}


# The clients' world every run of a comparison shares (its system model less the settings only some
# algorithms read, such as open arrivals): a figure or verdict compares algorithms in one world
CLIENTS_WORLD = tuple(key for key in SYSTEM_MODEL if key not in SETTING_READERS)


def check_setting(key: str, value: Any, source: str) -> None:
    """`value` against the rule of config key `key`: for objects that hold a group of keys."""
    (rule,) = [item.metadata["rule"] for item in dataclasses.fields(TrainConfig) if item.name == key]
    rule.check(key, value, source)


def accepted_types() -> dict[str, set[type]]:
    """The exact Python types each key accepts (an int where a float goes; never a bool for a number)."""
    accepted = {}
    for name, hint in typing.get_type_hints(TrainConfig).items():
        allowed = set(typing.get_args(hint)) if isinstance(hint, types.UnionType) else {hint}
        accepted[name] = allowed | ({int} if float in allowed else set())
    return accepted


def make_config(values: dict[str, Any], source: str = "config") -> TrainConfig:
    """Validate `values` (unknown keys, types, ranges) and fill in defaults, a population's preset
    first (the given settings win); errors name the key."""
    expanded = with_population(values, source)
    preset = set(expanded) - set(values)  # keys only the population's preset gives
    values = expanded
    accepted = accepted_types()
    hints = typing.get_type_hints(TrainConfig)
    for key, value in values.items():
        if key not in accepted:
            raise InputError(f"{source}: unknown key {key!r}; known keys: {', '.join(accepted)}")
        if type(value) not in accepted[key]:
            expected = str(hints[key]).replace("NoneType", "null").replace("<class '", "").replace("'>", "")
            raise InputError(f"{source}: {key} must be {expected}, got {value!r}")
    values = with_implied_server_optimizer(values, source)
    config = TrainConfig(**values)
    for item in dataclasses.fields(TrainConfig):
        if "rule" in item.metadata:
            item.metadata["rule"].check(item.name, getattr(config, item.name), source)
    if config.seconds_per_sample == 0 and config.latency_median == 0:
        raise InputError(f"{source}: seconds_per_sample and latency_median are both 0, so clients would take no time")
    if config.eval_every_updates is not None and config.eval_every != 1:
        raise InputError(f"{source}: eval_every and eval_every_updates are both set; keep one")
    grid = config.eval_every_seconds
    if grid is not None and config.max_virtual_time is not None and config.max_virtual_time / grid > MAX_GRID_ROWS:
        raise InputError(
            f"{source}: eval_every_seconds = {grid!r} over max_virtual_time = {config.max_virtual_time!r} would score "
            f"the model {config.max_virtual_time / grid:.3g} times (evaluations.csv, a test pass each; at most "
            f"{MAX_GRID_ROWS:,}); set eval_every_seconds ≥ {config.max_virtual_time / MAX_GRID_ROWS:.3g}"
        )
    for key in ("speed_classes", "link_classes"):
        if getattr(config, key) is not None:
            parse_classes(getattr(config, key), key, source)
    if config.link_classes is not None and config.bandwidth_median is not None:
        raise InputError(f"{source}: link_classes and bandwidth_median both set the links; keep one")
    if config.partial_work and config.server_bandwidth is not None:
        raise InputError(
            f"{source}: partial_work with server_bandwidth is not modelled (a cut dispatch's upload would move "
            "on a link booked for the whole one); keep one"
        )
    if (config.availability == "trace") != (config.availability_trace is not None):
        raise InputError(f"{source}: availability: trace and availability_trace (the CSV's path) go together")
    defaults = {item.name: item.default for item in dataclasses.fields(TrainConfig)}
    for key, (needs, holds) in NEEDS.items():  # a setting given where it is not read would be recorded, unused
        if getattr(config, key) != defaults[key] and not holds(config):
            if key in preset:
                raise InputError(
                    f"{source}: population {config.population} sets {key}, which applies only with {needs}; "
                    f"set that, or leave out the population and give its settings yourself (config/README.md)"
                )
            raise InputError(f"{source}: {key} applies only with {needs}; set that or remove {key}")
    if (config.arrivals == "poisson") != (config.checkin_rate is not None):
        raise InputError(f"{source}: arrivals: poisson and checkin_rate (check-ins per virtual second) go together")
    for item in dataclasses.fields(TrainConfig):  # a setting the algorithm ignores would mislead: refused
        if not applies(item.name, config.algorithm) and getattr(config, item.name) != item.default:
            readers = ", ".join(item.metadata["read_by"])
            raise InputError(
                f"{source}: {item.name} does not apply to algorithm {config.algorithm} (only {readers} read it); "
                "remove it"
            )
    return config


def with_implied_server_optimizer(values: dict[str, Any], source: str) -> dict[str, Any]:
    """FedAvgM, FedAdam and FedYogi are FedAvg with a server optimizer (`algorithms.CATALOGUE`): their
    name sets it, so run.json records it; another optimizer given beside the name is refused."""
    algorithm = values.get("algorithm", TrainConfig.algorithm)
    implied = SERVER_OPTIMIZER_OF.get(algorithm, "none")
    if implied == "none":
        return values
    given = values.get("server_optimizer", implied)
    if given != implied:
        raise InputError(
            f"{source}: algorithm {algorithm} is FedAvg with server_optimizer {implied}, not {given}; remove "
            "server_optimizer, or run sync with the server_optimizer you want"
        )
    return {**values, "server_optimizer": implied}


# A time grid's evaluations a run may make (1 ms over 100 virtual s: 17 min and 360 MB for 3 rounds once)
MAX_GRID_ROWS = 100_000
DRAWN_PERIODS = ("exponential", "lognormal", "diurnal")
ADAPTIVE_SERVER = ("adagrad", "adam", "yogi")
# Settings read only where another setting holds: given without it, refused (what it needs, and the test)
NEEDS: dict[str, tuple[str, Callable[[TrainConfig], bool]]] = {
    "min_report_fraction": ("round_deadline set", lambda c: c.round_deadline is not None),
    "partial_work": ("round_deadline set", lambda c: c.round_deadline is not None),
    "stale_updates": ("max_staleness set", lambda c: c.max_staleness is not None),
    "slow_factor": ("slow_fraction > 0", lambda c: c.slow_fraction > 0),
    "bandwidth_sigma": (
        "bandwidth_median set and bandwidth_follows_speed false",
        lambda c: c.bandwidth_median is not None and not c.bandwidth_follows_speed,
    ),
    "upload_fraction": (
        "bandwidth_median or link_classes set",
        lambda c: c.bandwidth_median is not None or c.link_classes is not None,
    ),
    "bandwidth_follows_speed": ("bandwidth_median set", lambda c: c.bandwidth_median is not None),
    "server_bandwidth": (
        "bandwidth_median or link_classes set",
        lambda c: c.bandwidth_median is not None or c.link_classes is not None,
    ),
    "online_mean": ("availability: exponential, lognormal or diurnal", lambda c: c.availability in DRAWN_PERIODS),
    "offline_mean": ("availability: exponential, lognormal or diurnal", lambda c: c.availability in DRAWN_PERIODS),
    "diurnal_swing": ("availability: diurnal", lambda c: c.availability == "diurnal"),
    "diurnal_spread": ("availability: diurnal", lambda c: c.availability == "diurnal"),
    "availability_sigma": ("availability: lognormal", lambda c: c.availability == "lognormal"),
    "speed_sigma": ("speed_distribution: lognormal", lambda c: c.speed_distribution == "lognormal"),
    "server_optimizer_lr": ("server_optimizer other than none", lambda c: c.server_optimizer != "none"),
    "server_momentum": ("server_optimizer: sgd", lambda c: c.server_optimizer == "sgd"),
    "server_beta1": ("server_optimizer: adagrad, adam or yogi", lambda c: c.server_optimizer in ADAPTIVE_SERVER),
    "server_beta2": ("server_optimizer: adam or yogi", lambda c: c.server_optimizer in ("adam", "yogi")),
    "server_tau": ("server_optimizer: adagrad, adam or yogi", lambda c: c.server_optimizer in ADAPTIVE_SERVER),
    "latency_sigma": ("latency_distribution: lognormal", lambda c: c.latency_distribution == "lognormal"),
}


def applies(key: str, algorithm: str) -> bool:
    """Whether `algorithm` reads the setting `key` (most settings apply to every algorithm)."""
    read_by = SETTING_READERS.get(key, ())
    return not read_by or algorithm in read_by


def updates_per_round(algorithm: str, clients_per_round: int, buffer_size: int | None) -> int:
    """Client updates `algorithm` aggregates into one new global model (`names.UPDATES_PER_ROUND`)."""
    sizes = {"J": clients_per_round, "K": buffer_size or clients_per_round, "1": 1}
    return sizes[UPDATES_PER_ROUND[algorithm]]


def load_config(path: Path | None, settings: dict[str, Any], overrides: dict[str, Any]) -> TrainConfig:
    """Defaults ← YAML file ← `settings` ← command-line options (those not None)."""
    values: dict[str, Any] = {}
    if path is not None:
        loaded = read_yaml(path) or {}
        if not isinstance(loaded, dict):
            raise InputError(f"{path}: expected a mapping of keys to values")
        values.update(with_paths_from(loaded, path.parent))
    values.update(with_paths_from(settings, Path.cwd()))
    values.update({k: v for k, v in overrides.items() if v is not None})
    return make_config(values, str(path) if path else "command line")


PATH_KEYS = ("availability_trace",)  # settings that name a file


def with_paths_from(values: dict[str, Any], folder: Path) -> dict[str, Any]:
    """`values` with each relative file path resolved where the user wrote it (a YAML file's paths
    against its folder, the command line's against the current one), so run.json records a path that
    reads the same file from anywhere."""
    resolved = dict(values)
    for key in PATH_KEYS:
        if isinstance(resolved.get(key), str):
            resolved[key] = os.path.abspath(folder / os.path.expanduser(resolved[key]))
    return resolved


def config_dict(config: TrainConfig) -> dict[str, Any]:
    return dataclasses.asdict(config)
