"""Tuning per algorithm on the validation split (an experiment's `tune:`, docs/theory.md "Tuning"):
every run name (an algorithm or a variant) trains at every point of its grid on the tuning seeds, at
one severity, and the point with the best claimed metric on the validation split (the time to the
target, then the accuracy at the budget) is the setting its final runs train with. Kept free of
heavy imports: the workflow plans the tuning runs while it parses.
"""

import hashlib
import itertools
import json
import math
import re
from pathlib import Path
from typing import Any

from asyncfl.planning.experiments import BUDGET_KEYS, check_owned, decimal_text, first_repeated, run_settings
from asyncfl.planning.layout import TUNING_JOB, TuningLayout
from asyncfl.settings.config import CLIENTS_WORLD, applies, check_concurrency, make_config, settings_of
from asyncfl.settings.errors import InputError
from asyncfl.settings.integrity import MAX_RECORD_BYTES, read_input, strict_json_loads
from asyncfl.settings.names import base_algorithm
from asyncfl.settings.rules import Group

MAX_EXTEND = 4  # steps a search may take past each end of a setting's grid (workflow/schemas/config.schema.yaml)
# What a tuning point is scored by on the validation split (config/README.md "Tuning"): the first time
# it reaches the target (the default), or the time from which it stays at or above it to the budget
TUNING_METRICS = ("time_to_target", "time_to_stay")


def tuning_points(experiment: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """The grid of run name `name`: every combination of the shared grid's settings its algorithm reads
    and of its own (`tune.by_algorithm`), in the config's order; [{}] where nothing applies to it."""
    tune = experiment["tune"]
    algorithm = base_algorithm(name)
    axes = {key: values for key, values in tune.get("grid", {}).items() if applies(key, algorithm)}
    axes.update(tune.get("by_algorithm", {}).get(name, {}))
    return [dict(zip(axes, values, strict=True)) for values in itertools.product(*axes.values())]


VALUE_TEXT = re.compile(r"[A-Za-z0-9_.+-]{1,32}")  # a value as it may stand in a folder name
# What a grid cannot tune: how a run is scored, when it ends, how the machine computes it (`rules.Group`)
NOT_TUNED = {
    setting: f"a setting of {group.value}"
    for group in (Group.EVALUATION, Group.ENDING, Group.MACHINE)
    for setting in settings_of(group)
}
MAX_LABEL = 120  # characters of a grid point's folder name


def value_text(value: Any) -> str:
    """A grid value as part of a folder name: as written where that is safe (letters, digits, _ . + -,
    at most 32 characters), else `h` and 12 hex digits of its hash (a trace path, say, never becomes a
    path of its own); the value itself is in the run's settings, in its plan and its run.json."""
    text = decimal_text(value) if isinstance(value, float) else str(value)
    return text if VALUE_TEXT.fullmatch(text) and ".." not in text else "h" + content_hash(value)


def content_hash(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:12]


def point_label(point: dict[str, Any]) -> str:
    """A grid point as a folder name: `gamma0_0.01-mixing_0.5` (one path segment, whatever the values:
    `value_text`; a label over MAX_LABEL characters is the point's hash)."""
    label = "-".join(f"{key}_{value_text(value)}" for key, value in point.items())
    return label if len(label) <= MAX_LABEL else "point_h" + content_hash(point)


def is_number(value: Any) -> bool:
    """A grid value a search can step past: an int or a float, not a bool."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def step_past(values: list[Any], direction: int, steps: int) -> list[Any]:
    """Up to `steps` values past one end of a numeric grid setting (`direction` 1: above its largest,
    -1: below its smallest), each one step of the grid's own spacing at that end: the ratio of the two
    end values where every value is positive (γ0 0.001, 0.003, 0.01 → 0.033, 0.11), else their
    difference; rounded to 3 significant digits (more where 3 would not move past the value before), an
    int to an int."""
    ordered = sorted(values) if direction > 0 else sorted(values, reverse=True)
    end, before = ordered[-1], ordered[-2]
    geometric, integral = all(value > 0 for value in values), all(isinstance(value, int) for value in values)
    past: list[Any] = []
    for step in range(1, steps + 1):
        exact = end * (end / before) ** step if geometric else end + (end - before) * step
        previous = past[-1] if past else end
        if not math.isfinite(exact):
            break  # past what a float holds (an overflow): the search ends at the last value there is
        if integral:
            value = round(exact)
            past.append(value if (value - previous) * direction > 0 else previous + direction)
            continue
        # the fewest significant digits, 3 or more, that keep it past the value before (and positive,
        # where the grid is geometric: an underflow to 0 ends the search)
        rounded = (float(f"{exact:.{digits}g}") for digits in range(3, 18))
        moved = next((v for v in rounded if (v - previous) * direction > 0 and (v > 0 or not geometric)), None)
        if moved is None:
            break
        past.append(moved)
    return past


def search_axes(experiment: dict[str, Any], name: str, reference_j: int) -> dict[str, list[Any]]:
    """The values a search of run name `name` may train at (`tune.extend` steps past each end of each
    numeric setting of its grid), ascending, each a valid setting of its run (a value its algorithm
    refuses, a γ0 ≤ 0 or a mixing over 1, is a bound: nothing past it is tried); {} without extend."""
    steps = experiment["tune"].get("extend", 0)
    points = tuning_points(experiment, name)
    if not steps or len(points) < 2:
        return {}
    axes = {}
    for key in points[0]:
        values = sorted({point[key] for point in points})
        if len(values) < 2 or not all(is_number(value) for value in values):
            continue
        below = valid_run(experiment, name, reference_j, points[0], key, step_past(values, -1, steps))
        above = valid_run(experiment, name, reference_j, points[0], key, step_past(values, 1, steps))
        axes[key] = [*reversed(below), *values, *above]
    return axes


def valid_run(experiment: dict[str, Any], name: str, reference_j: int, point: dict[str, Any], key: str,
              values: list[Any]) -> list[Any]:  # fmt: skip
    """The leading `values` of setting `key` that make a valid run of `name` (the first refused ends them)."""
    valid = []
    for value in values:
        try:
            check_point(experiment, name, reference_j, {**point, key: value}, "tune.extend")
        except InputError:
            break
        valid.append(value)
    return valid


def check_point(experiment: dict[str, Any], name: str, reference_j: int, point: dict[str, Any], where: str) -> None:
    """A grid point is a valid run of its name at every severity tuned: its settings accepted, its M
    within the clients."""
    for severity in tuning_severities(experiment):
        settings = {**tuned_settings(experiment, name, reference_j, point, severity), "algorithm": base_algorithm(name)}
        config = make_config({**settings, "clients_per_round": reference_j}, f"{where} ({name}, {point_label(point)})")
        check_concurrency(config.concurrency_or_default, experiment["clients"], config.replacement, where)


def searchable_points(experiment: dict[str, Any], name: str, reference_j: int) -> list[dict[str, Any]]:
    """Every point a tuning search of `name` may choose: its grid's, and with `tune.extend` every
    combination of its settings' search values (`search_axes`) with the grid's other settings."""
    points = tuning_points(experiment, name)
    axes = search_axes(experiment, name, reference_j)
    if not axes:
        return points
    values = {key: axes.get(key, list(dict.fromkeys(point[key] for point in points))) for key in points[0]}
    return [dict(zip(values, combination, strict=True)) for combination in itertools.product(*values.values())]


def next_points(
    points: list[dict[str, Any]], chosen: dict[str, Any], axes: dict[str, list[Any]]
) -> list[dict[str, Any]]:
    """The points a search trains next: for each setting with search values (`axes`) where `chosen`
    sits at an end of the values trained along its line (the points equal to it in every other
    setting, two or more), the chosen point one search value past that end; none that is trained."""
    after = []
    for key, axis in axes.items():
        line = sorted(point[key] for point in points if all(point[k] == chosen[k] for k in point if k != key))
        at = axis.index(chosen[key])
        for end, direction in ((line[0], -1), (line[-1], 1)):
            beyond = at + direction
            if len(line) >= 2 and chosen[key] == end and 0 <= beyond < len(axis):
                point = {**chosen, key: axis[beyond]}
                if point not in points and point not in after:
                    after.append(point)
    return after


def tuned_names(experiment: dict[str, Any]) -> list[str]:
    """The run names with a grid of two points or more: those that are tuned."""
    return [name for name in experiment["algorithms"] if len(tuning_points(experiment, name)) > 1]


def tuning_severity(experiment: dict[str, Any]) -> str:
    """The severity the tuning runs train at: `tune.severity`, or the sweep's first."""
    return experiment["tune"].get("severity", next(iter(experiment["severities"])))


def per_severity(experiment: dict[str, Any]) -> bool:
    """`tune.per_severity`: every severity tuned at itself, its final runs trained with its own choice (a
    deadline's report fraction chosen where 20 % of clients are slow need not serve where 40 % are)."""
    return experiment["tune"].get("per_severity", False) is True


def tuning_severities(experiment: dict[str, Any]) -> list[str]:
    """The severities tuning runs train at: every one with `tune.per_severity`, else `tuning_severity`'s."""
    return list(experiment["severities"]) if per_severity(experiment) else [tuning_severity(experiment)]


def tuned_settings(
    experiment: dict[str, Any], name: str, reference_j: int, point: dict[str, Any], severity: str | None = None
) -> dict[str, Any]:
    """A tuning run's settings: the run name's at `severity` (default: the tuning severity), with the grid
    point's, trained to the tuning's budget."""
    severity = severity or tuning_severity(experiment)
    settings = run_settings(experiment, name, reference_j, reference_j, severity)
    return {**settings, **point, "max_virtual_time": tuning_budget(experiment, severity)}


def tuning_budget(experiment: dict[str, Any], severity: str | None = None) -> float:
    """The virtual time the tuning runs at `severity` (default: the tuning severity) train to and are
    scored at: `tune.virtual_time`, its entry for the severity where it maps each severity to its own
    (`tune.per_severity`: a row whose runs barely stay above the target by T is tuned longer), else the
    experiment's budget (a choice made at T may serve final runs trained to 2T, read at T and 2T)."""
    tuning = experiment["tune"].get("virtual_time", experiment["budget"]["virtual_time"])
    return tuning[severity or tuning_severity(experiment)] if isinstance(tuning, dict) else tuning


def tuning_metric(experiment: dict[str, Any]) -> str:
    """The validation time a tuning point is scored by: `tune.metric`, else the first reach (the
    verdicts may rest on the time to stay, which a point whose accuracy swings about the target
    reaches first and keeps last)."""
    return experiment["tune"].get("metric", TUNING_METRICS[0])


def check_tune(key: str, experiment: dict[str, Any], reference_j: int) -> None:
    """An experiment's `tune:` block, refused in one line naming the key: a sweep's only, on the
    validation split, on seeds apart from the evaluation seeds, every grid of two values or more, every
    point a valid run of its algorithm."""
    if "tune" not in experiment:
        return
    tune, block = experiment["tune"], f"{key}.tune"
    if not experiment.get("severities"):
        raise InputError(f"{block} applies to experiments with severities: (its metric is the time to the target)")
    if "validation_fraction" not in experiment:
        raise InputError(f"{block} chooses on the validation split: set {key}.validation_fraction (e.g. 0.2)")
    shared = sorted(set(tune["seeds"]) & set(experiment["seeds"]))
    if shared:
        raise InputError(f"{block}.seeds {shared} are also {key}.seeds: tune on seeds the evaluation does not use")
    if tune.get("severity") not in (None, *experiment["severities"]):
        raise InputError(f"{block}.severity {tune['severity']!r} is not one of {key}.severities")
    if not isinstance(tune.get("per_severity", False), bool):
        raise InputError(f"{block}.per_severity {tune['per_severity']!r} is not true or false")
    if tune.get("per_severity") and "severity" in tune:
        raise InputError(
            f"{block}.severity names the one severity tuned at, and {block}.per_severity tunes at every one: "
            "remove one of them"
        )
    if not per_severity(experiment) and TUNING_JOB in experiment["severities"]:
        raise InputError(
            f"{key}.severities.{TUNING_JOB}: the tuning job's plan and log have that name; rename the severity"
        )
    check_tuning_budgets(key, experiment)
    if tuning_metric(experiment) not in TUNING_METRICS:
        raise InputError(
            f"{block}.metric {tune['metric']!r} is not a tuning metric: give one of {', '.join(TUNING_METRICS)}"
        )
    grids = {f"{block}.grid": tune.get("grid", {})}
    for name, grid in tune.get("by_algorithm", {}).items():
        if name not in experiment["algorithms"]:
            raise InputError(f"{block}.by_algorithm.{name} is not among {key}.algorithms; list it or remove it")
        grids[f"{block}.by_algorithm.{name}"] = grid
    for where, grid in grids.items():
        check_owned(where, grid)
        for setting, values in grid.items():
            if setting in (*BUDGET_KEYS.values(), "eval_every_updates", "eval_every_seconds"):
                raise InputError(f"{where}.{setting}: the budget and the time grid are the experiment's, not tuned")
            if setting in NOT_TUNED:
                raise InputError(
                    f"{where}.{setting} is {NOT_TUNED[setting]}, not what an algorithm learns with: every point "
                    "would train alike (or be scored apart); set it under train:"
                )
            if setting in CLIENTS_WORLD:
                raise InputError(
                    f"{where}.{setting} is the clients' world, not a setting of an algorithm: each run name "
                    "would choose its own world; set it under severities: or train:"
                )
            if len(values) < 2:
                raise InputError(
                    f"{where}.{setting} has one value: a grid needs two or more (a fixed value goes under train:)"
                )
            repeated = first_repeated(values)
            if repeated:
                raise InputError(f"{where}.{setting} lists {repeated[0]!r} twice; list each value once")
            check_not_defined(key, experiment, where, setting)
    names = tuned_names(experiment)
    if not names:
        raise InputError(f"{block}: no algorithm of this experiment reads a setting of its grid; tune one they read")
    for name in names:
        for point in tuning_points(experiment, name):
            check_point(experiment, name, reference_j, point, block)
    extend = tune.get("extend", 1)
    if isinstance(extend, bool) or not isinstance(extend, int) or not 1 <= extend <= MAX_EXTEND:
        raise InputError(
            f"{block}.extend must be an integer from 1 to {MAX_EXTEND} (steps past an edge), got {extend!r}"
        )
    if "extend" in tune and not any(search_axes(experiment, name, reference_j) for name in names):
        raise InputError(
            f"{block}.extend steps past the ends of numeric settings, and no grid of this experiment has one "
            "(two numbers or more); remove extend or tune a number"
        )


def check_tuning_budgets(key: str, experiment: dict[str, Any]) -> None:
    """`tune.virtual_time`: a virtual time in (0, the final runs' budget], or with `tune.per_severity` a
    mapping that gives one to every severity and names nothing else."""
    block, tuning = f"{key}.tune.virtual_time", experiment["tune"].get("virtual_time")
    if isinstance(tuning, dict):
        if not per_severity(experiment):
            raise InputError(
                f"{block} gives each severity its own tuning budget, and only {key}.tune.per_severity tunes at "
                "each severity: set per_severity: true, or give one virtual time"
            )
        unknown = sorted(set(tuning) - set(experiment["severities"]), key=str)
        missing = [severity for severity in experiment["severities"] if severity not in tuning]
        if unknown or missing:
            raise InputError(
                f"{block} names {unknown[0]!r}, not one of {key}.severities; give each severity its budget"
                if unknown
                else f"{block} has no budget for severity {missing[0]!r}; give every severity of {key} one"
            )
    budget = experiment["budget"]["virtual_time"]
    first = experiment.get("train", {}).get("eval_every_seconds")  # the time grid's first evaluation
    for severity in tuning_severities(experiment):
        value = tuning_budget(experiment, severity)
        where = f"{block}.{severity}" if isinstance(tuning, dict) else block if tuning is not None else None
        if isinstance(value, bool) or not (isinstance(value, int | float) and 0 < value <= budget):
            raise InputError(
                f"{where} {value!r} is not a virtual time in (0, {budget:g}], the final runs' budget: "
                f"give one within it, or leave it out to tune at {key}.budget.virtual_time"
            )
        if is_number(first) and value < first:  # the tuning would train, then find nothing to score it by
            raise InputError(
                f"{where or f'{key}.budget.virtual_time'} {value:g} is before the time grid's first evaluation, "
                f"at {key}.train.eval_every_seconds {first:g}: no tuning run would be scored; give a budget "
                f"≥ {first:g}"
            )


def check_not_defined(key: str, experiment: dict[str, Any], where: str, setting: str) -> None:
    """A grid tunes only what no severity, variant or other grid defines: a grid on a severity's key
    would override every severity, one on a variant's key (a deadline, M) would turn plain `sync` into
    a deadline run, or `afl-m7` back into M = 5, under a name that says otherwise."""
    tune = experiment["tune"]
    definers = {f"{key}.severities.{name}": block for name, block in experiment["severities"].items()}
    owner = where.rsplit(".", 1)[1] if ".by_algorithm." in where else None
    for name, block in experiment.get("variants", {}).items():
        if owner in (None, name):
            definers[f"{key}.variants.{name}"] = block
    if owner is not None:
        definers[f"{key}.tune.grid"] = tune.get("grid", {})
    for definer, block in definers.items():
        if setting in block:
            raise InputError(
                f"{where}.{setting}: {definer} sets {setting}, and a grid over it would change what that run "
                "name means; tune another setting, or make each value a variant of its own"
            )


def read_chosen(path: Path) -> dict[str, dict[str, Any]]:
    """The settings `asyncfl select` chose, by run name. An experiment's whole choice, of which a job
    may train some names only (a severity's runs split within resources.max_runtime, a process's
    share): `asyncfl train-many --chosen` checks each run against it, both ways (`check_choice`, and
    a tuned run whose name it leaves out)."""
    try:
        chosen = strict_json_loads(read_input(Path(path), MAX_RECORD_BYTES))["chosen"]
    except (ValueError, KeyError, TypeError) as error:
        raise InputError(
            f"{path} is not a choice asyncfl select wrote ({type(error).__name__}); run it again"
        ) from None
    if not isinstance(chosen, dict) or not all(isinstance(value, dict) for value in chosen.values()):
        raise InputError(f"{path} is not a choice asyncfl select wrote; run it again")
    return chosen


def check_choice(path: Path, name: str, point: dict[str, Any], choices: list[dict[str, Any]]) -> None:
    """A choice is one of its run's grid points (`choices`, from the plan): it sets only the tuned
    settings, to values of the grid; never a seed, an algorithm or a key the run's name defines."""
    if point not in choices:
        grid = ", ".join(point_label(p) for p in choices) or "none: the plan tunes no setting of it"
        raise InputError(
            f"{path} chose {point} for {name}, which is not a point of its tuning grid ({grid}); "
            "run asyncfl select again"
        )


def choice_params(experiment: dict[str, Any], grid: dict[str, Any], layout: TuningLayout) -> dict[str, Any]:
    """What choosing a tuning's points reads besides its runs (the workflow's `select_tuning` and searching
    `tune` jobs): the grid, the target, the budget and the metric it scores by, the figure's title."""
    return {
        "grid": json.dumps(grid),
        "target": experiment["target_accuracy"],
        "budget": tuning_budget(experiment, layout.severity),
        "metric": tuning_metric(experiment),
        "title": layout.experiment + layout.at_severity,
    }


def choice_files(layout: TuningLayout, figure: str) -> dict[str, str]:
    """What choosing writes: the choice, the tuning figure (PNG, PDF) and its table, where `layout` keeps them."""
    stem = layout.figure(figure)
    return {"chosen": layout.chosen, "png": f"{stem}.png", "pdf": f"{stem}.pdf", "table": f"{stem}.csv"}
