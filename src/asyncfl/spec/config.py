"""The settings of one training run: the paper's defaults, overridden by a YAML file and the command line."""

import dataclasses
import math
import re
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from asyncfl.spec.errors import InputError
from asyncfl.spec.names import ALGORITHMS, DEVICES, MODELS, OPTIMIZERS, PRECISIONS, TRAINERS

STALENESS_FUNCTIONS = ("constant", "inverse", "polynomial", "hinge")
DISTRIBUTIONS = ("lognormal", "constant")
LR_CLOCKS = ("round", "equivalent_round", "epoch")


@dataclass(frozen=True)
class TrainConfig:
    """Every knob of a run. Comments mark the paper's values (Section V, Algorithm 1) and the project's
    choices where the paper gives none or another; config/README.md has the full table."""

    algorithm: str = "afl"
    model: str = "cnn"
    clients_per_round: int = 5  # J; afl aggregates every J arrivals (paper: 5 of 10 in its comparisons)
    rounds: int = 1000  # server aggregations
    local_epochs: int = 10  # I (paper)
    seed: int = 0
    batch_size: int = 64  # paper
    optimizer: str = "adam"  # or "sgd" (paper: Adam)
    gamma0: float = 1e-3  # γ0 of γ = γ0 / (√(t+1)·(1 + α_lr·d_c)) (paper)
    alpha_lr: float = 0.01  # paper
    # t of γ at dispatch: "round", the server round (paper); "equivalent_round", client updates aggregated
    # / J, which counts the same for every algorithm (project's choice, where algorithms are compared;
    # equal to "round" for afl and sync); "epoch", the local epoch (the paper's reference code)
    lr_time: str = "round"
    lr_delay: str = "duration"  # d_c = the dispatch's whole duration, or "latency" only
    # s(τ): constant | inverse | polynomial | hinge. Project's choice: the paper's §V weights by size
    # only (constant), which config/config.yaml sets for the paper's experiments
    staleness: str = "polynomial"
    staleness_a: float = 0.5  # project's choice (the paper gives no value)
    staleness_b: float = 4.0  # hinge threshold (project's choice)
    concurrency: int | None = None  # M clients in flight (afl, fedasync, fedbuff); default J (project's reading)
    buffer_size: int | None = None  # K arrivals per fedbuff aggregation; default J
    mixing: float = 1.0  # β of afl: θ ← (1−β)θ + β·aggregate (paper: the aggregate replaces θ)
    fedasync_alpha: float = 0.6  # α of fedasync: α_t = α·s(τ)
    server_lr: float = 1.0  # η_g of fedbuff
    patience: int = 10  # early stopping on the client's epoch loss
    prox_mu: float = 0.0  # μ of FedProx's μ/2‖θ − θ_start‖² in every client's objective (0: none; paper: none)
    kappa: float = 0.0  # stop when ‖θ_{v+1} − θ_v‖ ≤ κ over parameters only; 0 disables (paper gives no κ)
    eval_every: int = 1  # rounds between test evaluations of the global model (and the last round)
    replacement: bool = False  # sample clients with replacement (paper: without)
    speed_distribution: str = "lognormal"  # per-client compute speed, median 1 (delays: project's choice)
    speed_sigma: float = 0.5
    latency_distribution: str = "lognormal"  # per-client network latency (virtual seconds)
    latency_median: float = 1.0
    latency_sigma: float = 0.5
    seconds_per_sample: float = 0.001  # virtual compute seconds per sample-epoch at speed 1
    jitter_sigma: float = 0.0  # per-dispatch lognormal jitter of the compute time
    max_virtual_time: float | None = None  # stop at the first aggregation at or after this time
    max_updates: int | None = None  # stop at the first aggregation at or after this many client updates
    checkpoint_every: int = 10  # rounds between checkpoints
    device: str = "auto"  # auto | cpu | cuda
    # vectorised: the clients in flight train as one batch (torch.func); plain: one after another (the
    # reference); auto: vectorised on CUDA, plain on CPU, where oneDNN runs vmap's grouped convolutions
    # slower than one client's plain ones (asyncfl bench, README "Speed")
    trainer: str = "auto"
    # optional speed knobs (numerics.Numerics): bf16 autocast, tf32 (CUDA only), NHWC memory layout
    precision: str = "fp32"
    channels_last: bool = False

    @property
    def concurrency_or_default(self) -> int:
        return self.concurrency or self.clients_per_round


CHOICES = {
    "algorithm": tuple(ALGORITHMS),
    "model": tuple(MODELS),
    "optimizer": OPTIMIZERS,
    "lr_time": LR_CLOCKS,
    "lr_delay": ("duration", "latency"),
    "staleness": STALENESS_FUNCTIONS,
    "speed_distribution": DISTRIBUTIONS,
    "latency_distribution": DISTRIBUTIONS,
    "device": DEVICES,
    "trainer": TRAINERS,
    "precision": PRECISIONS,
}
POSITIVE = (
    "clients_per_round",
    "rounds",
    "local_epochs",
    "batch_size",
    "gamma0",
    "server_lr",
    "eval_every",
    "checkpoint_every",
    "patience",
    "concurrency",
    "buffer_size",
    "max_virtual_time",
    "max_updates",
)
NON_NEGATIVE = (
    "alpha_lr",
    "prox_mu",
    "staleness_a",
    "staleness_b",
    "kappa",
    "speed_sigma",
    "latency_median",
    "latency_sigma",
    "seconds_per_sample",
    "jitter_sigma",
)
UNIT_INTERVAL = ("mixing", "fedasync_alpha")  # (0, 1]
# Upper bounds far beyond any real experiment: past them a run would exhaust memory, overflow its
# virtual clock to inf, or never end, instead of failing here with the key named.
AT_MOST = {
    "local_epochs": 100_000,
    "rounds": 100_000_000,
    "max_updates": 100_000_000,
    "batch_size": 1 << 24,
    "clients_per_round": 1 << 24,
    "concurrency": 1 << 24,
    "buffer_size": 1 << 24,
    "patience": 100_000,
    "seconds_per_sample": 1e6,
    "latency_median": 1e9,
    "speed_sigma": 10.0,
    "latency_sigma": 10.0,
    "jitter_sigma": 10.0,
    "prox_mu": 1e6,
}


def accepted_types() -> dict[str, set[type]]:
    """The exact Python types each key accepts (an int where a float goes; never a bool for a number)."""
    accepted = {}
    for name, hint in typing.get_type_hints(TrainConfig).items():
        allowed = set(typing.get_args(hint)) if isinstance(hint, types.UnionType) else {hint}
        accepted[name] = allowed | ({int} if float in allowed else set())
    return accepted


def make_config(values: dict[str, Any], source: str = "config") -> TrainConfig:
    """Validate `values` (unknown keys, types, ranges) and fill in defaults; errors name the key."""
    accepted = accepted_types()
    hints = typing.get_type_hints(TrainConfig)
    for key, value in values.items():
        if key not in accepted:
            raise InputError(f"{source}: unknown key {key!r}; known keys: {', '.join(accepted)}")
        if type(value) not in accepted[key]:
            expected = str(hints[key]).replace("NoneType", "null").replace("<class '", "").replace("'>", "")
            raise InputError(f"{source}: {key} must be {expected}, got {value!r}")
    config = TrainConfig(**values)
    for key, choices in CHOICES.items():
        if getattr(config, key) not in choices:
            raise InputError(f"{source}: {key} must be one of {', '.join(choices)}, got {getattr(config, key)!r}")
    for key in POSITIVE + NON_NEGATIVE + UNIT_INTERVAL:
        value = getattr(config, key)
        if value is None:
            continue
        if not math.isfinite(value) or (key in NON_NEGATIVE and value < 0) or (key not in NON_NEGATIVE and value <= 0):
            rule = "≥ 0" if key in NON_NEGATIVE else "> 0"
            raise InputError(f"{source}: {key} must be a finite number {rule}, got {value!r}")
        if key in UNIT_INTERVAL and value > 1:
            raise InputError(f"{source}: {key} must be in (0, 1], got {value!r}")
    for key, most in AT_MOST.items():
        value = getattr(config, key)
        if value is not None and value > most:
            raise InputError(f"{source}: {key} must be ≤ {most:g}, got {value!r}")
    if config.seed < 0:
        raise InputError(f"{source}: seed must be an integer ≥ 0, got {config.seed}")
    if config.seconds_per_sample == 0 and config.latency_median == 0:
        raise InputError(f"{source}: seconds_per_sample and latency_median are both 0, so clients would take no time")
    return config


# Numbers in scientific notation as users write them (1e-3, 5E4): YAML 1.1, which PyYAML follows,
# reads them as text unless they have a dot and a signed exponent; YAML 1.2 reads them as floats.
SCIENTIFIC = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)[eE][-+]?[0-9]+")


def with_numbers(value: Any) -> Any:
    """`value` (a loaded YAML document) with every scientific-notation string turned into a float."""
    if isinstance(value, dict):
        return {key: with_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [with_numbers(item) for item in value]
    if isinstance(value, str) and SCIENTIFIC.fullmatch(value):
        return float(value)
    return value


def read_yaml(path: Path) -> Any:
    """A YAML file's content, or one line naming the file and what is wrong with it."""
    try:
        return with_numbers(yaml.safe_load(Path(path).read_bytes().decode("utf-8")))
    except UnicodeDecodeError as error:
        raise InputError(f"{path} is not UTF-8 text (byte {error.start}); save it as UTF-8") from None
    except RecursionError:
        raise InputError(f"{path} is nested too deeply to be a configuration") from None
    except (OSError, yaml.YAMLError) as error:
        raise InputError(f"cannot read {path}: {str(error).splitlines()[0]}") from None


def load_config(path: Path | None, settings: dict[str, Any], overrides: dict[str, Any]) -> TrainConfig:
    """Defaults ← YAML file ← `settings` ← command-line options (those not None)."""
    values: dict[str, Any] = {}
    if path is not None:
        loaded = read_yaml(path) or {}
        if not isinstance(loaded, dict):
            raise InputError(f"{path}: expected a mapping of keys to values")
        values.update(loaded)
    values.update(settings)
    values.update({k: v for k, v in overrides.items() if v is not None})
    return make_config(values, str(path) if path else "command line")


def config_dict(config: TrainConfig) -> dict[str, Any]:
    return dataclasses.asdict(config)
