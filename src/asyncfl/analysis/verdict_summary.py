"""The claim at a glance (docs/theory.md "Stragglers"): per severity, each asynchronous run name's
difference from plain synchronous FL and from the best synchronous answer, with its interval and its
verdict, on one axis of seconds; the equivalence band where the experiment declares a margin. The map
(`advantage.py`) holds every comparison; this figure answers the headline question at page width.

The best synchronous answer at a severity is the synchronous run name with the lowest restricted mean
time to stay above the target there (read from the same comparisons: the other side's mean time), so
"level with the best" is a comparison the table already holds and Holm already adjusted; it is chosen
after the runs, which the figure says by naming it. Numbers are the primary time (`verdicts.METRICS`)
at the figure's target and the budget T, on the discovery seeds where a replication set is named.
"""

from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from asyncfl.analysis.run_styles import display_name
from asyncfl.analysis.verdicts import EQUIVALENT, FASTER, METRIC_WORDS, METRICS, SLOWER, primary_set
from asyncfl.settings.names import base_algorithm

PLAIN = "sync"  # plain synchronous FL's run name
# A marker per verdict: decided ones coloured, the rest grey
VERDICT_COLOURS = {FASTER: "tab:blue", SLOWER: "tab:red", EQUIVALENT: "darkgreen"}
UNDECIDED_COLOUR = "grey"


def summary_rows(verdicts: pd.DataFrame, target: float, in_flight: dict[str, int]) -> pd.DataFrame:
    """Per severity and asynchronous run name with as many clients in flight as plain sync (`in_flight`:
    each run name's), its comparison with plain sync ("against": "plain", equal resources) and with the
    best synchronous answer ("best"; over-selection has more clients in flight), at `target`."""
    primary = primary_set(verdicts)
    rows = primary[(primary.metric == METRICS[0]) & (primary.target == target)]
    rows = rows[rows.reference.map(in_flight) == in_flight.get(PLAIN)]
    picked = []
    for _, at in rows.groupby("severity", sort=False):
        synchronous = at[at.other.map(base_algorithm) == "sync"]
        best = synchronous.groupby("other", sort=False).other_time.first().idxmin()
        for against, name in (("plain", PLAIN), ("best", best)):
            picked.append(synchronous[synchronous.other == name].assign(against=against))
    return pd.concat(picked, ignore_index=True) if picked else rows.assign(against=[])


def draw_verdict_summary(axes: np.ndarray | Axes, rows: pd.DataFrame, severities: list[str], target: float) -> None:
    """One panel per severity (`axes`: one Axes for a sweep of one): a row per asynchronous run name, its
    difference from plain sync (circle) and from the best synchronous answer (square) with their 95 %
    intervals, coloured by verdict, the equivalence band shaded where one is declared."""
    panels = list(np.asarray(axes).flat)
    margins = rows.equivalence_margin.dropna().unique() if "equivalence_margin" in rows else []
    band = float(margins[0]) if len(margins) == 1 else None
    ends = np.abs(rows[["difference", "ci_low", "ci_high"]].to_numpy(dtype=float))
    span = float(ends[np.isfinite(ends)].max(initial=0.0)) or 1.0  # no interval (too few seeds): a second
    for ax, severity in zip(panels, severities, strict=True):
        at = rows[rows.severity == severity]
        names = list(dict.fromkeys(at.reference))
        if band is not None:
            ax.axvspan(-band, band, color="darkgreen", alpha=0.12, lw=0)
        ax.axvline(0, color="black", lw=0.6)
        for against, marker, shift in (("plain", "o", -0.15), ("best", "s", 0.15)):
            for row in at[at.against == against].itertuples():
                y = names.index(row.reference) + shift
                colour = VERDICT_COLOURS.get(row.verdict, UNDECIDED_COLOUR)
                ax.errorbar(row.difference, y, xerr=[[row.difference - row.ci_low], [row.ci_high - row.difference]],
                            fmt=marker, color=colour, ms=4, capsize=2, lw=1)  # fmt: skip
        best = at[at.against == "best"].other.iloc[0] if len(at) else ""
        ax.set_yticks(range(len(names)), [display_name(name) for name in names], fontsize="x-small")
        ax.invert_yaxis()
        ax.set_xlim(-1.05 * span, 1.05 * span)
        ax.set_title(f"{severity}: ○ − plain sync, □ − best sync ({best})", fontsize="small")
        ax.set_xlabel(f"difference in restricted mean {METRIC_WORDS[METRICS[0]]} {target:.0%} (s)", fontsize="x-small")
        ax.tick_params(labelsize="x-small")
    legend_marks(panels[0], band)


def legend_marks(ax: Any, margin: float | None) -> None:
    """What the colours say (and the band, where drawn), once, below the panels."""
    marks = [*VERDICT_COLOURS.items(), ("no verdict", UNDECIDED_COLOUR)]
    handles: list[Any] = [
        Line2D([], [], color=colour, marker="o", lw=0, ms=4, label=verdict) for verdict, colour in marks
    ]
    if margin is not None:
        handles.append(Patch(color="darkgreen", alpha=0.12, label=f"equivalence band ±{margin:g} s"))
    ax.figure.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize="x-small")
