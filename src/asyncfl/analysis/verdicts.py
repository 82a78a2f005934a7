"""Verdicts decided by confidence intervals (docs/theory.md "Stragglers"), never by the fastest of
several noisy means.

Per severity, AFL (and AFL at matched concurrency, where the sweep runs it) is compared with every
other run name on the same seeds: the paired difference of their restricted mean times to the target
(a run that never reached it counts as the budget T, so a censored run is neither dropped nor
rewarded), with a paired t 95 % confidence interval over the seeds and its two-sided p-value, for
two times: to stay above the target (the primary, which decides the legend and the map) and to first
reach it. A log-rank p-value beside them compares the two sides' time-to-target curves with the
censored runs as censored, never as T.

The interval was a percentile bootstrap; at ten seeds it undercovers: in an A/A calibration (one
algorithm against itself on two seed sets, times shaped like the map's, a third censored at T;
tests/analysis/test_calibration.py) it called 9.9 % of 1,000 comparisons significant at a nominal
5 %, the paired t 4.9 %. The restricted mean time with a run that never reached the target counted
as T is a statistic of censored times (the RMST at T), so every comparison is decided by it, whatever
share of its seeds reached the target: under heavy censoring the paired t is conservative, not
anti-conservative (A/A with 2.4 of 10 seeds reaching on average: 2.1 % false at a nominal 5 %, 1.6 of
10: 0.5 %; the test file above), and the seeds that reached it are reported beside the verdict, never
instead of it (a rule that withheld the verdict where fewer than half reached had thrown away
differences of 22–45 s at raw p ≤ 0.012). Every comparison of one target and metric, as the sweep
configures them, is one family, declared before any time is read: its p-values are Holm-adjusted
(`holm`) over all of them, a comparison with too few seeds counted at p = 1 (in the family, never
deciding), so the family's size (`family_size`, in the CSV and the map's titles) does not depend on
the data; the adjusted p decides, so the map's error is controlled over its cells, not per cell:
below 0.05 AFL was faster or slower by the sign of the difference, otherwise no significant
difference. No verdict is given with fewer than MIN_SEEDS seeds ("too few seeds"). Where the
experiment names replication seeds, the verdicts are drawn on the other seeds (discovery) and on
those (replication) apart, and a verdict stands where both give it.
"""

import itertools
import math
import textwrap
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import optimize, stats

from asyncfl.planning.families import SPANS, Family
from asyncfl.settings.names import ASYNCHRONOUS, base_algorithm

CONFIDENCE = 0.95
MIN_SEEDS = 5  # fewer paired seeds than this give an interval too wide, or too unstable, to decide on
FASTER, SLOWER, TIED = "faster", "slower", "no significant difference"
TOO_FEW = "too few seeds"
# With an equivalence margin m declared, a comparison that is neither faster nor slower is equivalent
# within ±m (two one-sided tests, `equivalence_p`) or undecided: its interval is too wide to say either
EQUIVALENT, UNDECIDED = "equivalent", "undecided"
VERDICTS = (FASTER, SLOWER, EQUIVALENT, TIED, UNDECIDED, TOO_FEW)  # every verdict a comparison can get
# The times compared: the first evaluation from which every later one up to T is at or above the target
# (`stragglers.time_to_stay`), and the first at or above it. The first decides the legend and the map: a
# model whose accuracy swings crosses the target early and falls back, which time to stay does not
# reward; the table gives both
METRICS = ("time_to_stay", "time_to_target")
METRIC_WORDS = {"time_to_stay": "time to stay above", "time_to_target": "time to first reach"}
# The seeds a verdict is drawn from: all the runs' seeds, or, where a replication set is named, the others
# (discovery) and those (replication), each its own table, its own Holm families and its own verdicts
ALL, DISCOVERY, REPLICATION = "all", "discovery", "replication"
LINE_WIDTH = 130  # characters of a verdict line under a figure's legend before it wraps


def censored(times: pd.Series | np.ndarray, budget: float) -> np.ndarray:
    """Times to the target, a run that never reached it counted as the budget."""
    return np.where(np.isnan(np.asarray(times, dtype=float)), budget, np.asarray(times, dtype=float))


def restricted_mean_time(times: pd.Series | np.ndarray, budget: float) -> float:
    """The mean time to the target over runs, censored at the budget."""
    return float(censored(times, budget).mean())


def median_time(times: pd.Series | np.ndarray, budget: float) -> float:
    """The Kaplan–Meier median time to the target (`scipy.stats.ecdf`, a run that never reached it
    right-censored at the budget): the time by which half the runs had reached it, NaN where fewer
    than half did by the budget. Beside the restricted mean, it is the summary that a few censored
    runs cannot move."""
    times = np.asarray(times, dtype=float)
    reached = ~np.isnan(times)
    if not reached.any():
        return math.nan
    curve = stats.ecdf(survival_data(times, budget)).cdf
    halfway = np.flatnonzero(curve.probabilities >= 0.5 - 1e-12)
    return float(curve.quantiles[halfway[0]]) if len(halfway) else math.nan


def paired_test(differences: np.ndarray) -> tuple[float, float, float]:
    """The paired t 95 % confidence interval of the mean of paired differences (one per seed) and the
    two-sided p-value of "no difference"; differences without spread: the point, p 1 or 0."""
    if np.all(differences == differences[0]):
        point = float(differences[0])
        return point, point, 1.0 if point == 0 else 0.0
    result = stats.ttest_1samp(differences, 0.0)
    interval = result.confidence_interval(CONFIDENCE)
    return float(interval.low), float(interval.high), float(result.pvalue)


def equivalence_p(differences: np.ndarray, margin: float) -> float:
    """The p-value of "the mean paired difference is at least `margin` from 0" by two one-sided paired
    t-tests (TOST, Schuirmann 1987): the larger of the p of "mean ≤ −m" and of "mean ≥ m", so that p < α
    says the mean lies within ±m, the (1 − 2α) interval inside the band; differences without spread: 0
    inside the band, 1 on or outside it."""
    if np.all(differences == differences[0]):
        return 0.0 if abs(float(differences[0])) < margin else 1.0
    above_lower = stats.ttest_1samp(differences, -margin, alternative="greater").pvalue
    below_upper = stats.ttest_1samp(differences, margin, alternative="less").pvalue
    return float(max(above_lower, below_upper))


def detectable_difference(spread: float, seeds: int, family_size: int, power: float,
                          ceiling: float = math.inf) -> float:  # fmt: skip
    """The smallest true mean paired difference (s, either sign) that the paired t-test at its family's
    level detects with probability `power`, for paired differences of standard deviation `spread` over
    `seeds` seeds: the level is 0.05 / `family_size`, Holm's first step (Bonferroni's, so the figure is an
    upper bound for Holm's later steps), and the power the noncentral t's, exactly. NaN with too few seeds
    to decide, without spread (no t to read a power from: every run censored at T, say), or past
    `ceiling` (the budget: no difference of restricted mean times can exceed it)."""
    if seeds < MIN_SEEDS or not math.isfinite(spread) or spread == 0:
        return math.nan
    freedom = seeds - 1
    critical = stats.t.ppf(1 - (1 - CONFIDENCE) / (2 * family_size), freedom)

    def short_of_power(shift: float) -> float:
        noncentrality = shift * math.sqrt(seeds) / spread
        wrong_side = stats.nct.cdf(-critical, freedom, noncentrality)  # NaN where it underflows: 0
        detected = stats.nct.sf(critical, freedom, noncentrality) + np.nan_to_num(wrong_side)
        return float(detected) - power

    upper = spread
    while short_of_power(upper) < 0:
        upper *= 2
    detectable = float(optimize.brentq(short_of_power, 0.0, upper, xtol=1e-9 * spread))
    return detectable if detectable <= ceiling else math.nan


def holm(p_values: np.ndarray, family_size: int | None = None) -> np.ndarray:
    """Holm's step-down adjustment of a family's p-values (NaN: not tested, left NaN): the error of
    the whole family stays at the level, whatever the dependence between its tests. `family_size`: the
    declared family's size where some of its tests were not run, each counted at p = 1 (it ranks last,
    so the tests at hand are adjusted as members of the whole family)."""
    adjusted = np.full(len(p_values), math.nan)
    tested = np.flatnonzero(~np.isnan(p_values))
    order = tested[np.argsort(p_values[tested], kind="stable")]
    size = len(order) if family_size is None else family_size
    steps = (size - np.arange(len(order))) * p_values[order]
    adjusted[order] = np.minimum(np.maximum.accumulate(steps), 1.0)
    return adjusted


def decided(difference: float, p_adjusted: float, seeds: int, p_equivalence: float | None = None) -> str:
    """The verdict of the reference's minus the other's time, from its family-adjusted p-value; where an
    equivalence margin is declared, a comparison neither faster nor slower is decided by its family-
    adjusted TOST p (`p_equivalence`): equivalent, or undecided."""
    if seeds < MIN_SEEDS:
        return TOO_FEW
    if p_adjusted < 1 - CONFIDENCE:
        return FASTER if difference < 0 else SLOWER
    if p_equivalence is None:
        return TIED
    return EQUIVALENT if p_equivalence < 1 - CONFIDENCE else UNDECIDED


def verdict_table(table: pd.DataFrame, budget: float, brief: bool = False, margin: float | None = None,
                  family: Family | None = None) -> pd.DataFrame:  # fmt: skip
    """Per severity, metric (`METRICS`), reference (each asynchronous run name: AFL, FedAsync, FedBuff and
    their variants) and other (each synchronous run name):
    the seeds paired, the restricted mean times, the seeds that reached the target, the Kaplan–Meier
    medians, the mean accuracies at T, the mean client work (busy seconds) to the target of the seeds
    that reached it, the mean paired difference (reference − other) with its
    interval, raw and Holm-adjusted p-values (one family per metric), the log-rank p-value, and the
    verdict (`table`: `claim_table`'s rows, of one target). `brief`: the primary time's comparisons alone,
    without the medians, accuracies, work and log-rank beside them (the budget curve's 16 readings).
    `margin`: the equivalence margin m in seconds, whose TOST p-values ("p_equivalence", Holm-adjusted
    over the same family) decide a comparison neither faster nor slower: equivalent or undecided.
    `family`: the declared family, whose size (one target's and budget's) the p-values are adjusted over."""
    references = [name for name in table.algorithm.unique() if base_algorithm(name) in ASYNCHRONOUS]
    rows = []
    metrics = [metric for metric in METRICS[: 1 if brief else None] if metric in table]
    for (severity, runs), metric in itertools.product(table.groupby("severity", sort=False), metrics):
        times = runs.pivot(index="seed", columns="algorithm", values=metric)
        per_seed = {
            column: runs.pivot(index="seed", columns="algorithm", values=column)
            for column in ("accuracy_at_budget", "work_to_target")
            if column in runs
        }
        ran = runs.groupby("algorithm").seed.apply(set)
        for reference in references:
            for other in (name for name in runs.algorithm.unique() if name not in references):
                pair = sorted(ran[reference] & ran[other])  # the seeds both ran (a censored time is a time)
                mine, theirs = censored(times.loc[pair, reference], budget), censored(times.loc[pair, other], budget)
                differences = mine - theirs
                low, high, p = paired_test(differences) if len(differences) > 1 else (math.nan,) * 3
                row = {
                    "severity": severity,
                    "metric": metric,
                    "reference": reference,
                    "other": other,
                    "seeds": len(differences),
                    "reference_time": float(mine.mean()),
                    "other_time": float(theirs.mean()),
                    "reference_reached": int(times.loc[pair, reference].notna().sum()),
                    "other_reached": int(times.loc[pair, other].notna().sum()),
                    "difference": float(differences.mean()),
                    "ci_low": low,
                    "ci_high": high,
                    "p_value": p,
                }
                if not brief:
                    row |= beside_the_verdict(times, per_seed, pair, reference, other, budget)
                if margin is not None:
                    row["p_equivalence"] = equivalence_p(differences, margin) if len(differences) > 1 else math.nan
                rows.append(row)
    columns = [*rows[0]] if rows and brief else [*VERDICT_COLUMNS, *(["p_equivalence"] if margin is not None else [])]
    declared = None if family is None else family.comparisons()
    return with_verdicts(pd.DataFrame(rows, columns=columns), margin, family_size=declared)


# The table's columns, in order, before the adjusted p, the family's size and the verdict
VERDICT_COLUMNS = (
    "severity", "metric", "reference", "other", "seeds", "reference_time", "other_time", "reference_reached",
    "other_reached", "reference_median", "other_median", "reference_accuracy", "other_accuracy", "reference_work",
    "other_work", "difference", "ci_low", "ci_high", "p_value", "p_logrank",
)  # fmt: skip


def beside_the_verdict(
    times: pd.DataFrame, per_seed: dict[str, pd.DataFrame], pair: list, reference: str, other: str, budget: float
) -> dict[str, float]:
    """What the table gives beside a comparison's verdict: each side's Kaplan–Meier median, mean accuracy
    at T and mean client work to the target, and the log-rank p-value."""
    return {
        "reference_median": median_time(times.loc[pair, reference], budget),
        "other_median": median_time(times.loc[pair, other], budget),
        "reference_accuracy": mean_of(per_seed.get("accuracy_at_budget"), pair, reference),
        "other_accuracy": mean_of(per_seed.get("accuracy_at_budget"), pair, other),
        "reference_work": mean_of(per_seed.get("work_to_target"), pair, reference),
        "other_work": mean_of(per_seed.get("work_to_target"), pair, other),
        "p_logrank": logrank_p(times.loc[pair, reference], times.loc[pair, other], budget),
    }


def logrank_p(mine: pd.Series, theirs: pd.Series, budget: float) -> float:
    """The log-rank test's two-sided p-value of "the two time-to-target curves are one" (`scipy.stats.
    logrank`, a run that never reached the target right-censored at T): a check beside the paired t
    that no censored run's T can move, but that ignores the pairing by seed, so it is reported, never
    decides. NaN where neither side reached the target (nothing to compare)."""
    sides = [np.asarray(side, dtype=float) for side in (mine, theirs)]
    if min(map(len, sides)) == 0 or all(np.isnan(side).all() for side in sides):
        return math.nan
    with np.errstate(invalid="ignore", divide="ignore"):  # no spread to compare (an early cut): p NaN, quietly
        return float(stats.logrank(survival_data(sides[0], budget), survival_data(sides[1], budget)).pvalue)


def survival_data(times: np.ndarray, budget: float) -> stats.CensoredData:
    """Times to the target as scipy's censored data: a run that never reached it right-censored at T."""
    reached = ~np.isnan(times)
    return stats.CensoredData(uncensored=times[reached], right=np.full(int((~reached).sum()), budget))


def seed_set_verdicts(
    table: pd.DataFrame,
    budget: float,
    replication_seeds: Sequence[int] = (),
    brief: bool = False,
    margin: float | None = None,
    family: Family | None = None,
    pooled: bool = False,
) -> pd.DataFrame:
    """`verdict_table` over all the seeds (`seed_set` "all"), or, with `replication_seeds`, over the other
    seeds ("discovery") and over those ("replication") apart: a verdict is replicated where both sets give
    it, which a fresh set of seeds would have to (half of a published map's verdicts did not). `pooled`:
    the verdict is decided on all the seeds, twice the power, and the two sets beside it are its check
    (`replication_of`)."""
    if not replication_seeds:
        return verdict_table(table, budget, brief, margin, family).assign(seed_set=ALL)
    replication = table.seed.isin(replication_seeds)
    sets = [(DISCOVERY, table[~replication]), (REPLICATION, table[replication])]
    sets = [(ALL, table), *sets] if pooled else sets
    tables = [verdict_table(rows, budget, brief, margin, family).assign(seed_set=name) for name, rows in sets]
    return pd.concat(tables, ignore_index=True)


# A pooled verdict of faster or slower whose two seed sets' mean differences do not both share its sign
SIGN_DIFFERS = "the seed sets differ in sign"


def replication_of(verdicts: pd.DataFrame) -> dict[tuple, str]:
    """By (severity, metric, reference, other), what the replication says: apart, the replication set's
    verdict; pooled (a seed set "all" beside the two), the pooled verdict where both sets' mean
    differences share its sign (or it decides nothing), else SIGN_DIFFERS. Empty without a replication."""
    if "seed_set" not in verdicts or not (verdicts.seed_set == REPLICATION).any():
        return {}
    key = ["severity", "metric", "reference", "other"]
    if not (verdicts.seed_set == ALL).any():
        again = verdicts[verdicts.seed_set == REPLICATION]
        return {(row.severity, row.metric, row.reference, row.other): row.verdict for row in again.itertuples()}
    signs = verdicts[verdicts.seed_set != ALL].groupby(key, sort=False).difference.agg(lambda d: set(np.sign(d)))
    checks = {}
    for row in verdicts[verdicts.seed_set == ALL].itertuples():
        comparison = (row.severity, row.metric, row.reference, row.other)
        decided_sign = -1.0 if row.verdict == FASTER else 1.0
        agreed = row.verdict not in (FASTER, SLOWER) or signs[comparison] == {decided_sign}
        checks[comparison] = row.verdict if agreed else SIGN_DIFFERS
    return checks


def primary_set(verdicts: pd.DataFrame) -> pd.DataFrame:
    """The verdicts the legend and the map state: all seeds' (where the sets are pooled, or none is
    named), or the discovery set's where the sets are apart."""
    if "seed_set" not in verdicts:
        return verdicts
    if (verdicts.seed_set == ALL).any():
        return verdicts[verdicts.seed_set == ALL]
    return verdicts[verdicts.seed_set != REPLICATION]


def mean_of(values: pd.DataFrame | None, seeds: list, name: str) -> float:
    """The mean of a run name's `values` over those of `seeds` that have one (NaN without any)."""
    return math.nan if values is None else float(values.loc[seeds, name].mean())


# The columns `with_verdicts` adds (those of an equivalence margin and of a declared family only with them)
ADJUSTED = ("p_holm", "p_equivalence_holm", "equivalence_margin", "family_size", "family_unrun", "verdict")


def with_verdicts(rows: pd.DataFrame, margin: float | None = None, keys: Sequence[str] = ("metric",),
                  family_size: int | None = None) -> pd.DataFrame:  # fmt: skip
    """The table with each family's p-values (rows alike in `keys`: every comparison of one metric the
    sweep configures) Holm-adjusted ("p_holm"; a comparison with too few seeds counted at p = 1: in the
    family, never deciding), the family's size ("family_size") and every row's verdict; with an
    equivalence `margin`, the TOST p-values adjusted over the same family ("p_equivalence_holm") and the
    margin beside them; with a declared `family_size`, the adjustment is over it, and "family_unrun" says
    how many of its comparisons the runs at hand lack (each counted at p = 1)."""
    equivalence, declared = margin is not None, family_size is not None
    rows = rows.drop(columns=[column for column in ADJUSTED if column in rows])
    if rows.empty:
        extra: dict[str, list] = {"p_equivalence_holm": [], "equivalence_margin": []} if equivalence else {}
        return rows.assign(p_holm=[], **extra, family_size=[], **({"family_unrun": []} if declared else {}), verdict=[])
    rows["p_holm"] = family_adjusted(rows, "p_value", keys, family_size)
    if equivalence:
        rows["p_equivalence_holm"] = family_adjusted(rows, "p_equivalence", keys, family_size)
        rows["equivalence_margin"] = margin
    at_hand = rows.groupby(list(keys)).metric.transform("size")
    rows["family_size"] = at_hand if family_size is None else family_size
    if declared:
        rows["family_unrun"] = family_size - at_hand
    rows["verdict"] = [
        decided(row.difference, row.p_holm, row.seeds, row.p_equivalence_holm if equivalence else None)
        for row in rows.itertuples()
    ]
    return rows


def family_adjusted(rows: pd.DataFrame, column: str, keys: Sequence[str] = ("metric",),
                    family_size: int | None = None) -> pd.Series:  # fmt: skip
    """`column`'s p-values Holm-adjusted over each family (rows alike in `keys`), a comparison with too
    few seeds (or none to test) counted at p = 1: in the family, never deciding; over `family_size`
    where one is declared."""
    p = rows[column].where(rows.seeds >= MIN_SEEDS, 1.0).fillna(1.0)
    return p.groupby([rows[key] for key in keys]).transform(
        lambda family: pd.Series(holm(family.to_numpy(), family_size), family.index)
    )


def readjusted(verdicts: pd.DataFrame, family: Family, margin: float | None, targets: int, budgets: int
               ) -> pd.DataFrame:  # fmt: skip
    """`verdicts` (every target's and budget's, each adjusted over one target's and budget's family)
    adjusted again over the families that span the targets and budgets `family.spans` names."""
    keys = ["metric", "seed_set", *(column for span, column in zip(SPANS, ("target", "budget"), strict=True)
                                    if span not in family.spans)]  # fmt: skip
    size = family.comparisons() * (targets if "targets" in family.spans else 1)
    size *= budgets if "budgets" in family.spans else 1
    return with_verdicts(verdicts, margin, keys, size)


def with_detectable(verdicts: pd.DataFrame, power: float) -> pd.DataFrame:
    """The verdicts with each comparison's "detectable_difference" (`detectable_difference` at `power`):
    the spread of its paired differences read back from its interval (half-width t·sd/√n), at its seeds
    and its family's size, so a "no significant difference" says how large a difference it could miss;
    NaN past its row's budget (none within it is detectable)."""
    half_width = (verdicts.ci_high - verdicts.ci_low) / 2
    quantile = stats.t.ppf((1 + CONFIDENCE) / 2, np.maximum(verdicts.seeds - 1, 1))
    spread = half_width * np.sqrt(verdicts.seeds) / quantile
    detectable = [
        detectable_difference(float(sd), int(row.seeds), int(row.family_size), power, float(row.budget))
        for sd, row in zip(spread, verdicts.itertuples(), strict=True)
    ]
    return verdicts.assign(detectable_difference=detectable)


def verdict_lines(verdicts: pd.DataFrame, in_flight: dict[str, int] | None = None) -> list[str]:
    """The claim in words, one line per severity and reference: its difference from every synchronous
    run name (with `in_flight`, each run name's clients in flight, only those with as many as the
    reference: the comparisons of equal resources), with the interval and what it decides, and the seed
    count; never a verdict without them (the other comparisons are in the table). Long lines wrap."""
    lines = []
    primary, replication = primary_set(verdicts), replication_of(verdicts)
    primary = primary[primary.metric == METRICS[0]]
    for (severity, reference), rows in primary.groupby(["severity", "reference"], sort=False):
        synchronous = rows[rows.other.map(base_algorithm) == "sync"]
        if in_flight is not None:
            synchronous = synchronous[synchronous.other.map(in_flight) == in_flight[reference]]
            if synchronous.empty:
                continue
        seeds = int(rows.seeds.min())
        if seeds < MIN_SEEDS:
            lines.append(f"{severity}, {reference}: {seeds} paired seeds, too few for a verdict (≥ {MIN_SEEDS})")
            continue
        parts = [
            verdict_part(row, replication.get((row.severity, row.metric, row.reference, row.other)))
            for row in synchronous.itertuples()
        ]
        line = f"{severity}, {reference} − …, {seeds} seeds: " + "; ".join(parts)
        lines.append("\n    ".join(textwrap.wrap(line, LINE_WIDTH)))
    return lines


def verdict_part(row: Any, replicated: str | None = None) -> str:
    """One comparison in words: the difference, its interval and the adjusted verdict, with the seeds
    that reached the target where some did not; and whether the replication seeds gave the same
    verdict (`replicated`: theirs; None: no replication set)."""
    verdict = row.verdict
    if verdict == EQUIVALENT:
        verdict = f"equivalent within ±{row.equivalence_margin:g} s"
    part = f"{row.other} {row.difference:+.1f} s [{row.ci_low:+.1f}, {row.ci_high:+.1f}]: {verdict}"
    if min(row.reference_reached, row.other_reached) < row.seeds:
        part += f" (reached {row.reference_reached}/{row.seeds} vs {row.other_reached}/{row.seeds})"
    if replicated is None:
        return part
    return part + (", replicated" if replicated == row.verdict else f", not replicated ({replicated})")
