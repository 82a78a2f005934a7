"""The generated-input layer (docs/development.md "Hardening a new surface"): every input surface — run
settings, a workflow experiment's keys, `asyncfl.api`'s arguments, `asyncfl`'s flags, availability traces
and the cost table — fed generated values, valid and hostile (NaN, ±inf, 0, negative, huge, text, a path
out, a bool, a list, null), with one property: *either one InputError line that names the key or
argument the user wrote, or an input that took effect*. Beside it the two generic checks: a message's
first setting is one the input set (it never blames another), and every setting of the catalogue, set
to a value its algorithm family admits, changes a run's bytes or is refused.

Seeds are fixed (`derandomize`): CI replays the same examples. A longer search runs on demand:
`ASYNCFL_FUZZ=2000 make fuzz` (random examples, that many per surface); what it finds becomes a case here.
"""

import copy
import csv
import dataclasses
import json
import math
import os
import re
import typing
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from asyncfl import api
from asyncfl.planning.families import declared_family, family_option
from asyncfl.planning.layout import EVALUATIONS, RUN_OUTPUTS
from asyncfl.planning.plan import plan_workflow
from asyncfl.planning.run_cost import read_cost_table
from asyncfl.planning.startup import check_at_once
from asyncfl.planning.workflow_config import check_schema, check_workflow_config
from asyncfl.settings.config import SETTING_READERS, TRAINING_ONLY, TrainConfig, make_config
from asyncfl.settings.errors import InputError
from asyncfl.settings.names import TIMED_BY_TRAINING
from asyncfl.settings.populations import PRESETS
from asyncfl.settings.rules import Group
from asyncfl.settings.traces import read_trace
from asyncfl.sim.engine import Simulation
from conftest import QUICK_CONFIG
from engine_cases import contiguous_partition, tiny_dataset

FUZZ = int(os.environ.get("ASYNCFL_FUZZ", "0"))  # > 0: a longer, random search (make fuzz)


def examples(count: int) -> settings:
    """The examples of one surface: `count` fixed ones in CI, ASYNCFL_FUZZ random ones on demand."""
    return settings(
        max_examples=FUZZ or count,
        derandomize=not FUZZ,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )


FIELDS = {item.name: item for item in dataclasses.fields(TrainConfig)}
HINTS = typing.get_type_hints(TrainConfig)
# What a user can type that no key takes, or that only a careless check lets through
HOSTILE = st.sampled_from(
    [
        math.nan,
        math.inf,
        -math.inf,
        0,
        0.0,
        -1,
        -0.5,
        1e308,
        2**70,
        10**400,  # a JSON integer past any float: math.isfinite overflows on it
        1e-300,
        "",
        "x",
        "../x",
        "1e3",
        True,
        None,
        [],
        [1],
        {"a": 1},
    ]  # fmt: skip
)


def valid(key: str) -> st.SearchStrategy:
    """Values of the key's own type and range (its `rules.Rule`): what a user means to give."""
    rule, hint = FIELDS[key].metadata["rule"], HINTS[key]
    if rule.choices:
        return st.sampled_from(rule.choices)
    kind = typing.get_args(hint)[0] if typing.get_args(hint) else hint
    low = rule.at_least if rule.at_least is not None else (0 if rule.lowest == "≥ 0" else 1e-3)
    high = rule.at_most if rule.at_most is not None else (1.0 if rule.lowest == "(0, 1]" else 1e4)
    if kind is bool:
        return st.booleans()
    if kind is int:
        return st.integers(max(int(math.ceil(low)), 0 if rule.lowest == "≥ 0" else 1), int(min(high, 10_000)))
    if kind is float:
        return st.floats(low, min(high, 1e6), allow_nan=False)
    return st.sampled_from(["1:5", "1:2,1:8", "1:1-10"])  # the class settings' SHARE:VALUE text


def run_settings() -> st.SearchStrategy[dict]:
    """One to three settings, each valid or hostile."""
    entry = st.sampled_from(sorted(FIELDS)).flatmap(lambda key: st.tuples(st.just(key), st.one_of(valid(key), HOSTILE)))
    return st.lists(entry, min_size=1, max_size=3, unique_by=lambda pair: pair[0]).map(dict)


SETTING_NAME = re.compile(r"\b(" + "|".join(sorted(FIELDS, key=len, reverse=True)) + r")\b")


def blamed(message: str, given_keys: set[str]) -> None:
    """One line, and the first setting it names is one the input gave (a preset's setting counts as its
    population's or profile's, which the line names)."""
    assert message.count("\n") == 0, message
    first = SETTING_NAME.search(message)
    assert first is not None, f"names no setting: {message}"
    owner = re.match(r"(population|profile) (\w+)'s", message[first.start() - 40 : first.start()].split(": ")[-1])
    named = owner.group(1) if owner else first.group(1)
    assert named in given_keys, f"blames {named}, which the input did not set: {given_keys} → {message}"


@given(run_settings())
@examples(400)
def test_a_generated_run_setting_is_refused_naming_a_key_it_gave_or_is_the_runs(values):
    try:
        config = make_config(values)
    except InputError as error:
        blamed(str(error), set(values))
        return
    for key, value in values.items():  # it took effect: the run's config holds it
        assert getattr(config, key) == value or (isinstance(value, int) and getattr(config, key) == float(value)), key


# A workflow experiment's keys, as a user edits .test/config/quick.yaml's MLP experiment
EXPERIMENT_KEYS = {
    "clients": st.integers(1, 100),
    "alpha": st.floats(1e-3, 1e3),
    "rounds": st.integers(1, 100),
    "participation": st.lists(st.integers(1, 12), min_size=1, max_size=3),
    "seeds": st.lists(st.integers(0, 2**63), min_size=1, max_size=3),
    "pack_runs": st.integers(1, 20),
    "validation_fraction": st.floats(0.01, 0.9),
    "budget": st.fixed_dictionaries({"updates": st.integers(1, 200)}),
    "model": st.sampled_from(["mlp", "cnn", "resnet20"]),
    "equivalence_margin": st.floats(0.1, 100),
    "power": st.floats(0.5, 0.99),
    "replication": st.sampled_from(["apart", "pooled"]),
}


def experiment_edits() -> st.SearchStrategy[tuple[str, object]]:
    top = st.sampled_from(sorted(EXPERIMENT_KEYS)).flatmap(
        lambda key: st.tuples(st.just(key), st.one_of(EXPERIMENT_KEYS[key], HOSTILE))
    )
    train = st.sampled_from(sorted(FIELDS)).flatmap(
        lambda key: st.tuples(st.just(f"train.{key}"), st.one_of(valid(key), HOSTILE))
    )
    return st.one_of(top, train)


QUICK = yaml.safe_load(QUICK_CONFIG.read_text())


@given(experiment_edits())
@examples(150)
def test_a_generated_experiment_key_is_refused_naming_it_or_reaches_its_runs(edit):
    key, value = edit
    config = copy.deepcopy(QUICK)
    config["experiments"] = {"mlp": {**config["experiments"]["digits_mlp"], "seeds": [0], "participation": [5]}}
    experiment = config["experiments"]["mlp"]
    if key.startswith("train."):
        experiment["train"][key[len("train.") :]] = value
    else:
        experiment[key] = value
    try:
        check_schema(config)  # as the workflow checks it: the schema, then the planner
        check_workflow_config(config)
    except InputError as error:
        message = str(error)
        assert message.count("\n") == 0, message
        written = f"experiments.mlp.{key}"
        assert written in message or (key.startswith("train.") and "experiments.mlp.train" in message and key[6:]
                                      in message), f"{edit} → {message}"  # fmt: skip
        return
    runs = plan_workflow(config)["mlp"].runs
    if key.startswith("train."):  # it reached a run that reads it (under the budget, eval_every as its updates)
        setting, expected = ("eval_every_updates", value * 5) if key == "train.eval_every" else (key[6:], value)
        assert any(run.settings.get(setting) == expected for run in runs), edit


# A straggler sweep's declared family: the quick sweep's own names, others, and what no key takes
FAMILY_ITEM = st.one_of(st.sampled_from(["sigma0", "heavy_tail", "slow40", "afl", "afl-m7", "sync", "sync-partial",
                                         "fedbuff", "targets", "budgets"]), HOSTILE)  # fmt: skip
FAMILY = st.one_of(
    HOSTILE,
    st.dictionaries(st.sampled_from(["severities", "names", "spans", "rows"]),
                    st.one_of(HOSTILE, st.lists(FAMILY_ITEM, max_size=9)), max_size=3),
)  # fmt: skip


@given(FAMILY)
@examples(80)
def test_a_generated_verdict_family_is_refused_naming_it_or_holds_the_sweeps_comparisons(value):
    config = copy.deepcopy(QUICK)
    experiment = config["experiments"]["digits_stragglers"]
    experiment["verdict_family"] = value
    try:
        check_schema(config)
        check_workflow_config(config)
    except InputError as error:
        message = str(error)
        assert message.count("\n") == 0 and "experiments.digits_stragglers.verdict_family" in message, message
        return
    (option,) = family_option(experiment)
    family = declared_family(json.loads(option.removeprefix("--family=")), "--family", ["sigma0"], None, 2, 1)
    assert family.comparisons() >= 2 * 3 * 4  # the sweep's own: 2 rows × 3 asynchronous × 4 synchronous names


@given(
    st.one_of(st.integers(-2, 30), HOSTILE),
    st.one_of(st.floats(1e-3, 1e3), HOSTILE),
    st.one_of(st.integers(0, 9), HOSTILE),
)
@examples(40)
def test_generated_api_partition_arguments_are_refused_naming_them_or_make_that_partition(
    tmp_path, clients, alpha, seed
):
    out = tmp_path / f"p{abs(hash((repr(clients), repr(alpha), repr(seed))))}.npz"
    try:
        path = api.partition("digits", clients=clients, alpha=alpha, seed=seed, out=out)
    except InputError as error:
        message = str(error)
        assert message.count("\n") == 0 and re.search(r"\b(clients|alpha|seed)\b", message), message
        assert not out.exists()
        return
    assert path == out and out.is_file() and isinstance(clients, int) and not isinstance(clients, bool)


TRAIN_FLAGS = {"--rounds": "rounds", "--clients-per-round": "clients_per_round", "--local-epochs": "local_epochs",
               "--seed": "seed", "--threads": None}  # fmt: skip


@given(st.sampled_from(sorted(TRAIN_FLAGS)), st.one_of(st.integers(-3, 10**9).map(str), HOSTILE.map(str)))
@examples(60)
def test_a_generated_train_flag_is_refused_naming_it_before_anything_runs(tmp_path, capsys, flag, text):
    """Parsed and checked only (`--settings` refuses a timing-only run's training settings): a value the
    flag takes reaches the run's config, one it does not is one line naming the flag."""
    from asyncfl.cli import build_parser

    try:
        args = build_parser().parse_args(["train", "--dataset", "digits", "--partition", "p.npz", flag, text,
                                          "--out", str(tmp_path / "run")])  # fmt: skip
    except SystemExit:
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert flag in err, err
        return
    key = TRAIN_FLAGS[flag]
    assert key is None or getattr(args, key) == int(text)


@given(st.lists(st.tuples(st.one_of(st.integers(-1, 12), HOSTILE), st.one_of(st.floats(-10, 1e3), HOSTILE),
                          st.one_of(st.floats(-10, 1e3), HOSTILE)), max_size=6))  # fmt: skip
@examples(80)
def test_a_generated_trace_is_refused_naming_its_file_or_read_as_written(tmp_path, rows):
    path = tmp_path / "trace.csv"
    with path.open("w", newline="") as handle:
        csv.writer(handle).writerows([("client", "start", "end"), *rows])
    try:
        periods = read_trace(path, 10)
    except InputError as error:
        assert str(error).count("\n") == 0 and str(path) in str(error), str(error)
        return
    assert sum(len(spans) for spans in periods.values()) <= len(rows)


COST_COLUMNS = ("device", "model", "batch_size", "step_seconds", "scored_sample_seconds", "start_seconds", "measured")


COST_NUMBER = st.one_of(st.integers(1, 256), HOSTILE)
COST_ROW = st.tuples(st.sampled_from(["cpu-x", "Bad Kind", ""]), st.sampled_from(["mlp", "cnn", "gpt"]),
                     *[COST_NUMBER] * 4, st.just("2026-12-06"))  # fmt: skip


@given(st.lists(COST_ROW, max_size=4))
@examples(80)
def test_a_generated_cost_table_is_refused_naming_its_file_or_read_as_written(tmp_path, rows):
    path = tmp_path / "costs.csv"
    with path.open("w", newline="") as handle:
        csv.writer(handle).writerows([COST_COLUMNS, *rows])
    try:
        table = read_cost_table(path)
    except InputError as error:
        assert str(error).count("\n") == 0 and str(path) in str(error), str(error)
        return
    assert len(table) == len(rows)


# --- Every setting of the catalogue changes a run's bytes, or is refused -------------------------------
# A value each setting takes besides its default, chosen to matter in a 3-round run of six tiny clients
CHANGED = {
    "rounds": 2, "clients_per_round": 2, "local_epochs": 2, "seed": 1, "model": "cnn", "batch_size": 8,
    "gamma0": 0.01, "alpha_lr": 0.5, "patience": 1, "prox_mu": 0.5, "kappa": 1e3, "eval_every": 2,
    "eval_every_updates": 6, "eval_every_seconds": 0.5, "concurrency": 2, "buffer_size": 1,
    "server_optimizer_lr": 0.5, "server_momentum": 0.5, "server_beta1": 0.5, "server_beta2": 0.5, "server_tau": 0.5,
    "delay_threshold": 0, "speed_sigma": 2.0, "latency_median": 3.0, "latency_sigma": 2.0, "seconds_per_sample": 0.05,
    "seconds_per_dispatch": 2.0, "jitter_sigma": 1.0, "slow_fraction": 0.5, "slow_factor": 50.0,
    "speed_classes": "1:1,1:5", "bandwidth_median": 0.01, "link_classes": "1:0.01,1:1", "download_seconds": "1:3",
    "upload_seconds": "1:3", "transfer_jitter_sigma": 1.0, "bandwidth_sigma": 2.0, "upload_fraction": 0.01,
    "server_bandwidth": 0.02, "online_mean": 1.0, "offline_mean": 5.0, "availability_sigma": 2.0,
    "diurnal_swing": 50.0, "diurnal_spread": 6.0, "failure_probability": 0.5, "redistribution_threshold": 2,
    "checkin_rate": 0.5, "over_selection": 1.0, "round_deadline": 0.5, "min_report_fraction": 0.3,
    "max_staleness": 1, "max_virtual_time": 1.0, "max_updates": 2, "max_dispatches": 2, "mixing": 0.3,
    "fedasync_alpha": 0.2, "server_lr": 0.3, "compass_alpha": 0.3, "compass_min_steps": 0.9,
    "latest_time_factor": 10.0, "speed_momentum": 0.2, "staleness_a": 3.0, "staleness_b": 0.5,
    "asyncfeded_lambda": 0.5, "asyncfeded_epsilon": 0.3, "staleness_window": 1, "port_similarity_weight": 0.0,
    "port_staleness_weight": 0.5, "port_staleness_bound": 1, "asofed_beta": 0.9, "fedac_lr": 0.01,
    "fedac_beta1": 0.3, "fedac_beta2": 0.5, "fedqueue_period": 6.0, "fedqueue_safety": 0.5, "fedqueue_slack": 0.0,
    "fedqueue_smoothing": 1.0, "fedqueue_initial_delay": 3.0, "fedqueue_lr_floor": 0.9,
    "fedasmu_refresh_fraction": 0.9, "fedasmu_mu_alpha": 5.0, "fedasmu_mu_beta": 5.0, "fedasmu_meta_lr": 0.5,
    "pisces_step": 0.5, "pisces_staleness_exponent": 2.0, "pisces_explore": 0.05, "pisces_explore_decay": 0.1,
    "pisces_explore_floor": 0.9, "pisces_unknown_latency": 6.0,
}  # fmt: skip
# What a setting read only where another holds (`NEEDS`) is tried with: its baseline is the run with
# this context (or the plain run, where the context alone is refused: a pair that goes together)
CONTEXT = {
    "arrivals": {"checkin_rate": 1.0}, "checkin_rate": {"arrivals": "poisson"},
    "availability_sigma": {"availability": "lognormal", "online_mean": 2.0, "offline_mean": 1.0},
    "diurnal_spread": {"availability": "diurnal"},
    "diurnal_swing": {"availability": "diurnal"}, "online_mean": {"availability": "exponential"},
    "offline_mean": {"availability": "exponential"}, "bandwidth_follows_speed": {"bandwidth_median": 0.05},
    "bandwidth_sigma": {"bandwidth_median": 0.05}, "upload_fraction": {"bandwidth_median": 0.05},
    "server_bandwidth": {"bandwidth_median": 0.05}, "transfer_jitter_sigma": {"bandwidth_median": 0.05},
    "transfer_jitter_distribution": {"bandwidth_median": 0.05, "transfer_jitter_sigma": 1.0},
    "transfer_draws": {"link_classes": "1:0.01-1"}, "class_draw": {"speed_classes": "0.5:1,0.5:5"},
    "min_report_fraction": {"round_deadline": 1.5}, "partial_work": {"round_deadline": 1.0},
    "server_beta1": {"server_optimizer": "adam"}, "server_beta2": {"server_optimizer": "adam"},
    "server_tau": {"server_optimizer": "adam"}, "server_optimizer_lr": {"server_optimizer": "adam"},
    "server_momentum": {"server_optimizer": "sgd"}, "slow_factor": {"slow_fraction": 1.0},
    "stale_updates": {"max_staleness": 1}, "staleness_b": {"staleness": "hinge"},
    "delay_threshold": {"server_optimizer_lr": 1.0, "concurrency": 6},  # min(η, 1/τ_max) bites where η > 1/τ_max
    "pisces_explore_floor": {"pisces_explore_decay": 0.1},  # ε falls to its floor within a tiny run
}  # fmt: skip
# What changes no bytes by design: how the machine computes (speed knobs, clocks: docs/performance.md
# "Speed", docs/clocks.md), and when a run writes its checkpoint (what it resumes from, not what it does)
UNCHANGING = {*(item.name for item in FIELDS.values() if item.metadata["group"] == Group.MACHINE), "checkpoint_every"}
# FedBuff with K ≠ J: at K = J its equivalent round is its round, and lr_time could not show
FAMILIES = {"afl": {"algorithm": "afl"}, "sync": {"algorithm": "sync"},
            "fedbuff": {"algorithm": "fedbuff", "buffer_size": 2, "concurrency": 3},
            "fedcompass": {"algorithm": "fedcompass", "speed_sigma": 1.0, "local_epochs": 4, "rounds": 8},
            "fedasync": {"algorithm": "fedasync"}, "fadas": {"algorithm": "fadas", "buffer_size": 2},
            "ca2fl": {"algorithm": "ca2fl", "buffer_size": 2},
            "fedstaleweight": {"algorithm": "fedstaleweight", "buffer_size": 2, "rounds": 8},
            "asyncfeded": {"algorithm": "asyncfeded"},
            "mifa": {"algorithm": "mifa", "buffer_size": 2}, "ace": {"algorithm": "ace"},
            "port": {"algorithm": "port", "buffer_size": 2, "rounds": 8},
            "asofed": {"algorithm": "asofed", "rounds": 14},
            "fedac": {"algorithm": "fedac", "buffer_size": 2}, "daafl": {"algorithm": "daafl"},
            # steps a second slow enough that the period binds, speeds apart enough that the floor does
            "fedqueue": {"algorithm": "fedqueue", "seconds_per_sample": 1.0, "speed_sigma": 1.0,
                         "rounds": 4},
            # compute over latency and speeds apart, so that a client's request finds the model moved on
            "fedasmu": {"algorithm": "fedasmu", "seconds_per_sample": 0.3, "speed_sigma": 1.0,
                        "rounds": 14},
            # six clients, two running, a pacer quick to aggregate: the heard-from are chosen beside the unheard
            "pisces": {"algorithm": "pisces", "concurrency": 2, "pisces_step": 1.0, "pisces_unknown_latency": 0.5,
                       "rounds": 10}}  # fmt: skip
# A value that coincides with the default in that family's tiny run, by what the setting means
COINCIDES = {
    ("sync", "lr_time"): "a synchronous round aggregates J updates: its equivalent round is its round",
    ("afl", "lr_time"): "an AFL round aggregates J updates: its equivalent round is its round",
    ("fedqueue", "lr_time"): "a FedQueue round aggregates J updates: its equivalent round is its round",
    ("fedbuff", "clients_per_round"): "J sets FedBuff's K and M where they are not given; here both are",
    ("pisces", "clients_per_round"): "J sets Pisces's M where it is not given; here it is",
    ("pisces", "concurrency"): "the table's M, 2, is this family's own (two running of six: a choice that ε moves)",
    ("fedcompass", "patience"): "it stops a client whose epoch loss stops falling; a tiny client's keeps falling",
}
SIZES = [6, 10, 14, 8, 12, 9]
BASE = {"clients_per_round": 3, "rounds": 3, "local_epochs": 1, "batch_size": 4, "model": "mlp", "eval_every": 1}


def non_default(key: str, context: dict) -> object:
    """A value of `key` other than the one a run of `context` gets without it (its algorithm's own default
    where it has one, as CA2FL's s(τ)): the table's, else another choice, the other bool."""
    if key in CHANGED:
        return CHANGED[key]
    rule, default = FIELDS[key].metadata["rule"], own_default(key, context)
    if rule.choices:
        return next(choice for choice in rule.choices if choice != default and choice not in PRESETS.get(key, {}))
    if isinstance(default, bool):
        return not default
    raise AssertionError(f"{key}: give CHANGED a value that matters in a tiny run")


def own_default(key: str, context: dict) -> object:
    """What a run of `context` gets for `key` without it; the field's default where `context` alone is no run
    (it sets what needs `key`)."""
    try:
        return getattr(make_config(context), key)
    except InputError:
        return FIELDS[key].default


def outputs(folder: Path) -> dict[str, bytes]:
    """What a run's settings decide: every log and the model, not the wall times (timings.csv)."""
    return {path.name: path.read_bytes() for path in folder.iterdir() if path.name in (*RUN_OUTPUTS, EVALUATIONS)}


def tiny_run(settings: dict, folder: Path) -> dict[str, bytes] | None:
    """A tiny run's outputs, or None where it is refused (not read by this family, or not here)."""
    try:
        Simulation(make_config(settings), tiny_dataset(sum(SIZES)), contiguous_partition(SIZES), folder).run()
    except InputError:
        return None
    return outputs(folder)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_setting_changes_a_tiny_runs_bytes_or_is_refused(tmp_path, family):
    base = {**BASE, **FAMILIES[family]}

    def run(settings: dict, name: str) -> dict[str, bytes] | None:
        return tiny_run(settings, tmp_path / name)

    plain, silent, changed = run(base, "base"), [], 0
    for key in sorted(set(FIELDS) - UNCHANGING - {"algorithm", "population", "availability_trace"}):
        if (family, key) in COINCIDES:
            continue
        context = {**base, **CONTEXT.get(key, {})}
        value = non_default(key, context)
        after = run({**context, key: value}, key)
        if after is None:
            continue
        before = run(context, f"{key}-context") if key in CONTEXT else plain
        changed += 1
        if after == (before or plain):
            silent.append(f"{key}={value!r}")
    assert not silent, f"{family}: accepted, and changed no byte: {', '.join(silent)}"
    assert changed >= 50, f"{family}: only {changed} settings could be tried"  # most are: the check is not empty


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_an_algorithms_own_setting_in_a_timing_only_run_changes_its_bytes_or_is_refused(tmp_path, family):
    """A timing-only run (`trainer: none`) aggregates nothing: a setting read only by some algorithms'
    server step must be refused there (`TRAINING_ONLY`), not accepted and ignored."""
    base = {key: value for key, value in {**BASE, **FAMILIES[family]}.items() if key not in TRAINING_ONLY}
    base["trainer"] = "none"
    own = sorted(key for key, readers in SETTING_READERS.items() if FAMILIES[family]["algorithm"] in readers)

    def run(settings: dict, name: str) -> dict[str, bytes] | None:
        return tiny_run(settings, tmp_path / name)

    plain = run(base, "base")
    if FAMILIES[family]["algorithm"] in TIMED_BY_TRAINING:  # refused whole: its times are its training's
        assert plain is None, f"{family}: a timing-only run of it was accepted"
        return
    assert plain, f"{family}: its timing-only run was refused"
    silent = []
    for key in set(own) - UNCHANGING:
        value = non_default(key, base)
        after = run({**base, key: value}, key)
        if after is not None and after == plain:
            silent.append(f"{key}={value!r}")
    assert not silent, f"{family}, timing only: accepted, and changed no byte: {', '.join(silent)}"


@given(st.one_of(st.integers(-2, 400), HOSTILE))
@examples(40)
def test_a_generated_at_once_is_refused_naming_it_or_caps_a_process(value):
    config = copy.deepcopy(QUICK)
    config["resources"]["train"]["at_once"] = value
    try:
        check_schema(config)
        check_at_once(config["resources"]["train"], plan_workflow(config))
    except InputError as error:
        message = str(error)
        assert message.count("\n") == 0 and "resources.train.at_once" in message, message
        return
    processes = config["resources"]["train"].get("processes", 1)
    if value is not None:  # null: every run of a process at once, as unset
        assert plan_workflow(config).most_runs_in_a_process(processes) > value  # it caps some process's runs
