"""The verdict as a curve over the budget (docs/theory.md "Stragglers"): every comparison of a severity
sweep read again with its runs cut at budgets from T/4 to T, the same runs read once, so that a verdict
that holds only where the budget happened to fall shows as such.

At each budget the comparisons are those of the map (`verdicts`: the paired difference of restricted mean
times to stay above the target, its paired t interval, Holm over the budget's declared family). Per
comparison, `holds_from` is the least budget from which the verdict at T (faster or slower) is the verdict
at every budget up to T, on every seed set (the discovery and the replication seeds, where the sweep names
them): the budget a reader needs before the claim stands. Kept free of the run readers, which hand it
their verdicts at each budget (`stragglers.budget_verdicts`).
"""

import math
from collections.abc import Callable

import numpy as np
import pandas as pd

from asyncfl.analysis.panels import ALGORITHM_COLOURS
from asyncfl.analysis.run_styles import display_name
from asyncfl.analysis.verdicts import ALL, DISCOVERY, FASTER, METRICS, REPLICATION, SLOWER, primary_set
from asyncfl.settings.names import base_algorithm

CURVE_POINTS = 16  # budgets from T/4 to T, evenly spaced: what the curve is read at
COMPARISON = ["severity", "reference", "other"]


def curve_budgets(budget: float, first_evaluation: float) -> np.ndarray:
    """The budgets the curve is read at: CURVE_POINTS from T/4 to T, less those before every run has an
    evaluation (a run cut there would have no accuracy to read)."""
    budgets = np.linspace(budget / 4, budget, CURVE_POINTS)
    return budgets[budgets >= first_evaluation]


def verdict_curve(verdicts_at: Callable[[float], pd.DataFrame], budgets: np.ndarray) -> pd.DataFrame:
    """The primary metric's comparisons at each budget (`verdicts_at(budget)`: `seed_set_verdicts`'
    table of the runs cut there, at one target), with each comparison's `holds_from` (read on the seeds
    that decide: all of them where the sets are pooled, `verdicts.primary_set`, and the replication's too
    where they are apart)."""
    curve = pd.concat([verdicts_at(float(each)).assign(budget=float(each)) for each in budgets], ignore_index=True)
    curve = curve[curve.metric == METRICS[0]].drop(columns="metric")
    columns = ["budget", "seed_set", *COMPARISON, "seeds", "reference_reached", "other_reached", "difference",
               "ci_low", "ci_high", "p_holm", "family_size", "verdict"]  # fmt: skip
    curve = curve[columns].reset_index(drop=True)
    deciding = primary_set(curve) if (curve.seed_set == ALL).any() else curve
    held = {key: holds_from(rows) for key, rows in deciding.groupby(COMPARISON, sort=False)}
    curve["holds_from"] = [held[key] for key in zip(*(curve[column] for column in COMPARISON), strict=True)]
    return curve


def holds_from(rows: pd.DataFrame) -> float:
    """The least budget from which the verdict at the last budget (faster or slower) is the verdict at
    every later budget on every seed set; NaN where the verdict at the last budget decides nothing."""
    by_budget = rows.groupby("budget").verdict.agg(set).sort_index()
    final = by_budget.iloc[-1]
    if len(final) != 1 or not final & {FASTER, SLOWER}:
        return math.nan
    since = by_budget.index[-1]
    for budget, verdicts in reversed(list(by_budget.items())):
        if verdicts != final:
            break
        since = budget
    return float(since)


def draw_verdict_curve(axes: np.ndarray, curve: pd.DataFrame, severities: list[str], in_flight: dict[str, int]) -> None:
    """One panel per severity: each asynchronous run name minus the plain synchronous run of as many
    clients in flight, its difference over the budget with its 95 % interval (the discovery seeds, or all;
    the replication seeds dotted, and the discovery seeds too where the sets are pooled), a dot where the
    budget's verdict decides, and from which budget it holds; a panel with nothing to draw says so."""
    plain = {in_flight[name]: name for name in in_flight if name == "sync"}
    pooled = {ALL, REPLICATION} <= set(curve.seed_set)
    checks = {DISCOVERY, REPLICATION} if pooled else {REPLICATION}  # dotted, no band: the other seeds' curves
    for ax, severity in zip(np.asarray(axes).flat, severities, strict=True):
        rows = curve[curve.severity == severity]
        for reference in dict.fromkeys(rows.reference):
            other = plain.get(in_flight[reference])
            if other is None:  # no plain synchronous run with as many clients in flight
                continue
            pair, colour = rows[(rows.reference == reference) & (rows.other == other)], ALGORITHM_COLOURS[
                base_algorithm(reference)]  # fmt: skip
            style = "-" if reference == base_algorithm(reference) else "-."
            for seed_set in ("discovery", "all", "replication"):
                line = pair[pair.seed_set == seed_set]
                if line.empty:
                    continue
                if seed_set in checks:
                    ax.plot(line.budget, line.difference, ":", lw=1, color=colour)
                else:
                    held = line.holds_from.iloc[0]
                    since = f", holds from {held:.3g} s" if not math.isnan(held) else ""
                    label = f"{display_name(reference)} − {display_name(other)}{since}"
                    ax.plot(line.budget, line.difference, style, lw=1, color=colour, label=label)
                    ax.fill_between(line.budget, line.ci_low, line.ci_high, color=colour, alpha=0.15, lw=0)
                decided = line[line.verdict.isin([FASTER, SLOWER])]
                ax.plot(decided.budget, decided.difference, "o", ms=2.5, color=colour)
        ax.axhline(0.0, color="grey", lw=0.6)
        ax.set_title(severity, fontsize="small")
        ax.set_xlabel("budget (virtual s)", fontsize="x-small")
        ax.tick_params(labelsize=5)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=4.5, loc="best")
        else:  # nothing to draw: say why, rather than leave the panel blank
            ax.text(0.5, 0.5, "no plain sync run with an\nasynchronous name's clients in flight", ha="center",
                    va="center", fontsize="x-small", color="grey", transform=ax.transAxes)  # fmt: skip
    first = np.asarray(axes).flat[0]
    first.set_ylabel("asynchronous − plain sync,\nrestricted mean time to stay (s)", fontsize="x-small")
