"""`asyncfl select`: the choice of an experiment's tuning grid (docs/theory.md "Tuning"), made on the
validation split only, and the `tuning` figure that shows it.

Per run name and grid point, over the tuning seeds: the restricted mean virtual time to the target on
the validation split (a run that never reaches it by the budget T counts as T), then, to break ties,
the mean validation accuracy at T; the first point of the grid wins a full tie. The time is the first
reach, or with `tune.metric: time_to_stay` the time from which the run stays at or above the target;
the table names its column after it. The test set is never read: the metrics come from each run's
evaluations.csv, checked against its run.json.
"""

import dataclasses
import math
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from asyncfl.analysis.figures import drawn_figure, heading, load_partitions, load_runs, write_figures  # noqa: E402
from asyncfl.analysis.run_styles import display_name, run_styles  # noqa: E402
from asyncfl.analysis.stragglers import time_grid, time_to_stay  # noqa: E402
from asyncfl.files import json_text, sha256, written_together  # noqa: E402
from asyncfl.planning.tuning import TUNING_METRICS, is_number, point_label  # noqa: E402
from asyncfl.settings.catalogue import catalogued  # noqa: E402
from asyncfl.settings.errors import InputError  # noqa: E402


def validation_scores(folder: Path, record: dict, target: float, budget: float, metric: str) -> tuple[float, float]:
    """A tuning run's virtual time by `metric` (to first reach `target` validation accuracy, or to stay at
    or above it; `budget` where it never did) and its validation accuracy at the budget, from its time
    grid."""
    grid = time_grid(folder, record)
    if grid is None:
        raise InputError(f"{folder} has no time grid (evaluations.csv); tuning runs need eval_every_seconds")
    if "validation_accuracy" not in grid:
        raise InputError(f"{folder} was trained without a validation split; tuning chooses on one")
    if record["config"].get("max_virtual_time") != budget:
        raise InputError(
            f"{folder} ran to a virtual-time budget of {record['config'].get('max_virtual_time')}, not "
            f"--virtual-time {budget:g}: the choice compares runs at one budget; give the experiment's"
        )
    grid = grid[grid.virtual_time <= budget]
    if grid.empty or grid.validation_accuracy.isna().any():
        raise InputError(
            f"{folder}: its time grid has no validation accuracy by T = {budget:g} s, or a missing one; train it again"
        )
    if metric == "time_to_stay":
        stayed = time_to_stay(grid, target, "validation_accuracy")
        time = budget if math.isnan(stayed) else stayed
    else:
        reached = grid[grid.validation_accuracy >= target]
        time = float(reached.virtual_time.iloc[0]) if len(reached) else budget
    return time, float(grid.validation_accuracy.iloc[-1])


def tuning_table(runs: Sequence[Path], partition_stats: list[Path], grid: dict[str, list[dict]], target: float,
                 budget: float, metric: str = TUNING_METRICS[0]) -> pd.DataFrame:  # fmt: skip
    """One row per tuning run: name, point, seed, its validation scores (the time in a column named after
    `metric`) and its fingerprint (`run_fingerprint`, left out of tuning.csv), after checking that every
    name × point × seed of `grid` is there once, each trained with its point's settings."""
    _, partitions = load_partitions(partition_stats)
    by_point: dict[str, list[Path]] = {}
    for run in runs:  # the runs of one point are one set of (name, J, seed); the points hold the same ones
        by_point.setdefault(Path(run).resolve().parents[2].name, []).append(Path(run))
    records = [record for group in by_point.values() for record in load_runs(group, partitions).records.items()]
    rows = []
    for (name, _, seed), (folder, record) in records:
        label = Path(folder).resolve().parents[2].name
        at = {point_label(point): point for point in grid.get(name, [])}
        if label not in at:
            raise InputError(f"{folder} is not a run of a grid point of {name} (its folder says {label!r})")
        differ = [key for key, value in at[label].items() if record["config"].get(key) != value]
        if differ:
            raise InputError(f"{folder} was not trained at its folder's point ({differ[0]} differs); train it again")
        time, accuracy = validation_scores(folder, record, target, budget, metric)
        row = {"name": name, "point": label, "seed": seed, metric: time, "accuracy_at_budget": accuracy}
        rows.append(row | {FINGERPRINT: run_fingerprint(Path(folder))})
    table = pd.DataFrame(rows)
    seeds = set(table.seed)
    for name, points in grid.items():
        for point in points:
            present = set(table[(table.name == name) & (table.point == point_label(point))].seed)
            if present != seeds:
                raise InputError(f"no {name} run at {point_label(point)} of seed {min(seeds - present)} among --runs")
    return table


# The column of a tuning run's fingerprint: the digest of what it trained, to tell knobs that changed nothing
FINGERPRINT = "fingerprint"


def run_fingerprint(folder: Path) -> str:
    """What a run trained, as one digest: its metrics.csv and evaluations.csv (the same bytes for two runs
    whose training was the same, the same partition and data)."""
    return "".join(sha256(folder / name) for name in ("metrics.csv", "evaluations.csv"))


def table_metric(table: pd.DataFrame) -> str:
    """The time a tuning table scores by: the one of TUNING_METRICS among its columns."""
    (metric,) = [column for column in TUNING_METRICS if column in table]
    return metric


def point_means(table: pd.DataFrame) -> pd.DataFrame:
    """Each name's and grid point's scores, the mean over the tuning seeds, the time as `time`."""
    scores = table.rename(columns={table_metric(table): "time"})
    return scores.groupby(["name", "point"], sort=False)[["time", "accuracy_at_budget"]].mean()


def choose(table: pd.DataFrame, grid: dict[str, list[dict]]) -> tuple[dict[str, dict], list[str]]:
    """Each name's chosen point (the lowest mean time, then the highest mean accuracy, then the grid's
    first), and the names whose choice sits on an edge of its grid (a setting at its lowest or highest
    value: the best may lie beyond it)."""
    means = point_means(table)
    chosen, on_edge = {}, []
    for name, points in grid.items():
        scores = [
            (
                means.loc[(name, point_label(p)), "time"],
                -means.loc[(name, point_label(p)), "accuracy_at_budget"],
                i,
            )
            for i, p in enumerate(points)
        ]
        best = points[min(scores)[2]]
        chosen[name] = best
        values = {key: sorted({point[key] for point in points}) for key in best}
        if any(len(values[key]) > 2 and best[key] in (values[key][0], values[key][-1]) for key in best):
            on_edge.append(name)
    return chosen, on_edge


def unvaried_settings(chosen: dict[str, dict], grid: dict[str, list[dict]]) -> dict[str, list[str]]:
    """Per name, the settings of its choice that no trained point varied at the choice's other settings:
    a search steps one setting past the grid's edge at the best point only, so a second knob tuned at the
    grid's γ0 was never tried at a new one; such a choice is flagged, not trusted as a joint optimum."""
    flagged = {}
    for name, best in chosen.items():
        keys = [
            key
            for key in best
            if len({point[key] for point in grid[name]}) > 1
            and {point[key] for point in grid[name] if all(point[k] == best[k] for k in best if k != key)}
            == {best[key]}
        ]
        if keys:
            flagged[name] = keys
    return flagged


def without_effect(table: pd.DataFrame, chosen: dict[str, dict], grid: dict[str, list[dict]]) -> dict[str, list[str]]:
    """Per name, the settings of its choice whose grid values, at the choice's other settings, trained
    byte-identical runs on every tuning seed (FADAS's τ_c where the step min(η, 1/τ_max) never reaches
    1/τ_max): no effect at this point, so the chosen value is a tie-break (the grid's first), not a choice."""
    flagged = {}
    for name, best in chosen.items():
        keys = []
        for key in best:
            points = [point for point in grid[name] if all(point[k] == best[k] for k in best if k != key)]
            if len({value_order(point[key]) for point in points}) < 2:
                continue
            rows = table[(table.name == name) & table.point.isin([point_label(point) for point in points])]
            if (rows.groupby("seed")[FINGERPRINT].nunique() == 1).all():
                keys.append(key)
        if keys:
            flagged[name] = keys
    return flagged


def value_order(value: Any) -> tuple[int, Any]:
    """A setting's value as a sort key: numbers first, ascending, then the rest as text."""
    return (0, value) if is_number(value) else (1, str(value))


PANELS_PER_ROW = 5  # the tuning figure's panels, one per tuned run name
TIME_WORDS = {"time_to_target": "Virtual time to", "time_to_stay": "Virtual time to stay above"}  # by metric


def draw_tuning(axes: np.ndarray, table: pd.DataFrame, grid: dict[str, list[dict]], chosen: dict[str, dict],
                target: float, budget: float, searched: dict[str, list[str]]) -> None:  # fmt: skip
    """One panel per tuned run name: the mean validation time to the target (T: never) against the
    first setting of its grid, one line per value of its other settings (a grid of its own, such as
    FedAsync's α, reads as lines, not as one axis of every name's points). A ring marks the choice, a
    hollow diamond each point a search added (`searched`: name → labels)."""
    means = point_means(table)
    flat = list(np.asarray(axes).flat)
    styles = run_styles(list(grid))
    for ax, (name, points) in zip(flat[: len(grid)], grid.items(), strict=True):
        first, *others = points[0]
        xs = sorted({point[first] for point in points}, key=value_order)
        lines: dict[tuple, list[dict]] = {}
        for point in points:
            lines.setdefault(tuple(point[key] for key in others), []).append(point)
        colour = styles[name][1]["color"]
        for index, (rest, members) in enumerate(lines.items()):
            members = sorted(members, key=lambda point: value_order(point[first]))
            y = [means.loc[(name, point_label(point)), "time"] for point in members]
            words = ", ".join(f"{key} {value}" for key, value in zip(others, rest, strict=True))
            ax.plot([xs.index(point[first]) for point in members], y, color=colour, alpha=1 - 0.25 * (index % 3),
                    ls=("-", "--", ":")[index % 3], marker="o", ms=3, lw=1, label=words or None)  # fmt: skip
        pick, (time, accuracy) = chosen[name], means.loc[(name, point_label(chosen[name]))]
        ax.plot([xs.index(pick[first])], [time], marker="o", ms=9, mfc="none", mec=colour, ls="none")
        ax.annotate(f"{accuracy:.3f}", (xs.index(pick[first]), time), xytext=(6, -10), textcoords="offset points",
                    fontsize="xx-small", color=colour)  # fmt: skip
        extra = [point for point in points if point_label(point) in searched.get(name, [])]
        ax.plot([xs.index(point[first]) for point in extra],
                [means.loc[(name, point_label(point)), "time"] for point in extra],
                marker="D", ms=5, mfc="white", mec=colour, ls="none")  # fmt: skip
        ax.set_xticks(range(len(xs)), [f"{value:g}" if isinstance(value, float) else str(value) for value in xs],
                      rotation=30, fontsize="x-small")  # fmt: skip
        ax.set(title=display_name(name), xlabel=first, ylim=(0, budget * 1.05))
        ax.title.set_fontsize("small")
        if others:
            ax.legend(fontsize="xx-small", frameon=False)
    time_words = TIME_WORDS[table_metric(table)]
    for ax in flat[:: min(PANELS_PER_ROW, len(flat))]:
        ax.set_ylabel(f"{time_words} {target:.0%}\nvalidation accuracy\n(s; {budget:g}: never)", fontsize="small")
    for ax in flat[len(grid) :]:
        ax.set_visible(False)
    words = (
        "Means over the tuning seeds; ringed: the point chosen (the fastest, then the most accurate at T, its "
        "validation accuracy at T beside it; every point's in tuning.csv)"
        + ("; hollow diamonds: points a search added past the grid's edge" if searched else "")
    )
    flat[0].figure.supxlabel(textwrap.fill(words, 75 * min(len(flat), PANELS_PER_ROW)), fontsize="x-small")


def select(runs: list[Path], partition_stats: list[Path], grid: dict[str, list[dict]], target: float, budget: float,
           out: Path, chosen_path: Path, title: str, metric: str = TUNING_METRICS[0]) -> list[Path]:  # fmt: skip
    """Choose every tuned name's point; write the choice (`chosen_path`), the table (tuning.csv) and the
    `tuning` figure; return the paths written."""
    table = tuning_table(runs, partition_stats, grid, target, budget, metric)
    return write_choice(table, grid, target, budget, out, chosen_path, title)


def write_choice(table: pd.DataFrame, grid: dict[str, list[dict]], target: float, budget: float, out: Path,
                 chosen_path: Path, title: str, search: dict[str, Any] | None = None) -> list[Path]:  # fmt: skip
    """`select`'s writing, from the tuning runs' table (`tuning_table`): the choice, the table and the
    figure. `search`: the rounds of `asyncfl tune`'s search (the points each added, its runs), kept in
    the choice and drawn."""
    sns.set_theme(context="paper", style="whitegrid", font_scale=0.9)
    chosen, on_edge = choose(table, grid)
    figure = catalogued("tuning")
    rows = math.ceil(len(grid) / PANELS_PER_ROW)
    figure = dataclasses.replace(figure, panels=min(len(grid), PANELS_PER_ROW), rows=rows, height=2.4 * rows + 0.8)
    metric = table_metric(table)
    unvaried, idle = unvaried_settings(chosen, grid), without_effect(table, chosen, grid)
    suptitle = tuning_heading(heading(title, figure.title), metric, target, on_edge, unvaried, idle)
    stem = Path(out) / figure.name
    drawn = drawn_figure(
        lambda axes: draw_tuning(axes, table, grid, chosen, target, budget, searched_points(search)),
        figure,
        figure.height,
        suptitle + search_words(search),
        stem,
    )
    choice = {"chosen": chosen, "on_edge": on_edge, "target_accuracy": target, "budget": budget}
    if unvaried:  # named only where it happens: a choice without it keeps its bytes
        choice["unvaried"] = unvaried
    if idle:  # likewise
        choice["no_effect"] = idle
    if metric != TUNING_METRICS[0]:  # named where it is not the default: a default choice keeps its bytes
        choice["metric"] = metric
    if search is not None:
        choice["search"] = search
    written = [*drawn.paths(), stem.with_suffix(".csv"), Path(chosen_path)]
    with written_together(written) as temporaries:  # the choice never stands beside another choice's figure
        write_figures([drawn], temporaries)
        table.drop(columns=FINGERPRINT).to_csv(temporaries[stem.with_suffix(".csv")], index=False)
        temporaries[Path(chosen_path)].write_text(json_text(choice))
    return written


def tuning_heading(
    title: str,
    metric: str,
    target: float,
    on_edge: list[str],
    unvaried: dict[str, list[str]] | None = None,
    idle: dict[str, list[str]] | None = None,
) -> str:
    """The figure's title: how the points were scored where it is not the default metric (a default
    figure keeps its bytes), the names whose choice sits on the grid's edge, those with a setting never
    varied at the choice's others (`unvaried_settings`) and those with one whose values changed nothing
    (`without_effect`)."""
    scored = "" if metric == TUNING_METRICS[0] else f" ({TIME_WORDS[metric].lower()} {target:.0%})"
    edge = f"\nchoice on the grid's edge for {', '.join(on_edge)}" if on_edge else ""
    untried = "; ".join(f"{name}'s {', '.join(keys)}" for name, keys in (unvaried or {}).items())
    same = "; ".join(f"{name}'s {', '.join(keys)}" for name, keys in (idle or {}).items())
    return (
        title
        + scored
        + edge
        + (f"\nnot varied at the choice's other settings: {untried}" if untried else "")
        + (f"\nno effect at this point (identical runs; the value is the grid's first): {same}" if same else "")
    )


def searched_points(search: dict[str, Any] | None) -> dict[str, list[str]]:
    """The point labels a search added past the grid (its rounds after the first), by run name."""
    added: dict[str, list[str]] = {}
    for round_ in (search or {}).get("rounds", [])[1:]:
        for name, labels in round_["points"].items():
            added.setdefault(name, []).extend(labels)
    return added


def search_words(search: dict[str, Any] | None) -> str:
    """The search's cost, for the figure's title: its runs and rounds (the CPU time, which differs on a
    rerun, is in the search's timings file)."""
    if search is None:
        return ""
    return f"\nsearched past the grid's edges: {search['runs']} tuning runs in {len(search['rounds'])} rounds"
