"""The `straggler_claim` figure: the paper's claim that AFL copes with stragglers better than synchronous
FL, measured (docs/theory.md "Stragglers").

An experiment with `severities:` trains every algorithm (and every variant, such as synchronous FL with a
round deadline) at each straggler severity, paired seeds, to one virtual-time budget T. Per run, two
numbers: the virtual time at which the global model first reached the target test accuracy (no time where
it never did by T: the figure marks those runs instead of dropping them), and the test accuracy of the last
evaluation at or before T. Both are read from metrics.csv alone, after the run folders are checked.
"""

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402

from asyncfl.analysis.advantage import asynchronous_families, draw_advantage, matched_cells  # noqa: E402
from asyncfl.analysis.figures import (  # noqa: E402
    checked_records,
    drawn_figure,
    heading,
    load_partitions,
    write_figures,
)
from asyncfl.analysis.run_styles import display_name, run_names, run_styles  # noqa: E402
from asyncfl.analysis.straggler_curves import draw_curves  # noqa: E402
from asyncfl.analysis.verdict_curve import curve_budgets, draw_verdict_curve, verdict_curve  # noqa: E402
from asyncfl.analysis.verdict_summary import draw_verdict_summary, summary_rows
from asyncfl.analysis.verdicts import readjusted, seed_set_verdicts, verdict_lines, with_detectable  # noqa: E402
from asyncfl.files import written_together  # noqa: E402
from asyncfl.fl.algorithms import make_strategy  # noqa: E402
from asyncfl.planning.experiments import check_targets, first_repeated  # noqa: E402
from asyncfl.planning.families import Family  # noqa: E402
from asyncfl.planning.layout import EVALUATIONS, METRICS, STRAGGLER_VERDICTS  # noqa: E402
from asyncfl.runs.record import verify_run_files  # noqa: E402
from asyncfl.settings.catalogue import catalogued  # noqa: E402
from asyncfl.settings.config import DEFAULTS, applies, make_config  # noqa: E402
from asyncfl.settings.errors import InputError  # noqa: E402
from asyncfl.settings.names import TIMING_ONLY  # noqa: E402

# The claim figure's height grows with its verdict lines past those its catalogued height was sized
# for, so that its panels keep their size however many asynchronous run names a sweep compares
VERDICT_LINES_FITTED = 12
LINE_INCHES = 0.14  # an x-small line of the legend's title
MAP_MIN_HEIGHT = 3.8  # inches: the map's colour bar label fits beside one row of one severity


def severity_of(run: Path) -> str:
    """The severity a run belongs to: the folder above ALGORITHM/JN/seedS (`layout.SEVERITY_RUN_FOLDER`)."""
    return Path(run).resolve().parents[2].name


def check_severity(folder: Path, record: dict, severity: str, settings: dict) -> None:
    """A run in a severity's folder was trained with that severity's settings (those its algorithm reads):
    swapped folders would be drawn under each other's labels."""
    for key, value in settings.items():
        if key not in DEFAULTS:
            raise InputError(f"--severities {severity}: {key[:80]!r} is not a run setting (docs/settings.md)")
        if applies(key, record["config"]["algorithm"]) and record["config"].get(key) != value:
            raise InputError(
                f"{folder} was trained with {key} = {record['config'].get(key)!r}, not severity {severity}'s "
                f"{value!r}: its folder is another severity's; train it again in its own folder"
            )


def check_one_run_name(runs: list[tuple[str, int, Path, dict]], varying: set[str]) -> None:
    """The runs of one run name differ in the `varying` settings alone (the seed, the severities') and in
    what a tuning chose for them (run.json's `tuned`, per severity where the sweep tunes each): run.json
    names the algorithm, not the variant, so a variant's run in its plain name's folder (sync-over in
    sync/) or a run of other settings would be paired as that name's. `runs`: (name, seed, folder, run.json)."""
    first: dict[str, tuple[Path, dict]] = {}
    for name, _, folder, record in runs:
        other, theirs = first.setdefault(name, (folder, record))
        ignored = varying | set(record.get("tuned") or {}) | set(theirs.get("tuned") or {})
        mine, their = (
            {key: value for key, value in each["config"].items() if key not in ignored} for each in (record, theirs)
        )
        differ = sorted(key for key in mine.keys() | their.keys() if mine.get(key) != their.get(key))
        if differ:
            key = differ[0]
            raise InputError(
                f"{folder} and {other}, both {name} runs, differ in {key} ({mine.get(key)!r} against "
                f"{their.get(key)!r}): a run of another name or settings in {name}'s folder? Put it back"
            )


def check_one_partition_a_seed(runs: list[tuple[str, int, Path, dict]]) -> None:
    """The runs of one seed share its partition (its .npz's SHA-256 in run.json), whatever their severity
    and name, as a sweep trains them: a run of another partition would be paired as the seed's, and the
    kept minimum has no partition statistics to catch it. `runs`: (name, seed, folder, run.json)."""
    seen: dict[int, tuple[Path, str]] = {}
    for _, seed, folder, record in runs:
        partition = record.get("partition_sha256", "")
        other, theirs = seen.setdefault(seed, (folder, partition))
        if partition != theirs:
            raise InputError(
                f"{folder} was trained on another partition than {other}, of the same seed {seed} (run.json's "
                "partition_sha256): a sweep's runs of one seed share one; train it on the seed's partition"
            )


def check_complete(runs_by_severity: dict[str, set[tuple[str, int]]]) -> None:
    """Every severity has the same runs (algorithms and variants × seeds): a comparison with a run missing
    at one severity would be read as the others'."""
    every = set().union(*runs_by_severity.values())
    for severity, present in runs_by_severity.items():
        if present != every:
            name, seed = sorted(every - present)[0]
            raise InputError(
                f"no {name} run of seed {seed} at severity {severity!r} among --runs, though other severities have "
                "one; give every severity the same runs"
            )


def time_grid(folder: Path, record: dict) -> pd.DataFrame | None:
    """A run's evaluations.csv, checked against its run.json; None for a run without a time grid."""
    if EVALUATIONS not in record["sha256"]:
        return None
    verify_run_files(folder, (EVALUATIONS,))
    return pd.read_csv(Path(folder) / EVALUATIONS)


def trajectory(folder: Path, record: dict) -> pd.DataFrame:
    """A run's test accuracy over virtual time, with the client work spent by then: its time grid
    (evaluations.csv, checked against run.json) where it evaluated on one, else its evaluations at
    aggregations in metrics.csv (checked likewise; no work column there: NaN). A timing-only run, which
    scores no model, is refused: it has no accuracy to judge."""
    if record["config"].get("trainer") == TIMING_ONLY:
        raise InputError(
            f"{folder} is a timing-only run (trainer: none): it has no test accuracy to judge; give trained runs"
        )
    grid = time_grid(folder, record)
    if grid is not None:
        shown = grid[["virtual_time", "test_accuracy", "busy_seconds"]]
        return shown.assign(resolution=record["config"]["eval_every_seconds"])
    verify_run_files(folder, (METRICS,))
    metrics = pd.read_csv(Path(folder) / METRICS)
    evaluated = metrics.dropna(subset=["test_accuracy"])[["virtual_time", "test_accuracy"]]
    return evaluated.assign(busy_seconds=math.nan, resolution=math.nan)


def claim_trajectories(runs: Sequence[Path], partition_stats: list[Path], severities: dict[str, dict],
                       budget: float) -> pd.DataFrame:  # fmt: skip
    """Every run's `trajectory` up to `budget`, tagged with its severity, run name (an algorithm or a
    variant) and seed, after checking that the runs are one complete sweep to one budget, each in its
    severity's folder, all evaluated at one resolution. `severities`: each severity's settings, by
    name, in the figure's order. A run is judged from its run.json and the file its accuracies are in
    (evaluations.csv on a time grid): the kept minimum re-judges, without `partition_stats` (empty: the
    runs' partitions are not checked against statistics)."""
    partitions = load_partitions(partition_stats)[1] if partition_stats else None
    loaded: list[tuple[str, int, Path, dict]] = []  # every run: its name, seed, folder and run.json
    parts = []
    present: dict[str, set[tuple[str, int]]] = {}
    for severity, settings in severities.items():
        group = [run for run in runs if severity_of(run) == severity]
        if not group:
            raise InputError(f"no run of severity {severity!r} among --runs; give every severity's runs")
        records = checked_records(group, partitions, files=())
        if not any(name == "afl" for name, _, _ in records):
            raise InputError(f"no AFL run of severity {severity!r} among --runs; the claim is about AFL: add one")
        present[severity] = {(name, seed) for name, _, seed in records}
        loaded += [(name, seed, folder, record) for (name, _, seed), (folder, record) in records.items()]
        for (name, _, seed), (folder, record) in records.items():
            check_severity(folder, record, severity, settings)
            recorded = record["config"].get("max_virtual_time")
            if recorded != budget:
                raise InputError(
                    f"{folder} ran to a virtual-time budget of {recorded}, not --virtual-time {budget}: the claim "
                    "compares runs at one budget; give runs of one experiment"
                )
            run = trajectory(folder, record)
            in_flight = make_strategy(make_config(record["config"])).initial_clients
            shown = run[run.virtual_time <= budget]
            if shown.empty:
                first = f"its first at {run.virtual_time.min():g} s" if len(run) else "none at all"
                raise InputError(
                    f"{folder} has no evaluation at or before the budget T = {budget:g} virtual s ({first}): the "
                    "claim reads every run's accuracy by T; evaluate on a time grid (eval_every_seconds)"
                )
            parts.append(shown.assign(severity=severity, algorithm=name, seed=seed, in_flight=in_flight))
    unknown = {severity_of(run) for run in runs} - set(severities)
    if unknown:
        raise InputError(f"runs of severities {sorted(unknown)} are not among --severities; list them or drop them")
    check_complete(present)
    trajectories = pd.concat(parts, ignore_index=True)
    if trajectories.resolution.nunique(dropna=False) > 1:
        raise InputError(
            "the runs were evaluated at different resolutions (eval_every_seconds differs, or is set for only "
            "some): a time to the target must be read on one grid; give runs of one experiment"
        )
    check_one_run_name(loaded, {"seed", *(key for settings in severities.values() for key in settings)})
    check_one_partition_a_seed(loaded)
    return trajectories


def claim_table(runs: Sequence[Path], partition_stats: list[Path], severities: dict[str, dict], target: float,
                budget: float) -> pd.DataFrame:  # fmt: skip
    """One row per run: severity, algorithm (a run name), seed, the virtual time it first reached
    `target` test accuracy by `budget` (NaN: never) and the client-seconds spent by then (NaN without a
    time grid), its accuracy at `budget` (its last evaluation at or before it), and the resolution its
    times were read at (the grid's Δ; NaN: at its evaluated aggregations)."""
    return table_of(claim_trajectories(runs, partition_stats, severities, budget), severities, target)


def table_of(trajectories: pd.DataFrame, severities: dict[str, dict], target: float) -> pd.DataFrame:
    """`claim_table`'s rows, from the runs' trajectories."""
    rows = []
    for (severity, name, seed), run in trajectories.groupby(["severity", "algorithm", "seed"], sort=False):
        reached = run[run.test_accuracy >= target]
        first = reached.iloc[0] if len(reached) else None
        rows.append(
            {
                "severity": severity,
                "algorithm": name,
                "seed": seed,
                "time_to_target": first.virtual_time if first is not None else math.nan,
                "time_to_stay": time_to_stay(run, target),
                "work_to_target": first.busy_seconds if first is not None else math.nan,
                "accuracy_at_budget": run.test_accuracy.iloc[-1] if len(run) else math.nan,
                "resolution": run.resolution.iloc[0],
            }
        )
    table = pd.DataFrame(rows)  # in one order whatever the order of --runs: severities', names', seeds'
    order = {name: index for index, name in enumerate(run_names(table))}
    keys = [table.severity.map(list(severities).index), table.algorithm.map(order), table.seed]
    return table.iloc[np.lexsort(keys[::-1])].reset_index(drop=True)


def table_in_flight(trajectories: pd.DataFrame, name: str) -> int:
    """The clients a run name keeps in flight (M, or a synchronous round's ⌈J·(1+ε)⌉): one for all its runs."""
    (in_flight,) = trajectories.in_flight[trajectories.algorithm == name].unique()
    return int(in_flight)


def time_to_stay(run: pd.DataFrame, target: float, accuracy: str = "test_accuracy") -> float:
    """The first evaluation from which every later one up to the budget is at or above `target` (NaN
    where the last one is below it), by the column `accuracy`: a first crossing on a small test set can
    be noise, this cannot."""
    below = np.flatnonzero(run[accuracy].to_numpy() < target)
    if len(below) and below[-1] == len(run) - 1:
        return math.nan
    return float(run.virtual_time.iloc[below[-1] + 1 if len(below) else 0]) if len(run) else math.nan


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per (severity, run name): seeds, seeds that stayed above the target by the budget, the mean and sd
    of their times to stay (the verdicts' metric), and the mean and sd of the accuracy at the budget."""
    grouped = table.groupby(["severity", "algorithm"], sort=False)
    return grouped.agg(
        seeds=("seed", "size"),
        reached=("time_to_stay", "count"),
        time_mean=("time_to_stay", "mean"),
        time_sd=("time_to_stay", "std"),
        accuracy_mean=("accuracy_at_budget", "mean"),
        accuracy_sd=("accuracy_at_budget", "std"),
    ).reset_index()


def draw_claim(axes: Sequence[Axes], means: pd.DataFrame, severities: list[str], target: float, budget: float,
               verdicts: list[str], family: str = "the target's comparisons") -> None:  # fmt: skip
    """Left: time to stay above the target by severity, the verdicts' metric (mean ± 1 sd of the seeds that
    stayed; × on the budget line where none did; "k/n" above the panel, over its point, where only k of n
    did: in the margin, so no label sits on a marker). Right: accuracy at the budget (mean ± 1 sd).
    `family`: what the verdicts' p-values were adjusted over, in words."""
    names = run_names(means)
    styles = run_styles(names)
    width = 0.8 / max(len(names), 1)
    for index, name in enumerate(names):
        line, style = styles[name]
        rows = means[means.algorithm == name].set_index("severity").reindex(severities)
        x = np.arange(len(severities)) + (index - (len(names) - 1) / 2) * width
        axes[0].errorbar(x, rows.time_mean, yerr=rows.time_sd.fillna(0), ls=line, label=display_name(name), **style)
        never = rows.reached == 0
        axes[0].plot(x[never], [budget] * int(never.sum()), ls="none", **{**style, "marker": "x", "ms": 5})
        for position, (reached, seeds) in zip(x, rows[["reached", "seeds"]].values, strict=True):
            if 0 < reached < seeds:
                axes[0].annotate(f"{reached:.0f}/{seeds:.0f}", (position, 1.0), xycoords=("data", "axes fraction"),
                                 xytext=(0, 2), textcoords="offset points", fontsize=4, rotation=90, ha="center",
                                 va="bottom", color=style["color"], annotation_clip=False)  # fmt: skip
        axes[1].errorbar(x, rows.accuracy_mean, yerr=rows.accuracy_sd.fillna(0), ls=line, **style)
    budget_label = f"the budget T = {budget:g} s (×: no seed stayed above the target; above the panel: k of n did)"
    axes[0].axhline(budget, color="grey", ls=":", lw=1, label=budget_label)
    axes[0].set(ylabel=f"Virtual time to stay above {target:.0%}\ntest accuracy (s)", ylim=(0, budget * 1.08))
    axes[1].axhline(target, color="grey", ls="--", lw=0.8, label=f"the target, {target:.0%}")
    axes[1].set(ylabel=f"Test accuracy at T = {budget:g} s\n(last evaluation at or before T)")
    for ax in axes:
        ax.set_xticks(range(len(severities)), severities, fontsize="x-small")
        ax.set_xlabel("Straggler severity")
    handles, labels = axes[0].get_legend_handles_labels()
    handles += axes[1].get_legend_handles_labels()[0]
    labels += axes[1].get_legend_handles_labels()[1]
    axes[0].figure.legend(
        handles,
        labels,
        loc="outside lower center",
        ncols=2,
        fontsize="x-small",
        frameon=False,
        title="Each asynchronous run's restricted mean time to stay above the target minus each synchronous run's, "
        "paired t 95 % CI over paired seeds\n(a run that never stayed above it counts as T); verdicts Holm-adjusted "
        f"over {family}:\n" + "\n".join(verdicts),
        title_fontsize="x-small",
    )


def declared_words(verdicts: pd.DataFrame) -> str:
    """A declared family in the claim figure's words: its size and the comparisons the runs lacked."""
    size, unrun = int(verdicts.family_size.max()), int(verdicts.family_unrun.max())
    return f"the declared family of {size} comparisons ({unrun} not run, each at p = 1)"


def check_margin(margin: float | None, shortest: float) -> None:
    """A margin that leaves room for a verdict: one at least as long as the shortest budget holds every
    possible difference of restricted mean times within it, so "equivalent" would say nothing."""
    if margin is not None and margin >= shortest:
        raise InputError(
            f"--equivalence-margin {margin:g} s is not below the shortest budget ({shortest:g} s): every "
            "difference of times to the target lies within it; give a margin below it"
        )


def check_replication_seeds(replication_seeds: Sequence[int], seeds: set[int]) -> None:
    """Replication seeds are some of the runs' seeds, each once, not all: the rest are the discovery set."""
    if len(set(replication_seeds)) != len(replication_seeds):
        raise InputError(f"--replication-seeds {list(replication_seeds)} repeat a seed; give each once")
    missing = sorted(set(replication_seeds) - seeds)
    if missing:
        raise InputError(
            f"--replication-seeds {missing} have no runs among --runs (their seeds: {sorted(seeds)}); "
            "train them, or name seeds that ran"
        )
    if replication_seeds and seeds <= set(replication_seeds):
        raise InputError("--replication-seeds name every seed of the runs; leave some as the discovery set")


def check_budgets(budget: float, other_budgets: Sequence[float]) -> None:
    """Shorter budgets the verdicts are also read at: each a number in (0, T), each once (T is the runs')."""
    for other in other_budgets:
        if not (isinstance(other, int | float) and 0 < other < budget):
            raise InputError(
                f"--other-budgets {other!r} is not a virtual time in (0, {budget:g}): the runs trained to T = "
                f"{budget:g} s; give a shorter budget (e.g. {budget / 2:g}), or train the runs longer"
            )
    repeated = first_repeated(list(other_budgets))
    if repeated:
        raise InputError(f"--other-budgets gives {repeated[0]!r} twice; give each budget once")


def cut_at(trajectories: pd.DataFrame, budget: float) -> pd.DataFrame:
    """The trajectories as runs to the shorter `budget` would have them (what a run did before T does
    not depend on T): their evaluations at or before it, every run keeping one at least."""
    first = trajectories.groupby(["severity", "algorithm", "seed"], sort=False).virtual_time.min()
    late = first[first > budget]
    if len(late):
        severity, name, seed = late.index[0]
        raise InputError(
            f"the {name} run of seed {seed} at severity {severity!r} has no evaluation at or before --other-budgets "
            f"{budget:g} (a workflow config's other_budgets): give a budget past its first evaluation "
            "(eval_every_seconds sets the grid)"
        )
    return trajectories[trajectories.virtual_time <= budget]


def budget_verdicts(trajectories: pd.DataFrame, settings: dict[str, dict], targets: list[float], budget: float,
                    replication_seeds: Sequence[int], brief: bool = False, margin: float | None = None,
                    family: Family | None = None, pooled: bool = False) -> pd.DataFrame:  # fmt: skip
    """Every paired comparison of the runs cut at `budget`, at each of `targets` (`seed_set_verdicts`;
    `brief`: the primary time's alone; `margin`: the equivalence margin, s; `family`: the declared one;
    `pooled`: the seed sets pooled)."""
    shown = cut_at(trajectories, budget)
    tables = [table_of(shown, settings, each) for each in targets]
    return pd.concat(
        [
            seed_set_verdicts(table, budget, replication_seeds, brief, margin, family, pooled).assign(target=each)
            for each, table in zip(targets, tables, strict=True)
        ],
        ignore_index=True,
    )


def draw_straggler_claim(runs: list[Path], partition_stats: list[Path], settings: dict[str, dict],
                         targets: list[float], budget: float, out: Path, title: str,
                         replication_seeds: Sequence[int] = (), other_budgets: Sequence[float] = (),
                         equivalence_margin: float | None = None, family: Family | None = None,
                         power: float | None = None, pooled: bool = False) -> list[Path]:  # fmt: skip
    """The sweep's figures as PNG and PDF, `straggler_claim`, `straggler_curves`, `async_advantage` and
    `verdict_over_budget` (its numbers as verdict_over_budget.csv: the first target's comparisons with the
    runs cut at T/4 … T), the claim's numbers, one row per run, as straggler_claim.csv, and every paired
    comparison at each of `targets` (the first: the figures' target) as straggler_verdicts.csv (`settings`: each
    severity's, by name, in the figures' order), on the discovery and the `replication_seeds` apart
    where they are given (`verdicts.seed_set_verdicts`). With `other_budgets`, the verdicts are also
    read with the runs cut at each of those shorter virtual times (a `budget` column says which; the
    figures stay at T): a verdict that holds at T and at T/2 does not hang on where the budget fell. With
    `equivalence_margin` m (s), a comparison neither faster nor slower is equivalent within ±m by two
    one-sided tests, or undecided (`verdicts.equivalence_p`). With a declared `family`, the p-values are
    adjusted over it, a comparison it declares that the runs lack counted at p = 1 (`families.Family`).
    With `power`, each comparison's detectable difference at that power (`verdicts.with_detectable`).
    `pooled`: the verdicts decided on every seed, the two sets beside them as a check of their sign."""
    check_targets("--other-targets", targets, ("--target-accuracy", "--other-targets"))  # before anything is read
    check_budgets(budget, other_budgets)
    check_margin(equivalence_margin, min((budget, *other_budgets)))
    sns.set_theme(context="paper", style="whitegrid", font_scale=0.9)
    target = targets[0]
    trajectories = claim_trajectories(runs, partition_stats, settings, budget)
    table = table_of(trajectories, settings, target)
    means, severities = summary(table), list(settings)
    check_replication_seeds(replication_seeds, set(table.seed))
    if pooled and not replication_seeds:
        raise InputError("--pooled pools the discovery and replication seed sets; name the replication seeds")
    if family is not None:
        family.check_holds(severities, run_names(table), "--family")
    budgets = (budget, *other_budgets)
    at_budgets = [
        budget_verdicts(trajectories, settings, targets, each, replication_seeds, margin=equivalence_margin,
                        family=family, pooled=pooled).assign(budget=each)
        for each in budgets
    ]  # fmt: skip
    verdicts = pd.concat(at_budgets, ignore_index=True)
    if family is not None and family.spans:
        verdicts = readjusted(verdicts, family, equivalence_margin, len(targets), len(budgets))
    if power is not None:
        verdicts = with_detectable(verdicts, power)
    at_t = verdicts[verdicts.budget == budget].drop(columns="budget").reset_index(drop=True)
    leading = ["target", "budget", "seed_set"] if other_budgets else ["target", "seed_set"]
    verdicts = verdicts[[*leading, *(c for c in verdicts.columns if c not in (*leading, "budget"))]]
    claim, curves = catalogued("straggler_claim"), catalogued("straggler_curves")
    stem = Path(out) / claim.name
    in_flight = {name: table_in_flight(trajectories, name) for name in run_names(table)}
    lines = verdict_lines(at_t[at_t.target == target], in_flight)
    adjusted_over = "the target's comparisons" if family is None else declared_words(at_t)
    curves = dataclasses.replace(curves, panels=len(severities))
    cells = matched_cells(at_t, in_flight)
    advantage = catalogued("async_advantage")
    rows = len(asynchronous_families(in_flight))
    map_height = max((advantage.height + 0.5 * len(severities)) * rows, MAP_MIN_HEIGHT)
    advantage = dataclasses.replace(advantage, panels=len(targets), rows=rows, height=map_height)
    height = claim.height + LINE_INCHES * max(sum(line.count("\n") + 1 for line in lines) - VERDICT_LINES_FITTED, 0)
    first_evaluation = float(trajectories.groupby(["severity", "algorithm", "seed"]).virtual_time.min().max())
    curve = verdict_curve(
        lambda each: budget_verdicts(
            trajectories, settings, [target], each, replication_seeds, True, equivalence_margin, family, pooled
        ),
        curve_budgets(budget, first_evaluation),
    )
    over_budget = dataclasses.replace(catalogued("verdict_over_budget"), panels=len(severities))
    glance = catalogued("verdict_summary")
    glance = dataclasses.replace(glance, panels=len(severities), height=glance.height + 0.2 * len(in_flight))
    at_a_glance = summary_rows(at_t, target, in_flight)
    drawn = [
        drawn_figure(lambda axes: draw_claim(axes, means, severities, target, budget, lines, adjusted_over), claim,
                     height, heading(title, claim.title), stem),
        drawn_figure(lambda axes: draw_curves(axes, trajectories, severities, target, budget), curves, curves.height,
                     heading(title, curves.title), Path(out) / curves.name),
        drawn_figure(lambda axes: draw_advantage(axes, cells, severities, in_flight), advantage, advantage.height,
                     heading(title, advantage.title), Path(out) / advantage.name),
        drawn_figure(lambda axes: draw_verdict_curve(axes, curve, severities, in_flight), over_budget,
                     over_budget.height, heading(title, over_budget.title), Path(out) / over_budget.name),
        drawn_figure(lambda axes: draw_verdict_summary(axes, at_a_glance, severities, target), glance, glance.height,
                     heading(title, glance.title), Path(out) / glance.name),
    ]  # fmt: skip
    frames = {
        stem.with_suffix(".csv"): table,
        Path(out) / f"{STRAGGLER_VERDICTS}.csv": verdicts,
        Path(out) / f"{over_budget.name}.csv": curve,
    }
    written = [*(path for each in drawn for path in each.paths()), *frames]
    with written_together(written) as temporaries:  # all drawn and computed first: all written, or none
        write_figures(drawn, temporaries)
        for path, frame in frames.items():
            frame.to_csv(temporaries[path], index=False)
    return written
