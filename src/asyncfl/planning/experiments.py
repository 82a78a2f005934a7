"""The workflow's own checks of its configuration, run while Snakemake parses, before any job starts.

The JSON schema checks the shape of the workflow's keys; what it cannot say (names that live in
`asyncfl.settings.names`, relations between keys, the `train:` settings that asyncfl validates) is checked here,
so a mistake fails `snakemake -n` with the key named instead of failing hours later in a job.
Kept free of heavy imports, like `names`.
"""

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from asyncfl.planning.families import declared_family, family_option
from asyncfl.settings.config import (
    CLIENTS_WORLD,
    DEFAULTS,
    MAX_SEED,
    NEEDS,
    SETTING_READERS,
    applies,
    check_concurrency,
    check_type,
    make_config,
)
from asyncfl.settings.errors import InputError
from asyncfl.settings.names import (
    ALGORITHM_NAME,
    ALGORITHMS,
    DATASETS,
    MAX_NAME,
    MODELS,
    NAME,
    TIMING_ONLY,
    VARIANT_SUFFIX,
    base_algorithm,
    updates_per_round,
)
from asyncfl.settings.numbers import finite
from asyncfl.settings.traces import read_trace

# Keys of `train:` that the workflow sets itself, per experiment or per job
# (docs/cluster.md "Changing the experiments").
WORKFLOW_OWNED = {
    "algorithm": "list it under the experiment's algorithms",
    "model": "set the experiment's model",
    "clients_per_round": "list it under the experiment's participation",
    "rounds": "set the experiment's rounds",
    "seed": "list it under the experiment's seeds",
}


def check_choice(key: str, value: Any, choices: dict[str, str]) -> None:
    if value not in choices:
        raise InputError(f"{key}: unknown name {value!r}; choose one of {', '.join(choices)}")


MAX_ALPHA_TEXT = 32  # characters of α written out in a partition's file name (1e-6 … 1e6 fit)


def check_name(name: str) -> None:
    """An experiment's name is a folder, a file-name part and a command-line value: letters, digits,
    _ and -, never a leading - (it would read as an option), at most MAX_NAME characters."""
    if not NAME.fullmatch(name) or len(name) > MAX_NAME:
        raise InputError(
            f"experiments.{name[:80]!r}: an experiment's name must be 1–{MAX_NAME} letters, digits, _ or -, "
            "not starting with -; rename it"
        )


def check_partition_keys(key: str, experiment: dict[str, Any]) -> None:
    """α and the seeds as a partition file name and torch's and NumPy's generators can take them."""
    alpha = experiment["alpha"]
    if not finite(alpha) or alpha <= 0:
        raise InputError(f"{key}.alpha must be a finite number > 0 (the paper: 0.5), got {alpha!r}")
    if len(decimal_text(alpha)) > MAX_ALPHA_TEXT:
        raise InputError(
            f"{key}.alpha = {alpha!r} is {len(decimal_text(alpha))} characters written out in the partition's "
            f"file name; use an α with at most {MAX_ALPHA_TEXT} (e.g. between 1e-6 and 1e6)"
        )
    for seed in experiment["seeds"]:
        if seed > MAX_SEED:
            raise InputError(f"{key}.seeds: {seed} is larger than {MAX_SEED}, the largest seed the generators take")
    replication = experiment.get("replication_seeds", [])
    if sorted(set(replication) - set(experiment["seeds"])):
        raise InputError(
            f"{key}.replication_seeds {sorted(set(replication) - set(experiment['seeds']))} are not among its seeds; "
            "the replication seeds are some of the seeds the experiment trains: add them to seeds"
        )
    if replication and set(experiment["seeds"]) <= set(replication):
        raise InputError(f"{key}.replication_seeds name every seed; leave some seeds as the discovery set")
    if replication and not experiment.get("severities"):
        raise InputError(f"{key}.replication_seeds are read by a severity sweep's verdicts only; add severities")


def check_experiment(name: str, experiment: dict[str, Any], reference_j: int) -> None:
    """One experiment: its names, its J values against C and reference_J, its `train:` settings."""
    check_name(name)
    key = f"experiments.{name}"
    check_partition_keys(key, experiment)
    check_choice(f"{key}.dataset", experiment["dataset"], DATASETS)
    check_choice(f"{key}.model", experiment["model"], MODELS)
    check_variants(key, experiment)
    for algorithm in experiment["algorithms"]:
        if algorithm not in experiment.get("variants", {}):
            check_choice(f"{key}.algorithms", algorithm, ALGORITHMS)
    participation = experiment["participation"]
    if reference_j not in participation:
        raise InputError(
            f"{key}.participation {participation} lacks reference_J = {reference_j}, which the single-J figures "
            f"and the other algorithms use; add {reference_j} to it or change reference_J"
        )
    if max(participation) > experiment["clients"]:
        raise InputError(
            f"{key}.participation has J = {max(participation)} > {key}.clients = {experiment['clients']}; "
            f"use J ≤ {experiment['clients']} or more clients"
        )
    train = experiment.get("train", {})
    check_owned(f"{key}.train", train)
    for block, settings in settings_blocks(key, experiment):  # train:, a severity's, a variant's
        if settings.get("trainer") == TIMING_ONLY and "severities" in experiment:
            raise InputError(
                f"{block}.trainer: none (timing-only) trains no model, and a severity sweep's verdicts compare "
                "accuracies; sweep trained runs, or drop severities: for the clock's figures alone"
            )
    check_severities(key, experiment, reference_j)
    check_budget_owned(key, experiment)
    for block, settings in settings_blocks(key, experiment):  # a client ≥ C, a bad row: refused before any job runs
        if isinstance(settings.get("availability_trace"), str):
            try:
                read_trace(Path(settings["availability_trace"]), experiment["clients"])
            except InputError as error:
                raise InputError(f"{block}.availability_trace: {error}") from None
    algorithms = [base_algorithm(name) for name in experiment["algorithms"]]
    for setting in train:
        if not any(applies(setting, algorithm) for algorithm in algorithms):
            readers = ", ".join(SETTING_READERS[setting])
            raise InputError(
                f"{key}.train.{setting}: no algorithm of this experiment reads it (only {readers}); remove it"
            )
    read: set[str] = set()
    for name, j in sorted({(a, j) for a, j, _ in experiment_runs(experiment, reference_j)}):  # seeds alike
        for severity in experiment.get("severities") or [None]:
            settings = {
                **run_settings(experiment, name, j, reference_j, severity),
                "algorithm": base_algorithm(name),
                "clients_per_round": j,
            }
            read.update(settings)
            source = f"{key}.variants.{name}" if name in experiment.get("variants", {}) else f"{key}.train"
            config = make_config(settings, source if severity is None else f"{source} (severity {severity})")
            check_concurrency(config.concurrency_or_default, experiment["clients"], config.replacement, source)
    for block, settings in settings_blocks(key, experiment):
        for setting in settings:
            if setting in NEEDS and setting not in read and settings[setting] != DEFAULTS[setting]:  # unread
                raise InputError(
                    f"{block}.{setting} applies only with {NEEDS[setting][0]}, which no run of this experiment has; "
                    f"set that or remove {setting}"
                )
    check_budget_divides(key, experiment, reference_j)


VARIANT = re.compile(rf"(?P<algorithm>{ALGORITHM_NAME})-{VARIANT_SUFFIX}")


def check_variants(key: str, experiment: dict[str, Any]) -> None:
    """Variants (`ALGORITHM-SUFFIX: {settings}`) are named after an algorithm, listed under algorithms,
    set no key the workflow owns, and belong to experiments that sweep straggler severity: the other
    experiments' figures know the algorithms only."""
    variants = experiment.get("variants", {})
    if variants and "severities" not in experiment:
        raise InputError(
            f"{key}.variants: variants run in experiments with severities: only; remove them or add severities"
        )
    for name, settings in variants.items():
        match = VARIANT.fullmatch(name)
        if not match or match["algorithm"] not in ALGORITHMS:
            raise InputError(
                f"{key}.variants.{name}: a variant's name is an algorithm, a dash and a suffix of a–z, 0–9 or _ "
                f"(e.g. sync-deadline); algorithms: {', '.join(ALGORITHMS)}"
            )
        if name not in experiment["algorithms"]:
            raise InputError(f"{key}.variants.{name} is not listed under {key}.algorithms; list it or remove it")
        check_owned(f"{key}.variants.{name}", settings)
        world = [setting for setting in settings if setting in CLIENTS_WORLD]
        if world:
            raise InputError(
                f"{key}.variants.{name}.{world[0]} changes the clients' world, which every run of a severity "
                "shares (its verdicts compare algorithms in one world); set it under severities: or train:"
            )


def check_owned(key: str, settings: dict[str, Any]) -> None:
    for owned, fix in WORKFLOW_OWNED.items():
        if owned in settings:
            raise InputError(f"{key}.{owned} is set by the workflow, not here; {fix}")


def check_severities(key: str, experiment: dict[str, Any], reference_j: int) -> None:
    """An experiment that sweeps straggler severity compares its algorithms at reference_J, at an equal
    virtual-time budget (the claim is about time), against a target accuracy."""
    severities = experiment.get("severities")
    if severities is not None and "pack_runs" in experiment:
        raise InputError(f"{key}.pack_runs: a severity sweep already trains one job per severity; remove it")
    if severities is None:
        for owned in ("target_accuracy", "other_targets", "other_budgets", "equivalence_margin", "verdict_family",
                      "power", "replication"):  # fmt: skip
            if owned in experiment:
                raise InputError(f"{key}.{owned} applies to experiments with severities: only; remove it")
        return
    for name, settings in severities.items():
        if not NAME.fullmatch(name) or len(name) > MAX_NAME:
            raise InputError(f"{key}.severities.{name[:80]!r}: a severity's name is a folder: letters, digits, _ or -")
        check_owned(f"{key}.severities.{name}", settings)
    if experiment["participation"] != [reference_j]:
        raise InputError(
            f"{key}.participation must be [{reference_j}] (reference_J): a severity sweep compares algorithms at one J"
        )
    if "virtual_time" not in experiment.get("budget", {}):
        raise InputError(
            f"{key}.budget.virtual_time is missing: a severity sweep compares its runs at an equal virtual time; "
            "set it (e.g. budget: {virtual_time: 120})"
        )
    if "target_accuracy" not in experiment:
        raise InputError(f"{key}.target_accuracy is missing: the test accuracy whose time the sweep measures; set it")
    check_targets(key, [experiment["target_accuracy"], *experiment.get("other_targets", [])])
    budget, others = experiment["budget"]["virtual_time"], experiment.get("other_budgets", [])
    for other in others:
        if isinstance(other, bool) or not (isinstance(other, int | float) and 0 < other < budget):
            raise InputError(
                f"{key}.other_budgets: {other!r} is not a virtual time in (0, {budget:g}), the runs' budget: give a "
                "shorter one, or raise budget.virtual_time"
            )
    repeated = first_repeated(others)
    if repeated:
        raise InputError(f"{key}.other_budgets gives {repeated[0]!r} twice; give each budget once")
    margin = experiment.get("equivalence_margin")
    shortest = min((budget, *others))
    if margin is not None and (
        isinstance(margin, bool) or not (isinstance(margin, int | float) and 0 < margin < shortest)
    ):
        raise InputError(
            f"{key}.equivalence_margin: {margin!r} is not a time in (0, {shortest:g}) s, below the "
            "shortest budget the verdicts are read at (every difference lies within a margin that long): give a "
            "shorter one"
        )
    power = experiment.get("power")
    if power is not None and (isinstance(power, bool) or not (isinstance(power, int | float) and 0.5 <= power < 1)):
        raise InputError(
            f"{key}.power: {power!r} is not a power in [0.5, 1) (the chance of detecting the difference each "
            "comparison reports as detectable; 0.8 is usual)"
        )
    if experiment.get("replication", "apart") not in ("apart", "pooled"):
        raise InputError(
            f"{key}.replication: {repr(experiment['replication'])[:80]} is not apart (each seed set its own verdict) "
            "or pooled (decided on every seed, the sets its check)"
        )
    if experiment.get("replication") is not None and not experiment.get("replication_seeds"):
        raise InputError(f"{key}.replication says how to read the replication seeds; name them (replication_seeds)")
    if "verdict_family" in experiment:
        readings = (1 + len(experiment.get("other_targets", [])), 1 + len(others))
        family = experiment["verdict_family"]
        declared_family(family, f"{key}.verdict_family", list(severities), experiment["algorithms"], *readings)
    grids = [(block, settings["eval_every_seconds"]) for block, settings in settings_blocks(key, experiment)
             if isinstance(settings.get("eval_every_seconds"), int | float)]  # fmt: skip
    if grids and others and min(others) < max(every for _, every in grids):
        block, every = max(grids, key=lambda grid: grid[1])
        raise InputError(
            f"{key}.other_budgets: {min(others)!r} is before the first evaluation of the runs of {block} "
            f"(eval_every_seconds {every:g}): no run has a score to read there; give budgets of {every:g} or more"
        )


def check_targets(key: str, targets: list[Any], names: tuple[str, str] = ("target_accuracy", "other_targets")) -> None:
    """The accuracies a sweep's verdicts are read at: each in (0, 1] (NaN is not), each once; `names`: what
    the user called the first and the others (config keys, or the command's flags)."""
    for target in targets:
        if not (isinstance(target, (int, float)) and 0 < target <= 1):
            raise InputError(f"{key}: target accuracy {target!r} is not a number in (0, 1]; give one such as 0.8")
    repeated = first_repeated(targets)
    if repeated:
        where = f"{names[0]} and {names[1]}" if repeated[0] == targets[0] else names[1]
        raise InputError(f"{key}: target accuracy {repeated[0]!r} is given twice ({where}); give each once")


def first_repeated(values: list[Any]) -> list[Any]:
    """[the first value that appears twice in `values`], or [] where each appears once (a list, since
    the value itself may be falsy or unhashable: a grid point is a dict)."""
    return [value for index, value in enumerate(values) if value in values[:index]][:1]


def settings_blocks(key: str, experiment: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every block of run settings of an experiment, by its key: `train:`, each severity, each variant."""
    yield f"{key}.train", experiment.get("train", {})
    for kind in ("severities", "variants"):
        for name, settings in experiment.get(kind, {}).items():
            yield f"{key}.{kind}.{name}", settings


def check_budget_owned(key: str, experiment: dict[str, Any]) -> None:
    """Under a `budget:` the runs at reference_J stop, and are evaluated, as the budget says: a block
    that sets the same stop (or its own evaluation count) would be overridden without a word. Each
    value is checked as the run setting it becomes, under the budget's own key."""
    budget = experiment.get("budget", {})
    for name, value in budget.items():
        make_config({BUDGET_KEYS[name]: value}, f"{key}.budget.{name} (a run's {BUDGET_KEYS[name]})")
    owned = {BUDGET_KEYS[name]: f"{key}.budget.{name}" for name in budget}
    if budget:
        owned["eval_every_updates"] = f"{key}.budget (which evaluates every eval_every × reference_J updates)"
    for block, settings in settings_blocks(key, experiment):
        for setting in settings:
            if setting in owned:
                raise InputError(f"{block}.{setting} and {owned[setting]} both set it; keep one")


def experiment_traces(experiment: dict[str, Any]) -> list[str]:
    """The availability traces an experiment's runs read, wherever a block names one (`train:` or a
    severity: a variant or a tuning grid may not change the clients' world): each is an input of the
    jobs whose runs read it."""
    traces = [settings.get("availability_trace") for _, settings in settings_blocks("", experiment)]
    return sorted({str(trace) for trace in traces if trace is not None})


def check_budget_divides(key: str, experiment: dict[str, Any], reference_j: int) -> None:
    """An update budget is equal only if every compared algorithm's round divides it: a run stops at
    the first aggregation at or after the budget, so AFL at J = 5 would pay 15 updates for a budget
    of 12 while FedAsync pays 12 (updates per round: `names.UPDATES_PER_ROUND`)."""
    updates = experiment.get("budget", {}).get("updates")
    if updates is None:
        return
    for algorithm in experiment["algorithms"]:
        buffer_size = run_settings(experiment, algorithm, reference_j, reference_j).get("buffer_size")
        size = updates_per_round(base_algorithm(algorithm), reference_j, buffer_size)
        if updates % size:
            blocks = [block for block, settings in settings_blocks(key, experiment) if "buffer_size" in settings]
            sized = f" (K, {blocks[0]}.buffer_size)" if buffer_size is not None and blocks else ""
            raise InputError(
                f"{key}.budget.updates = {updates} is not a multiple of {algorithm}'s {size} updates per round"
                f"{sized}, so that run would pay {-(-updates // size) * size}; use a multiple of every round size "
                f"(e.g. {updates - updates % size or size})"
            )


BUDGET_KEYS = {"updates": "max_updates", "dispatches": "max_dispatches", "virtual_time": "max_virtual_time"}
ROUNDS_CAP = 100_000_000  # under a virtual-time budget the budget, not the rounds, ends a run


def experiment_runs(experiment: dict[str, Any], reference_j: int) -> Iterator[tuple[str, int, int]]:
    """(algorithm, J, seed) of every run of an experiment: AFL over the J sweep, the others at reference_J."""
    for algorithm in experiment["algorithms"]:
        for j in experiment["participation"] if algorithm == "afl" else [reference_j]:
            for seed in experiment["seeds"]:
                yield algorithm, j, seed


def run_settings(
    experiment: dict[str, Any], algorithm: str, j: int, reference_j: int, severity: str | None = None
) -> dict[str, Any]:
    """The `asyncfl train` settings of one run of an experiment (besides algorithm, J and seed): the
    experiment's `train:` settings and those of the `severity` that `algorithm` reads (a setting applies
    to the algorithms that read it; `asyncfl train` refuses one its algorithm ignores), then those of
    the variant `algorithm` names, if it names one (`ALGORITHM-SUFFIX`: each read by its algorithm).

    The runs at reference_J are the ones that compare algorithms: under the experiment's `budget`
    they all stop at the same client updates and/or virtual time, whatever a round costs each
    algorithm, and they are evaluated at the same update counts (every `eval_every` × reference_J
    updates: for the algorithms whose round is reference_J updates, exactly every `eval_every`
    rounds, as before). The AFL sweep over J keeps `rounds` and `eval_every`, as in the paper's figure.
    """
    shared = {**experiment.get("train", {}), **(experiment["severities"][severity] if severity else {})}
    train = {key: value for key, value in shared.items() if applies(key, base_algorithm(algorithm))}
    variant = experiment.get("variants", {}).get(algorithm, {})
    train.update(variant)
    settings = {**train, "model": experiment["model"], "rounds": experiment["rounds"]}
    budget = experiment.get("budget", {})
    if budget and j == reference_j:
        settings.update({BUDGET_KEYS[key]: value for key, value in budget.items()})
        settings["rounds"] = budget.get("updates", ROUNDS_CAP)  # every round aggregates at least one update
        every = settings.pop("eval_every", 1)
        if type(every) is int:
            settings["eval_every_updates"] = every * reference_j
        else:  # another type stays eval_every, for the run's check to name
            settings["eval_every"] = every
    for key in [key for key in shared if key in NEEDS and key in settings and key not in variant]:
        settings = without_unread(settings, key, base_algorithm(algorithm), j)
    return settings


def without_unread(settings: dict[str, Any], key: str, algorithm: str, j: int) -> dict[str, Any]:
    """A run's settings less `key`, a shared block's setting read only where another holds (`NEEDS`),
    where the run, as its algorithm makes it, does not have that (FedAdam's server step size in `train:`
    beside AFL, which has no server optimizer); `check_experiment` refuses one no run reads."""
    if settings[key] == DEFAULTS[key]:  # the default as written: harmless where it is not read
        return settings
    try:
        check_type(key, settings[key])
    except InputError:  # a value of another type: the run's own check names it under its block
        return settings
    without = {name: value for name, value in settings.items() if name != key}
    try:
        config = make_config({**without, "algorithm": algorithm, "clients_per_round": j})
    except InputError:  # refused for another reason: the run's own check names it
        return settings
    return settings if NEEDS[key][1](config) else without


def decimal_text(value: float) -> str:
    """A number in plain decimals, as file names and the alpha wildcard spell it (1e-06 → 0.000001;
    0.5 and 1.0 and 2 as Python writes them)."""
    return str(value) if isinstance(value, int) else np.format_float_positional(value, trim="0")


def verdict_options(experiment: dict[str, Any]) -> list[str]:
    """`asyncfl stragglers`' options for what a checked severity sweep declares about its verdicts (its
    equivalence margin, Holm family, power and pooled seed sets), each only where it declares it."""
    margin, power = experiment.get("equivalence_margin"), experiment.get("power")
    return [
        *([f"--equivalence-margin={margin}"] if margin is not None else []),
        *family_option(experiment),
        *([f"--power={power}"] if power is not None else []),
        *(["--pooled"] if experiment.get("replication") == "pooled" else []),
    ]
