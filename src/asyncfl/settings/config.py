"""The settings of one training run: the paper's defaults, overridden by a YAML file and the command line."""

import dataclasses
import functools
import os
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from asyncfl.fl import learning_rate, staleness
from asyncfl.settings.classes import parse_classes
from asyncfl.settings.errors import InputError
from asyncfl.settings.names import (
    ALGORITHMS,
    ASYNCHRONOUS,
    DEFAULT_STALENESS_OF,
    DEVICES,
    MODELS,
    OPTIMIZERS,
    PRECISIONS,
    SERVER_OPTIMIZER_LR,
    SERVER_OPTIMIZER_OF,
    SERVER_OPTIMIZERS,
    STALENESS_WEIGHTED,
    TIMED_BY_TRAINING,
    TIMING_ONLY,
    TRAINERS,
    UPDATES_PER_ROUND,
)
from asyncfl.settings.populations import POPULATION_NAMES, PRESETS, PROFILES, with_presets
from asyncfl.settings.rules import MANY, NON_NEGATIVE, POSITIVE, UNIT_INTERVAL, Group, setting
from asyncfl.settings.yaml_files import read_yaml

STALENESS_FUNCTIONS = tuple(staleness.FUNCTIONS)  # the s(τ) the server implements
# The algorithms whose round is K arrivals (FedBuff's buffer), K their `buffer_size`
BUFFERED = tuple(algorithm for algorithm, size in UPDATES_PER_ROUND.items() if size == "K")
# The asynchronous algorithms whose server may cap staleness (FedCompass schedules its late updates instead)
CAPPED = tuple(algorithm for algorithm in ASYNCHRONOUS if algorithm != "fedcompass")
DISTRIBUTIONS = ("lognormal", "constant")
JITTER_DISTRIBUTIONS = ("lognormal", "exponential", "half_normal")
LR_CLOCKS = tuple(learning_rate.CLOCKS)  # what t of the learning rate counts
AVAILABILITY_MODELS = ("always", "exponential", "lognormal", "diurnal", "trace")
ARRIVAL_PROCESSES = ("closed", "poisson")
CLASS_DRAWS = ("shares", "probability")
TRANSFER_DRAWS = ("per_client", "per_dispatch")
CLIENT_FREEDOM = ("at_arrival", "after_training")
CLOCKS = ("virtual", "real")
DURATIONS = ("paced", "measured")


# Algorithms that read the learning-rate clock settings: AFL as coded has its own (t = epoch, d = 2 s)
SCHEDULED = tuple(name for name in ALGORITHMS if name != "afl_as_coded")
MAX_SEED = (1 << 63) - 1  # torch's and NumPy's generators both take it


@dataclass(frozen=True)
class TrainConfig:
    """Every knob of a run, flat, as YAML files and the command line give them; the objects that use
    them take their own group (`Strategy`, `ClientSystem`, `LocalSettings`). Each field's docstring
    (read as Pydantic's `use_attribute_docstrings` reads them: `settings_docs`) says what it means and
    marks the paper's values (Section V, Algorithm 1) and the project's choices where the paper gives
    none or another; config/README.md's tables of settings are made from them. A setting only one
    algorithm reads is declared in that algorithm's file, as a field of its `Parameters`, and joins these
    (`with_declared_settings`)."""

    algorithm: str = setting(Group.RUN, "afl", tuple(ALGORITHMS))
    """the federated algorithm (`settings/algorithms.py`'s catalogue)"""
    model: str = setting(Group.RUN, "cnn", tuple(MODELS))
    """`cnn` (the paper's MNIST model), `resnet20` (its CIFAR-10 model) or `mlp` (McMahan et al. 2017's 2NN,
    **project's choice**)"""
    clients_per_round: int = setting(Group.RUN, 5, lowest=POSITIVE, at_most=MANY)
    """J: `sync` draws J clients a round, `afl` aggregates every J arrivals (**paper**: 5 of 10 in its
    comparisons)"""
    rounds: int = setting(Group.RUN, 1000, lowest=POSITIVE, at_most=100_000_000)
    """server aggregations per run (**paper**: 1,000)"""
    local_epochs: int = setting(Group.RUN, 10, lowest=POSITIVE, at_most=100_000)
    """I, local epochs per dispatch (**paper**)"""
    seed: int = setting(Group.RUN, 0, lowest=NON_NEGATIVE, at_most=MAX_SEED)
    """the run's seed, from which every random stream derives (`settings/random_streams.py`)"""
    batch_size: int = setting(Group.LOCAL, 64, lowest=POSITIVE, at_most=MANY)
    """local minibatch size (**paper**)"""
    optimizer: str = setting(Group.LOCAL, "adam", OPTIMIZERS)
    """`adam` or `sgd`; a fresh optimizer per dispatch (Adam: **paper**; fresh per dispatch: **project's
    choice**)"""
    gamma0: float = setting(Group.LOCAL, 1e-3, lowest=POSITIVE)
    """γ0 of the delay-aware learning rate γ = γ0 / (√(t+1)·(1 + α_lr·d_c)) (**paper**)"""
    alpha_lr: float = setting(Group.LOCAL, 0.01, lowest=NON_NEGATIVE)
    """α_lr of that formula (**paper**)"""
    lr_time: str = setting(Group.LOCAL, "round", LR_CLOCKS, read_by=SCHEDULED)
    """t of γ: `round`, the server round at dispatch (**paper**); `equivalent_round`, client updates aggregated
    before the dispatch / J, one schedule for every algorithm at an equal budget (**project's choice** where
    algorithms are compared; `round` for `afl` and `sync`); `epoch`, the local epoch (the reference code's)"""
    lr_delay: str = setting(Group.LOCAL, "duration", ("duration", "latency"), read_by=SCHEDULED)
    """d_c: the client's dispatch duration (compute + latency), or `latency` only (`afl_as_coded` keeps the
    reference code's own clock)"""
    staleness: str = setting(Group.SERVER, "polynomial", STALENESS_FUNCTIONS, read_by=STALENESS_WEIGHTED)
    """s(τ), the updates' staleness weight: `constant` 1, `inverse` 1/(1+aτ), `polynomial` (1+τ)^−a,
    `hinge` 1 if τ ≤ b else 1/(a(τ−b)+1). By default `constant` for CA2FL and FADAS (their papers'), else
    `polynomial`, FedBuff's (**project's choice** for AFL, whose paper weights by size only, as
    `config/config.yaml` runs it)"""
    staleness_a: float = setting(Group.SERVER, 0.5, lowest=NON_NEGATIVE, read_by=STALENESS_WEIGHTED)
    """a of s(τ) (**project's choice**; the paper gives no value)"""
    staleness_b: float = setting(Group.SERVER, 4.0, lowest=NON_NEGATIVE, read_by=STALENESS_WEIGHTED)
    """b of the `hinge` s(τ) (**project's choice**; the paper gives no value)"""
    concurrency: int | None = setting(Group.SERVER, None, lowest=POSITIVE, at_most=MANY, read_by=ASYNCHRONOUS)
    """M, clients in flight; null: J (**project's choice**: Algorithm 1 draws J clients per round;
    docs/design.md "Training" sets the two side by side)"""
    buffer_size: int | None = setting(Group.SERVER, None, lowest=POSITIVE, at_most=MANY, read_by=BUFFERED)
    """K, arrivals per aggregation (FedBuff's buffer); null: J (**project's choice**)"""
    server_lr: float = setting(Group.SERVER, 1.0, lowest=POSITIVE, read_by=("fedbuff", "ca2fl", "ace"))
    """η_g, FedBuff's server step, CA2FL's and ACE's η (**project's choice**; FLGo's CA2FL default)"""
    compass_alpha: float = setting(Group.SERVER, 0.9, lowest=UNIT_INTERVAL, read_by=("fedcompass",))
    """α: FedCompass's step θ ← θ + Σ α·s(τ)/M·Δ (APPFL's 0.9); 1/M, M in flight, is the **project's
    choice** (APPFL's 1/N: every client in flight)"""
    compass_min_steps: float = setting(Group.SERVER, 0.2, lowest=UNIT_INTERVAL, read_by=("fedcompass",))
    """Q_min, FedCompass's fewest local steps as a fraction of Q_max, a dispatch's local epochs' steps
    (**project's choice**; APPFL's example: 20 of 100)"""
    latest_time_factor: float = setting(
        Group.SERVER, 1.5, lowest=POSITIVE, at_least=1.0, at_most=1e3, read_by=("fedcompass",)
    )
    """λ: a FedCompass arrival group's deadline is λ times its expected duration after it opens (APPFL's
    example 1.5); past it an arrival is late"""
    speed_momentum: float = setting(Group.SERVER, 0.9, lowest=UNIT_INTERVAL, read_by=("fedcompass",))
    """m: FedCompass's speed of a client s ← (1 − m)·s + m·(its last dispatch's seconds per step) (APPFL's
    example 0.9)"""
    server_optimizer: str = setting(Group.SERVER, "none", SERVER_OPTIMIZERS)
    """the server's optimizer on the pseudo-gradient Δ = aggregate − θ, after any algorithm's aggregation
    (docs/design.md "Training"): `sgd` (FedAvgM), `adagrad`, `adam`, `yogi` (FedAdagrad, FedAdam, FedYogi:
    Reddi et al. 2021), `amsgrad` (FADAS's); its moments are checkpointed. `none`: the aggregate is the new
    model (offering it is the **project's choice**)"""
    server_optimizer_lr: float | None = setting(Group.SERVER, None, lowest=POSITIVE, at_most=1e6)
    """η, the server optimizer's step; null: the optimizer's own, Flower's defaults (1.0 `sgd`, 0.1 `adagrad`
    and `adam`, 0.01 `yogi`; Reddi et al. tune it per task) and AFL-Lib's 0.01 `amsgrad`; with
    `server_optimizer` only"""
    server_momentum: float = setting(Group.SERVER, 0.9, lowest=NON_NEGATIVE, under=1.0)
    """μ of `server_optimizer: sgd` (Hsu et al. 2019's), in [0, 1): at 1 the velocity never forgets a step"""
    server_beta1: float = setting(Group.SERVER, 0.9, lowest=NON_NEGATIVE, under=1.0)
    """β1 of `adagrad`, `adam`, `yogi`, `amsgrad` (Reddi et al. 2021's), in [0, 1): at 1 the first moment
    stays 0 and the model never moves"""
    server_beta2: float = setting(Group.SERVER, 0.99, lowest=NON_NEGATIVE, under=1.0)
    """β2 of `adam`, `yogi`, `amsgrad` (Reddi et al. 2021's), in [0, 1): at 1 the second moment stays τ² and
    never adapts"""
    server_tau: float = setting(Group.SERVER, 1e-3, lowest=POSITIVE, at_most=1e6)
    """τ, the adaptive optimizers' floor of √v (v starts at τ²; Reddi et al. 2021's; FADAS's ε, there
    `amsgrad` follows Reddi et al.'s form: **project's choice**)"""
    delay_threshold: int | None = setting(Group.SERVER, None, lowest=NON_NEGATIVE, at_most=MANY, read_by=("fadas",))
    """τ_c of FADAS's delay-adaptive step: a round whose stalest update τ_max is over τ_c steps with
    η_t = min(η, 1/τ_max) instead of η (Wang et al. 2024); null: always η (FADAS without it)"""
    patience: int = setting(Group.LOCAL, 10, lowest=POSITIVE, at_most=100_000)
    """early stopping on the client's epoch loss (**paper**: I = P = 10, where it cannot fire)"""
    prox_mu: float = setting(Group.LOCAL, 0.0, lowest=NON_NEGATIVE, at_most=1e6)
    """μ of FedProx's term μ/2‖θ − θ_start‖² in every client's local objective (0: none, the **paper**'s
    objective; the reference code's best run used 0.01); the logged training loss stays the data loss; not with
    `trainer: graphed`"""
    kappa: float = setting(Group.ENDING, 0.0, lowest=NON_NEGATIVE)
    """stop when ‖θ_{v+1} − θ_v‖ ≤ κ, over the model's parameters only (the paper's θ; BatchNorm buffers are not
    θ); 0 disables (**project's choice**: the paper's Algorithm 1 has a κ but gives no value)"""
    eval_every: int = setting(Group.EVALUATION, 1, lowest=POSITIVE)
    """rounds between test evaluations of the global model (the last round is always evaluated)"""
    eval_every_updates: int | None = setting(Group.EVALUATION, None, lowest=POSITIVE, at_most=100_000_000)
    """instead: evaluate at the first aggregation at or past every multiple of this many client updates, the
    same counts for every algorithm whatever its round costs; the workflow sets it to `eval_every` × reference_J
    for the runs it compares (**project's choice**)"""
    eval_gradient: bool = setting(Group.EVALUATION, True)
    """each evaluation also computes the global model's full training loss and ‖∇L‖² (the `gradient_norm`
    figure's numbers, most of an evaluation's cost on a small test set); false: the test metrics only, those
    columns left empty (**project's choice**)"""
    eval_every_seconds: float | None = setting(Group.EVALUATION, None, lowest=POSITIVE, at_most=1e9, at_least=1e-3)
    """also evaluate the global model at every multiple of this many virtual seconds (at least 1e-3) into
    `evaluations.csv`, with the client work spent by then: one time grid for every algorithm (**project's
    choice**, off by default; docs/design.md "Stragglers")"""
    replacement: bool = setting(Group.SERVER, False)
    """sample clients with replacement (a client drawn twice trains and counts twice); false is the **paper**'s
    Algorithm 1"""
    speed_distribution: str = setting(Group.WORLD, "lognormal", DISTRIBUTIONS)
    """per-client compute speed, median 1: `lognormal` or `constant` (all equal) (**project's choice**: the
    paper's delays are not specified)"""
    speed_sigma: float = setting(Group.WORLD, 0.5, lowest=NON_NEGATIVE, at_most=10.0)
    """σ of the lognormal speeds (**project's choice**)"""
    latency_distribution: str = setting(Group.WORLD, "lognormal", DISTRIBUTIONS)
    """per-client network latency: `lognormal` or `constant` (**project's choice**)"""
    latency_median: float = setting(Group.WORLD, 1.0, lowest=NON_NEGATIVE, at_most=1e9)
    """the latencies' median in virtual seconds (**project's choice**)"""
    latency_sigma: float = setting(Group.WORLD, 0.5, lowest=NON_NEGATIVE, at_most=10.0)
    """σ of the lognormal latencies (**project's choice**)"""
    seconds_per_sample: float = setting(Group.WORLD, 0.001, lowest=NON_NEGATIVE, at_most=1e6)
    """virtual compute seconds per sample and epoch at speed 1 (**project's choice**)"""
    seconds_per_dispatch: float | None = setting(Group.WORLD, None, lowest=POSITIVE, at_most=1e9)
    """instead: a dispatch's virtual compute seconds at speed 1, whatever the client's data and epochs (the
    timing setups of simulators whose clients' times do not follow their sizes, e.g. NVFlare's FedRevive);
    null: I·n_c·`seconds_per_sample`"""
    jitter_distribution: str = setting(Group.WORLD, "lognormal", JITTER_DISTRIBUTIONS)
    """each dispatch's compute time around its client's (`sim/jitter.py`): `lognormal`, median the client's,
    σ `jitter_sigma`; `exponential`, mean the client's (a queue's exponential server); `half_normal`, the
    client's plus a half-normal of scale `jitter_sigma` × it, never faster (FLSim's, FedBuff's simulator)"""
    jitter_sigma: float = setting(Group.WORLD, 0.0, lowest=NON_NEGATIVE, at_most=10.0)
    """σ of the per-dispatch jitter of the compute time (0: none)"""
    slow_fraction: float = setting(Group.WORLD, 0.0, lowest=NON_NEGATIVE, at_most=1.0)
    """a heavy tail of stragglers: ⌈`slow_fraction`·C⌉ clients, drawn at random from their own stream, compute
    `slow_factor` times slower than their drawn speed (**project's choice**, off by default)"""
    slow_factor: float = setting(Group.WORLD, 10.0, lowest=POSITIVE, at_most=1e6)
    """how many times slower the heavy tail computes (**project's choice**)"""
    speed_classes: str | None = setting(Group.WORLD, None)
    """device classes, `SHARE:FACTOR,…`: each class's share of the clients (by largest remainder; which clients
    from their own stream) computes FACTOR times slower than its drawn speed, a factor drawn uniformly where a
    class gives `LOW-HIGH`; e.g. AFL-Lib's edge devices `1:1,1:1.81,1:11.6` (`settings/classes.py`)"""
    class_draw: str = setting(Group.WORLD, "shares", CLASS_DRAWS)
    """how the classes of `speed_classes`, `link_classes`, `download_seconds` and `upload_seconds` take their
    clients: `shares`, each class exactly its share of the C clients (largest remainder); `probability`, each
    client's class drawn with the shares (summing to 1) as probabilities"""
    bandwidth_median: float | None = setting(Group.WORLD, None, lowest=POSITIVE, at_most=1e9, at_least=1e-6)
    """the clients' downlink in Mbit/s, median over clients: each dispatch downloads the global model and
    uploads the client's, the model's bytes over the client's link (null: transfers take no time); at least 1e-6
    (**project's choice**, off by default; docs/world.md "The clients' world")"""
    link_classes: str | None = setting(Group.WORLD, None)
    """link classes instead of `bandwidth_median`'s lognormal, `SHARE:LOW-HIGH,…` Mbit/s down, each client's
    uniform within its class's range (which clients and their draws from their own stream); e.g. AFL-Lib's WiFi
    and 4G `1:150-600,1:20-100`; not with `bandwidth_median`"""
    download_seconds: str | None = setting(Group.WORLD, None)
    """instead of bandwidths: each dispatch's download in virtual seconds, whatever the model's size,
    `SHARE:SECONDS` or `SHARE:LOW-HIGH` classes (`settings/classes.py`); null with `upload_seconds` set: 0"""
    upload_seconds: str | None = setting(Group.WORLD, None)
    """each dispatch's upload in virtual seconds, classes as `download_seconds`; e.g. FedRevive's
    `1:0.13-0.17,1:0.23-0.27` (a mean of 0.15 or 0.25 ± 0.02) with `transfer_draws: per_dispatch`"""
    transfer_jitter_distribution: str = setting(Group.WORLD, "lognormal", JITTER_DISTRIBUTIONS)
    """each dispatch's download and upload times around their client's, a factor each from its own
    stream, shaped as `jitter_distribution`; not with `server_bandwidth`"""
    transfer_jitter_sigma: float = setting(Group.WORLD, 0.0, lowest=NON_NEGATIVE, at_most=10.0)
    """σ of that transfer jitter (0: none)"""
    transfer_draws: str = setting(Group.WORLD, "per_client", TRANSFER_DRAWS)
    """where a class gives a range (`link_classes`, `download_seconds`, `upload_seconds`): `per_client`, a
    value drawn once per client; `per_dispatch`, each dispatch draws its own within its client's class's
    range; not with `server_bandwidth`"""
    bandwidth_sigma: float = setting(Group.WORLD, 0.5, lowest=NON_NEGATIVE, at_most=10.0)
    """σ of the lognormal spread of the clients' bandwidths around that median, drawn once per run from their
    own stream (**project's choice**)"""
    upload_fraction: float = setting(Group.WORLD, 0.25, lowest=UNIT_INTERVAL, at_least=1e-6)
    """each client's uplink as a fraction of its downlink: mobile and home links upload several times slower
    than they download; at least 1e-6 (**project's choice**)"""
    bandwidth_follows_speed: bool = setting(Group.WORLD, False)
    """slow devices on slow links: a client's bandwidth factor is its compute speed instead of an independent
    draw (**project's choice**)"""
    server_bandwidth: float | None = setting(Group.WORLD, None, lowest=POSITIVE, at_most=1e12, at_least=1e-6)
    """the server's own link in Mbit/s, shared by every dispatch's transfers, each booked on it when its
    dispatch is made (docs/world.md "The clients' world"); null: every transfer has its client's link to
    itself; not with `partial_work` (**project's choice**, off by default)"""
    availability: str = setting(Group.WORLD, "always", AVAILABILITY_MODELS)
    """when clients are online: `always`; `exponential` or `lognormal` online and offline periods drawn per
    client; `diurnal`, offline periods following a 24 h cycle; `trace`, `availability_trace`'s periods. Only
    online idle clients are dispatched; one that goes offline before its upload completes loses the dispatch
    (**project's choice**, off by default; docs/world.md "The clients' world")"""
    population: str | None = setting(Group.WORLD, None, POPULATION_NAMES)
    """a named population, `cross_silo`, `edge`, `mobile` or `queueing`: a preset of these settings, expanded
    before the run's settings are checked (a setting given beside it wins; run.json records both the name and
    the settings): the table below"""
    online_mean: float = setting(Group.WORLD, 60.0, lowest=POSITIVE, at_most=1e9, at_least=1e-3)
    """mean online period in virtual seconds, at least 1e-3: with `offline_mean`'s default, 75 % of the time
    online, periods of tens of default dispatches (**project's choice**, no measured source: set them from a
    trace of your population)"""
    offline_mean: float = setting(Group.WORLD, 20.0, lowest=POSITIVE, at_most=1e9, at_least=1e-3)
    """mean offline period in virtual seconds, at least 1e-3 (**project's choice**)"""
    availability_sigma: float = setting(Group.WORLD, 1.0, lowest=NON_NEGATIVE, at_most=10.0)
    """σ of the lognormal periods (their means stay `online_mean` and `offline_mean`) (**project's choice**)"""
    diurnal_swing: float = setting(Group.WORLD, 4.0, lowest=POSITIVE, at_most=1000.0, at_least=1.0)
    """with `availability: diurnal`, the online share's peak over its trough across 24 virtual hours
    (Bonawitz et al. 2019, Fig. 5: 4×); its mean `online_mean` / (`online_mean` + `offline_mean`), its peak
    at t = 0; a swing the mean cannot reach below a share of 1 is refused"""
    diurnal_spread: float = setting(Group.WORLD, 1.0, lowest=NON_NEGATIVE, at_most=12.0)
    """with `availability: diurnal`, hours: each client's phase is the population's plus a uniform draw within ±
    this (time zones, habits: **project's choice**); the amplitude is corrected so that the population still
    swings by `diurnal_swing`"""
    availability_trace: str | None = setting(Group.WORLD, None)
    """a CSV of online periods, header `client,start,end`, one row per period in virtual seconds (offline
    outside them); every row checked; a relative path is read against the YAML file that names it, or the
    current folder; run.json records the resolved path and its SHA-256; `asyncfl trace import` converts
    FedScale's and FLASH's traces (docs/world.md "The clients' world")"""
    failure_probability: float = setting(Group.WORLD, 0.0, lowest=NON_NEGATIVE, at_most=0.99)
    """per dispatch, the chance its result never arrives (its work lost at its would-be arrival), drawn per
    (client, dispatch) from its own stream (**project's choice**)"""
    client_freed: str = setting(Group.WORLD, "at_arrival", CLIENT_FREEDOM, read_by=ASYNCHRONOUS)
    """when a dispatched client may be drawn again: `at_arrival`, once its dispatch ended; `after_training`,
    once its local training ends, its upload still on the way (NVFlare's FedRevive scheduler). A slot of M
    frees only when the dispatch ends"""
    redistribution_threshold: int = setting(Group.SERVER, 1, lowest=POSITIVE, at_most=MANY, read_by=ASYNCHRONOUS)
    """O: the server dispatches once O of its M slots are open, filling all from one version (1: each
    slot refilled as it opens, Algorithm 1; M: a synchronous schedule; NVFlare's FedRevive (K, B, O)); at
    most M, with `arrivals: closed`"""
    arrivals: str = setting(Group.WORLD, "closed", ARRIVAL_PROCESSES, read_by=ASYNCHRONOUS)
    """`closed`: M clients in flight, one dispatched per arrival (the paper's Algorithm 1); `poisson`: clients
    check in at rate `checkin_rate` and one is dispatched per check-in while fewer than M are in flight, for
    cross-device populations (FLSim's open loop)"""
    checkin_rate: float | None = setting(Group.WORLD, None, lowest=POSITIVE, at_most=1e4, read_by=ASYNCHRONOUS)
    """check-ins per virtual second, at most 1e4; check-ins that would be turned away (M in flight, no online
    idle client) are skipped over in one step, drawing their times all the same"""
    over_selection: float = setting(Group.STRAGGLERS, 0.0, lowest=NON_NEGATIVE, at_most=1000.0, read_by=("sync",))
    """ε: dispatch ⌈J·(1+ε)⌉ clients a round and aggregate the first J arrivals, discarding the rest (0.3 is
    Bonawitz et al. 2019's 130 % and FedScale's `--overcommitment 1.3`)"""
    round_deadline: float | None = setting(Group.STRAGGLERS, None, lowest=POSITIVE, at_most=1e9, read_by=("sync",))
    """D, virtual seconds: a round still open at its start + D aggregates what arrived, or is abandoned (costing
    D, the model unchanged) below `min_report_fraction` of J reports"""
    min_report_fraction: float = setting(Group.STRAGGLERS, 0.8, lowest=UNIT_INTERVAL, read_by=("sync",))
    """f: a round needs ⌈f·J⌉ reports by its deadline (0.8: **project's choice**, no published default)"""
    partial_work: bool = setting(Group.STRAGGLERS, False, read_by=("sync",))
    """a client that would arrive after the deadline trains only the whole local steps that still arrive by it
    and sends them, weighted by its data size (FedProx's inexact updates, FLGo's "completeness"); one fitting
    no step is discarded. **Project's choice**, off"""
    max_staleness: int | None = setting(Group.STRAGGLERS, None, lowest=POSITIVE, at_most=MANY, read_by=CAPPED)
    """the staleness cap: an update more than this many versions behind is over it (FedScale's and FLSim's
    `max_staleness`); FedCompass has none (its late updates wait for the next group's aggregation)"""
    stale_updates: str = setting(Group.STRAGGLERS, "drop", ("drop", "keep"), read_by=CAPPED)
    """an update over the cap: `drop` (rejected, never aggregated) or `keep` (aggregated with its weight s(τ),
    and counted)"""
    max_virtual_time: float | None = setting(Group.ENDING, None, lowest=POSITIVE)
    """also stop at the first aggregation at or after this virtual time (a budget)"""
    max_updates: int | None = setting(Group.ENDING, None, lowest=POSITIVE, at_most=100_000_000)
    """also stop at the first aggregation at or after this many client updates (a budget)"""
    max_dispatches: int | None = setting(Group.ENDING, None, lowest=POSITIVE, at_most=100_000_000)
    """also stop at the first aggregation at or after this many dispatches, aggregated or not (the work budget:
    docs/design.md "Stragglers")"""
    checkpoint_every: int = setting(Group.ENDING, 10, lowest=POSITIVE)
    """rounds between checkpoints (a killed run resumes from the last)"""
    device: str = setting(Group.MACHINE, "auto", DEVICES)
    """`auto` (CUDA when a device is visible, else CPU), `cpu` or `cuda`; on CUDA a job trains on a free one of
    the GPUs it sees (docs/cluster.md "Several GPUs on one machine")"""
    trainer: str = setting(Group.MACHINE, "auto", TRAINERS)
    """`vectorised`: the clients in flight train as one batch (torch.func); `plain`: one after another (the
    reference); `graphed`: each step a CUDA graph replay (no FedProx); `auto`: graphed on CUDA (vectorised for
    FedProx and `afl_as_coded`), plain on the CPU (docs/performance.md "Speed"); `none`: a timing-only run,
    no training (docs/world.md)"""
    precision: str = setting(Group.MACHINE, "fp32", PRECISIONS)
    """speed knob: `fp32` (IEEE everywhere, TF32 switched off), `tf32` (CUDA matmuls and convolutions in
    TensorFloat-32; refused on the CPU), `bf16` (autocast: activations in bfloat16, parameters, Adam state and
    BatchNorm statistics in fp32; with BatchNorm models only for `trainer: plain`). Deterministic, but the
    numbers change"""
    channels_last: bool = setting(Group.MACHINE, False)
    """speed knob: NHWC images and weights, oneDNN's and cuDNN's fastest convolution layout (`asyncfl bench`
    shows its effect)"""
    clock: str = setting(Group.MACHINE, "virtual", CLOCKS)
    """`virtual`: the run jumps from event to event (the default); `real`: paced by the wall clock, `time_scale`
    wall seconds per virtual second, each client an asyncio task (docs/clocks.md "The real clock")"""
    time_scale: float = setting(Group.MACHINE, 1.0, lowest=POSITIVE, at_least=1e-6, at_most=1e3)
    """wall seconds per virtual second (1: real time; 0.01: a hundred times faster), from 1e-6 to 1e3"""
    client_workers: int = setting(Group.MACHINE, 2, lowest=POSITIVE, at_most=256)
    """the worker threads training the clients in flight, a model each (**project's choice**)"""
    durations: str = setting(Group.MACHINE, "paced", DURATIONS)
    """a dispatch's compute: `paced`, its drawn time (the virtual run's outputs); `measured`, its training's
    wall time here × its client's slowness against the fastest (docs/clocks.md "Measured durations")"""
    profile: str | None = setting(Group.MACHINE, None, tuple(PROFILES))
    """a speed profile: `fast` sets `precision: bf16` and `channels_last: true` (a setting given beside it
    wins; run.json records both), 1.73× on resnet20's paper round on an H100; its accuracy cost is in
    docs/gpu.md "The fast profile's cost". null: fp32, the paper's numerics (**project's choice** to
    offer it)"""

    @property
    def concurrency_or_default(self) -> int:
        return self.concurrency or self.clients_per_round

    @property
    def server_optimizer_lr_or_default(self) -> float:
        return self.server_optimizer_lr or SERVER_OPTIMIZER_LR[self.server_optimizer]


def with_declared_settings(shared: type) -> type:
    """`TrainConfig`: the settings of `shared` and those the algorithms' files declare, a setting only
    one algorithm reads being declared on its `Parameters` (`fl.algorithms.declared_settings`), read by
    the algorithms whose `Parameters` have it. One flat class, as run.json records it and YAML gives it.
    A declaration that would fail later, in a user's run, is an ImportError naming it here."""
    from asyncfl.fl.algorithms import declared_settings, parameter_names, parameters_in, strategy_file

    shared_names = {item.name for item in dataclasses.fields(shared)}
    reads = {key: parameter_names(key) for key in ALGORITHMS}
    added = []
    for name, (owner, item) in declared_settings().items():
        where = f"{owner.__module__}.{owner.__name__}.{name}"
        if name in shared_names:
            raise ImportError(f"{where}: TrainConfig already has a setting {name}; rename it")
        hint = typing.get_type_hints(owner)[name]
        check_default(where, hint, item)
        readers = tuple(key for key in ALGORITHMS if name in reads[key])
        metadata = {**item.metadata, "read_by": readers, "declared_by": owner}
        added.append((name, hint, dataclasses.field(default=item.default, metadata=metadata)))
    known = shared_names | {name for name, _, _ in added}
    for key in ALGORITHMS:
        for cls in parameters_in(strategy_file(key)):
            for item in dataclasses.fields(cls):
                if item.name not in known:
                    raise ImportError(
                        f"{cls.__module__}.{cls.__name__}.{item.name} is no setting: declare it with setting(...) "
                        'and a docstring (docs/development.md "Adding an algorithm"), or name a TrainConfig key'
                    )
    config = dataclasses.make_dataclass("TrainConfig", added, bases=(shared,), frozen=True)
    config.__module__ = __name__  # where pickle finds it
    return config


def check_default(where: str, hint: Any, item: dataclasses.Field) -> None:
    """A declared setting's default is of its type and within its own rule: a default outside them would
    fail every config, the user's blamed for a key they never wrote."""
    if type(item.default) not in types_of(hint):
        raise ImportError(f"{where}: its default {item.default!r} is not of its type {hint}; fix the declaration")
    try:
        item.metadata["rule"].check(where, item.default, "its default")
    except InputError as error:
        raise ImportError(f"{error}; fix the declaration") from None


def types_of(hint: Any) -> set[type]:
    """The exact Python types a setting of type hint `hint` accepts: an int where a float goes."""
    allowed = set(typing.get_args(hint)) if isinstance(hint, types.UnionType) else {hint}
    return allowed | ({int} if float in allowed else set())


SHARED_SETTINGS = TrainConfig  # the class body above
if not typing.TYPE_CHECKING:  # for mypy, the shared settings' class: the declared ones are read by name
    TrainConfig = with_declared_settings(SHARED_SETTINGS)

DEFAULTS = {item.name: item.default for item in dataclasses.fields(TrainConfig)}  # each setting's default
# The settings an algorithm's file declares (`with_declared_settings`)
DECLARED_SETTINGS = tuple(item.name for item in dataclasses.fields(TrainConfig) if "declared_by" in item.metadata)


def settings_of(group: Group) -> tuple[str, ...]:
    """The settings of one group, in TrainConfig's order."""
    return tuple(item.name for item in dataclasses.fields(TrainConfig) if item.metadata["group"] == group)


# The clients' system and world (docs/settings.md "The clients' system and world"): `asyncfl train
# --help` lists it, and the runs drawn in one figure must share it
SYSTEM_MODEL = settings_of(Group.WORLD)


def shown_value(value: Any) -> str:
    """A setting's value as YAML writes it (null, true, 0.001): how `--help` and config/README.md show it."""
    return yaml.safe_dump(value).splitlines()[0]


def system_model_help() -> str:
    """The group's settings as `key=default`, for `asyncfl train --help`."""
    shown = ", ".join(f"{key}={shown_value(DEFAULTS[key])}" for key in SYSTEM_MODEL)
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


@functools.cache
def accepted_types() -> dict[str, set[type]]:
    """The exact Python types each key accepts (an int where a float goes; never a bool for a number)."""
    return {name: types_of(hint) for name, hint in typing.get_type_hints(TrainConfig).items()}


def check_type(key: str, value: Any, source: str = "config") -> None:
    """One setting's name and type, as `make_config` checks each before the rest."""
    accepted = accepted_types()
    if key not in accepted:
        raise InputError(f"{source}: unknown key {key!r}; known keys: {', '.join(accepted)}")
    if type(value) not in accepted[key]:
        hint = typing.get_type_hints(TrainConfig)[key]
        expected = str(hint).replace("NoneType", "null").replace("<class '", "").replace("'>", "")
        raise InputError(f"{source}: {key} must be {expected}, got {value!r}")


def make_config(values: dict[str, Any], source: str = "config") -> TrainConfig:
    """Validate `values` (unknown keys, types, ranges) and fill in defaults, a population's and a
    profile's preset first (the given settings win); errors name the key."""
    expanded = with_presets(values, source)
    preset = set(expanded) - set(values)  # keys only a preset gives
    values = expanded
    for key, value in values.items():
        check_type(key, value, source)
    given = set(values)
    values = with_algorithms_staleness(with_implied_server_optimizer(values, source))
    implied = set(values) - given  # keys the algorithm's name sets: its server optimizer, its s(τ)
    config = TrainConfig(**values)
    for item in dataclasses.fields(TrainConfig):
        if "rule" in item.metadata:
            item.metadata["rule"].check(item.name, getattr(config, item.name), source)
    if config.seconds_per_sample == 0 and config.latency_median == 0 and config.seconds_per_dispatch is None:
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
    named = preset_names(config, preset)
    for key in CLASS_SETTINGS:
        if getattr(config, key) is not None:
            classes = parse_classes(getattr(config, key), named(key), source)
            check_class_draw(classes, named(key), config.class_draw, source, key in preset)
    if config.link_classes is not None and config.bandwidth_median is not None:
        raise InputError(
            f"{source}: {named('link_classes')} and {named('bandwidth_median')} both set the links; keep one"
        )
    timed = [key for key in ("download_seconds", "upload_seconds") if getattr(config, key) is not None]
    bandwidths = [key for key in ("bandwidth_median", "link_classes") if getattr(config, key) is not None]
    if timed and bandwidths:
        raise InputError(
            f"{source}: {named(timed[0])} gives the transfers' times and {named(bandwidths[0])} their bandwidths; "
            "keep one"
        )
    if config.redistribution_threshold > config.concurrency_or_default:
        raise InputError(
            f"{source}: redistribution_threshold (O) = {config.redistribution_threshold} exceeds the "
            f"{config.concurrency_or_default} slots of concurrency (M); O is at most M"
        )
    if config.partial_work and config.server_bandwidth is not None:
        raise InputError(
            f"{source}: partial_work with server_bandwidth is not modelled (a cut dispatch's upload would move "
            "on a link booked for the whole one); keep one"
        )
    if config.availability_trace is not None and config.availability != "trace":
        raise InputError(
            f"{source}: availability_trace is read only with availability: trace (not {config.availability}); set "
            "that, or remove availability_trace"
        )
    if config.availability == "trace" and config.availability_trace is None:
        raise InputError(f"{source}: availability: trace needs availability_trace, the CSV's path; set it")
    for key, (needs, holds) in NEEDS.items():  # a setting given where it is not read would be recorded, unused
        if getattr(config, key) != DEFAULTS[key] and not holds(config):
            if key in preset:
                raise InputError(
                    f"{source}: population {config.population} sets {key}, which applies only with {needs}; "
                    f"set that, or leave out the population and give its settings yourself (config/README.md)"
                )
            by_name = "".join(
                f" (algorithm {config.algorithm} sets {name}: {getattr(config, name)})"
                for name in sorted(implied)
                if needs.startswith(name)
            )
            raise InputError(f"{source}: {key} applies only with {needs}{by_name}; set that or remove {key}")
    if config.trainer == TIMING_ONLY:
        check_timing_only(config, DEFAULTS, source)
    if config.durations == "measured":
        check_measured(config, source)
    if config.algorithm == "fedcompass":  # its scheduler holds one dispatch per client, as APPFL's does
        for key, value in (("replacement", True), ("client_freed", "after_training")):
            if getattr(config, key) == value:
                raise InputError(
                    f"{source}: {key}: {shown_value(value)} does not go with algorithm: fedcompass, whose scheduler "
                    f"holds one dispatch per client at a time (a client drawn again would overwrite it); remove {key}"
                )
    if config.algorithm == "pisces":  # its steps start its clients, each at most once at a time
        for key, value in (("replacement", True), ("client_freed", "after_training"), ("arrivals", "poisson")):
            if getattr(config, key) == value:
                raise InputError(
                    f"{source}: {key}: {shown_value(value)} does not go with algorithm: pisces, whose steps start its "
                    f"clients, each while it is neither running nor reported; remove {key}"
                )
        if config.redistribution_threshold != 1:
            raise InputError(
                f"{source}: redistribution_threshold does not go with algorithm: pisces, whose steps fill its free "
                "slots; remove redistribution_threshold"
            )
    if config.checkin_rate is not None and config.arrivals != "poisson":
        raise InputError(
            f"{source}: checkin_rate is read only with arrivals: poisson; set that, or remove checkin_rate"
        )
    if config.arrivals == "poisson" and config.checkin_rate is None:
        raise InputError(f"{source}: arrivals: poisson needs checkin_rate, the check-ins per virtual second; set it")
    for item in dataclasses.fields(TrainConfig):  # a setting the algorithm ignores would mislead: refused
        if not applies(item.name, config.algorithm) and getattr(config, item.name) != item.default:
            read_by = item.metadata["read_by"]
            readers, verb = ", ".join(read_by), "reads" if len(read_by) == 1 else "read"
            raise InputError(
                f"{source}: {item.name} does not apply to algorithm {config.algorithm} (only {readers} {verb} it); "
                "remove it"
            )
    return config


def preset_names(config: TrainConfig, preset: set[str]) -> Callable[[str], str]:
    """A setting as a message names it: `link_classes (population mobile's)` where only a preset gave it,
    so that a line never reads as if the user had written it (docs/settings.md "Populations")."""
    owners = {
        key: f"{kind} {getattr(config, kind)}"
        for kind in PRESETS
        for key in PRESETS[kind].get(getattr(config, kind) or "", {})
    }

    def named(key: str) -> str:
        return f"{owners[key]}'s {key}" if key in preset else key

    return named


def check_class_draw(classes: tuple, key: str, class_draw: str, source: str, preset: bool = False) -> None:
    """Drawn by probability, a setting's shares are its classes' probabilities: they must sum to 1 (a
    preset's `key` is not the user's to rescale)."""
    total = sum(item.share for item in classes)
    if class_draw == "probability" and abs(total - 1) > 1e-9:
        fix = "give the classes yourself" if preset else "rescale them"
        raise InputError(
            f"{source}: the shares of {key} sum to {total:g}, and with class_draw: probability they are the "
            f"classes' probabilities, which sum to 1; {fix}, or use class_draw: shares (relative weights)"
        )


def check_timing_only(config: TrainConfig, defaults: dict[str, Any], source: str) -> None:
    """A timing-only run (`trainer: none`) trains nothing: a setting only training or the model's scores
    read would be recorded in its run.json and never used, so it is refused; so is an algorithm whose
    dispatches' times its aggregations decide (`names.TIMED_BY_TRAINING`)."""
    if config.algorithm in TIMED_BY_TRAINING:
        raise InputError(
            f"{source}: algorithm: {config.algorithm} times its dispatches by what its aggregations learn, and "
            "trainer: none aggregates nothing (a timing-only run); choose another trainer"
        )
    # FedAvgM's, FedAdam's, FedYogi's optimizer is their name's, not a setting the user gave
    defaults = defaults | {
        "server_optimizer": SERVER_OPTIMIZER_OF.get(config.algorithm, "none"),
        "staleness": algorithms_staleness(config.algorithm),
    }
    for key in TRAINING_ONLY:
        if getattr(config, key) != defaults[key]:
            raise InputError(
                f"{source}: {key} is read only by training or scoring, and trainer: none trains nothing (a "
                f"timing-only run); remove {key}, or choose another trainer"
            )


# What measured durations cannot take: each needs a dispatch's compute time when it is dispatched
NOT_MEASURED: dict[str, Callable[[TrainConfig], bool]] = {
    "trainer: none (a timing-only run trains nothing to measure)": lambda c: c.trainer == TIMING_ONLY,
    "algorithm: fedcompass (its scheduler sizes each dispatch from predicted times)": lambda c: (
        c.algorithm == "fedcompass"
    ),
    "algorithm: fedasmu (a client asks for the global model partway through its compute)": lambda c: (
        c.algorithm == "fedasmu"
    ),
    "partial_work (it cuts a dispatch's work to what fits before the deadline)": lambda c: c.partial_work,
    "server_bandwidth (a shared link books each transfer at dispatch)": lambda c: c.server_bandwidth is not None,
    "client_freed: after_training": lambda c: c.client_freed != "at_arrival",
    "availability other than always (a client offline before its arrival is lost)": lambda c: (
        c.availability != "always"
    ),
    "failure_probability > 0 (a failure is drawn within the dispatch's time)": lambda c: c.failure_probability > 0,
    "arrivals: poisson (turned-away check-ins are skipped up to the next arrival)": lambda c: c.arrivals != "closed",
}


def check_measured(config: TrainConfig, source: str) -> None:
    """`durations: measured` knows a dispatch's compute time only when its training ends: what needs it
    before is refused, naming the setting."""
    for what, holds in NOT_MEASURED.items():
        if holds(config):
            raise InputError(
                f"{source}: durations: measured does not go with {what}: it needs a dispatch's time before its "
                "training ends; use durations: paced, or remove it"
            )


def with_implied_server_optimizer(values: dict[str, Any], source: str) -> dict[str, Any]:
    """FedAvgM, FedAdam and FedYogi are FedAvg, FADAS is FedBuff, with a server optimizer
    (`algorithms.CATALOGUE`): their name sets it, so run.json records it; another optimizer given beside
    the name is refused."""
    algorithm = values.get("algorithm", TrainConfig.algorithm)
    implied = SERVER_OPTIMIZER_OF.get(algorithm, "none")
    if implied == "none":
        return values
    given = values.get("server_optimizer", implied)
    if given != implied:
        base = ("FedBuff", "fedbuff") if algorithm in ASYNCHRONOUS else ("FedAvg", "sync")
        raise InputError(
            f"{source}: algorithm {algorithm} is {base[0]} with server_optimizer {implied}, not {given}; remove "
            f"server_optimizer, or run {base[1]} with the server_optimizer you want"
        )
    return {**values, "server_optimizer": implied}


def algorithms_staleness(algorithm: str) -> str:
    """The s(τ) of a run of `algorithm` that names none (`algorithms.CATALOGUE`): CA2FL's and FADAS's papers
    weight every update alike (`constant`); the field's default for the others (and an unknown name, which
    its own check refuses)."""
    return DEFAULT_STALENESS_OF.get(algorithm, TrainConfig.staleness)


def with_algorithms_staleness(values: dict[str, Any]) -> dict[str, Any]:
    """A run that names no `staleness` gets its algorithm's; run.json records it."""
    own = algorithms_staleness(values.get("algorithm", TrainConfig.algorithm))
    return values if "staleness" in values or own == TrainConfig.staleness else {**values, "staleness": own}


# A time grid's evaluations a run may make (1 ms over 100 virtual s: 17 min and 360 MB for 3 rounds once)
MAX_GRID_ROWS = 100_000
DRAWN_PERIODS = ("exponential", "lognormal", "diurnal")
ADAPTIVE_SERVER = ("adagrad", "adam", "yogi", "amsgrad")
# The settings written as client classes (`settings/classes.py`); the speeds' first, the transfers' after
CLASS_SETTINGS = ("speed_classes", "link_classes", "download_seconds", "upload_seconds")
JITTERED_TRANSFERS = "the clients' links or transfer times set, and server_bandwidth null"


def transfers_jitter(config: TrainConfig) -> bool:
    """Whether the transfers can take a jitter: they take time on the clients' own links (a shared server
    link books each transfer's time when its dispatch is made)."""
    timed = any(getattr(config, key) is not None for key in ("bandwidth_median", *CLASS_SETTINGS[1:]))
    return timed and config.server_bandwidth is None


# Settings read only where another setting holds: given without it, refused (what it needs, and the test)
NEEDS: dict[str, tuple[str, Callable[[TrainConfig], bool]]] = {
    "patience": ("local_epochs > patience", lambda c: c.local_epochs > c.patience),
    "staleness_a": ("staleness other than constant", lambda c: c.staleness != "constant"),
    "staleness_b": ("staleness: hinge", lambda c: c.staleness == "hinge"),
    "min_report_fraction": ("round_deadline set", lambda c: c.round_deadline is not None),
    "partial_work": ("round_deadline set", lambda c: c.round_deadline is not None),
    "stale_updates": ("max_staleness set", lambda c: c.max_staleness is not None),
    "slow_factor": ("slow_fraction > 0", lambda c: c.slow_fraction > 0),
    "bandwidth_sigma": (
        "bandwidth_median set and bandwidth_follows_speed false",
        lambda c: c.bandwidth_median is not None and not c.bandwidth_follows_speed,
    ),
    "seconds_per_sample": ("seconds_per_dispatch null", lambda c: c.seconds_per_dispatch is None),
    "class_draw": (
        "speed_classes, link_classes, download_seconds or upload_seconds set",
        lambda c: any(getattr(c, key) is not None for key in CLASS_SETTINGS),
    ),
    "transfer_draws": (
        "link_classes, download_seconds or upload_seconds set, and server_bandwidth null",
        lambda c: c.server_bandwidth is None and any(getattr(c, key) is not None for key in CLASS_SETTINGS[1:]),
    ),
    "redistribution_threshold": ("arrivals: closed", lambda c: c.arrivals == "closed"),
    "transfer_jitter_sigma": (
        f"transfer_jitter_distribution: lognormal or half_normal, {JITTERED_TRANSFERS}",
        lambda c: c.transfer_jitter_distribution in ("lognormal", "half_normal") and transfers_jitter(c),
    ),
    "transfer_jitter_distribution": (
        f"transfer_jitter_sigma > 0 (exponential alone takes none), {JITTERED_TRANSFERS}",
        lambda c: (
            (c.transfer_jitter_distribution == "exponential" or c.transfer_jitter_sigma > 0) and transfers_jitter(c)
        ),
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
    "time_scale": ("clock: real", lambda c: c.clock == "real"),
    "client_workers": ("clock: real", lambda c: c.clock == "real"),
    "durations": ("clock: real", lambda c: c.clock == "real"),
    "server_optimizer_lr": ("server_optimizer other than none", lambda c: c.server_optimizer != "none"),
    "server_momentum": ("server_optimizer: sgd", lambda c: c.server_optimizer == "sgd"),
    "server_beta1": (
        "server_optimizer: adagrad, adam, yogi or amsgrad",
        lambda c: c.server_optimizer in ADAPTIVE_SERVER,
    ),
    "server_beta2": (
        "server_optimizer: adam, yogi or amsgrad",
        lambda c: c.server_optimizer in ("adam", "yogi", "amsgrad"),
    ),
    "server_tau": ("server_optimizer: adagrad, adam, yogi or amsgrad", lambda c: c.server_optimizer in ADAPTIVE_SERVER),
    "latency_sigma": ("latency_distribution: lognormal", lambda c: c.latency_distribution == "lognormal"),
    "jitter_sigma": (
        "jitter_distribution: lognormal or half_normal",
        lambda c: c.jitter_distribution in ("lognormal", "half_normal"),
    ),
    # a shape without its scale draws nothing: the run would record a jitter it never had
    "jitter_distribution": (
        "jitter_sigma > 0 (exponential alone takes none)",
        lambda c: c.jitter_distribution == "exponential" or c.jitter_sigma > 0,
    ),
}


# Settings read only by local training, the server's step on the model, or the model's scores: a
# timing-only run refuses them (`check_timing_only`); the clock, the world and the evaluation instants stay
TRAINING_ONLY = (
    *settings_of(Group.LOCAL),
    "staleness",
    "staleness_a",
    "staleness_b",
    "server_lr",
    *DECLARED_SETTINGS,  # an algorithm's own: each a knob of its aggregation
    "compass_alpha",
    "server_optimizer",
    "server_optimizer_lr",
    "server_momentum",
    "server_beta1",
    "server_beta2",
    "server_tau",
    "delay_threshold",
    "kappa",
    "eval_gradient",
    "profile",  # before what it presets: the line names the setting the user gave
    "precision",
    "channels_last",
)


def applies(key: str, algorithm: str) -> bool:
    """Whether `algorithm` reads the setting `key` (most settings apply to every algorithm)."""
    read_by = SETTING_READERS.get(key, ())
    return not read_by or algorithm in read_by


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
