"""Verdicts decided by confidence intervals (docs/theory.md "Stragglers"), never by the fastest of
several noisy means.

Per severity, AFL (and AFL at matched concurrency, where the sweep runs it) is compared with every
other run name on the same seeds: the paired difference of their restricted mean times to the target
(a run that never reached it counts as the budget T, so a censored run is neither dropped nor
rewarded), with a 95 % bootstrap confidence interval over the seeds (`scipy.stats.bootstrap`,
percentile, seeded: the same table gives the same interval). The interval decides: below zero AFL
was faster, above zero slower, across zero no significant difference; with fewer than MIN_SEEDS
seeds no verdict is given, and the table says so.
"""

import itertools
import math
import textwrap

import numpy as np
import pandas as pd
from scipy import stats

from asyncfl.spec.names import base_algorithm

CONFIDENCE = 0.95
MIN_SEEDS = 5  # fewer paired seeds than this give an interval too wide, or too unstable, to decide on
RESAMPLES = 10_000
FASTER, SLOWER, TIED, TOO_FEW = "faster", "slower", "no significant difference", "too few seeds"
# The times compared: the first evaluation at or above the target, and the first from which every later
# one is (`stragglers.time_to_stay`): the legend states the first, the table both
METRICS = ("time_to_target", "time_to_stay")
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
    data = stats.CensoredData(uncensored=times[reached], right=np.full(int((~reached).sum()), budget))
    curve = stats.ecdf(data).cdf
    halfway = np.flatnonzero(curve.probabilities >= 0.5 - 1e-12)
    return float(curve.quantiles[halfway[0]]) if len(halfway) else math.nan


def paired_interval(differences: np.ndarray) -> tuple[float, float]:
    """The 95 % bootstrap confidence interval of the mean of paired differences (one per seed)."""
    if np.all(differences == differences[0]):  # no spread: the interval is the point itself
        return float(differences[0]), float(differences[0])
    interval = stats.bootstrap(
        (differences,),
        np.mean,
        confidence_level=CONFIDENCE,
        n_resamples=RESAMPLES,
        method="percentile",
        rng=np.random.default_rng(0),
    ).confidence_interval
    return float(interval.low), float(interval.high)


def decided(low: float, high: float, seeds: int) -> str:
    """The verdict an interval of the reference's minus the other's time gives."""
    if seeds < MIN_SEEDS:
        return TOO_FEW
    return FASTER if high < 0 else SLOWER if low > 0 else TIED


def verdict_table(table: pd.DataFrame, budget: float) -> pd.DataFrame:
    """Per severity, metric (`METRICS`), reference (`afl`, and `afl-m*` where run) and other run name:
    the seeds paired, the restricted mean times, the seeds that reached the target and the
    Kaplan–Meier medians, the mean paired difference (reference − other) with its interval, and the
    verdict (`table`: `claim_table`'s rows)."""
    references = [name for name in table.algorithm.unique() if name == "afl" or name.startswith("afl-m")]
    rows = []
    metrics = [metric for metric in METRICS if metric in table]
    for (severity, runs), metric in itertools.product(table.groupby("severity", sort=False), metrics):
        times = runs.pivot(index="seed", columns="algorithm", values=metric)
        ran = runs.groupby("algorithm").seed.apply(set)
        for reference in references:
            for other in (name for name in runs.algorithm.unique() if name not in references):
                pair = sorted(ran[reference] & ran[other])  # the seeds both ran (a censored time is a time)
                mine, theirs = censored(times.loc[pair, reference], budget), censored(times.loc[pair, other], budget)
                differences = mine - theirs
                low, high = paired_interval(differences) if len(differences) > 1 else (math.nan, math.nan)
                rows.append(
                    {
                        "severity": severity,
                        "metric": metric,
                        "reference": reference,
                        "other": other,
                        "seeds": len(differences),
                        "reference_time": float(mine.mean()),
                        "other_time": float(theirs.mean()),
                        "reference_reached": int(times.loc[pair, reference].notna().sum()),
                        "other_reached": int(times.loc[pair, other].notna().sum()),
                        "reference_median": median_time(times.loc[pair, reference], budget),
                        "other_median": median_time(times.loc[pair, other], budget),
                        "difference": float(differences.mean()),
                        "ci_low": low,
                        "ci_high": high,
                        "verdict": decided(low, high, len(differences)),
                    }
                )
    return pd.DataFrame(rows)


def verdict_lines(verdicts: pd.DataFrame, in_flight: dict[str, int] | None = None) -> list[str]:
    """The claim in words, one line per severity and reference: its difference from every synchronous
    run name (with `in_flight`, each run name's clients in flight, only those with as many as the
    reference: the comparisons of equal resources), with the interval and what it decides, and the seed
    count; never a verdict without them (the other comparisons are in the table). Long lines wrap."""
    lines = []
    first_crossing = verdicts[verdicts.metric == METRICS[0]]
    for (severity, reference), rows in first_crossing.groupby(["severity", "reference"], sort=False):
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
            f"{row.other} {row.difference:+.1f} s [{row.ci_low:+.1f}, {row.ci_high:+.1f}]: {row.verdict}"
            for row in synchronous.itertuples()
        ]
        line = f"{severity}, {reference} − …, {seeds} seeds: " + "; ".join(parts)
        lines.append("\n    ".join(textwrap.wrap(line, LINE_WIDTH)))
    return lines
