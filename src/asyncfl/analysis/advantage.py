"""The async_advantage map (docs/theory.md "Stragglers"): where asynchrony wins, and by how much.

One cell per severity (a row) and synchronous run name (a column: plain, over-selection at each ε, a
deadline, partial work, …): an asynchronous algorithm at the same number of clients in flight (M = J
against plain sync or a deadline, M = ⌈J·(1+ε)⌉ against over-selection at ε) minus the synchronous run,
the paired difference of restricted mean times to stay above the target (`verdicts.METRICS`' primary)
with its 95 % CI and its verdict, Holm-adjusted over the target's comparisons (`verdicts`). One row of
panels per asynchronous algorithm the sweep runs (AFL, FedAsync, FedBuff: "does asynchrony win", not
only "does AFL win"), one column per target. The colour is the difference (blue: asynchrony faster); a
cell with no significant difference (or, with an equivalence margin declared, undecided) is hatched
black, one equivalent within the margin green; one with too few seeds is grey and says so; a cell
some of whose runs never reached the target says how many of each side did. Where the experiment names
replication seeds, a cell shows the discovery seeds' verdict and says whether the replication seeds
gave it; one they did not give is hatched orange.
"""

import math
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.colors import TwoSlopeNorm
from matplotlib.patches import Rectangle

from asyncfl.analysis.verdicts import (
    EQUIVALENT,
    FASTER,
    METRIC_WORDS,
    METRICS,
    MIN_SEEDS,
    SLOWER,
    TIED,
    TOO_FEW,
    UNDECIDED,
    primary_set,
    replication_of,
)
from asyncfl.settings.names import ALGORITHMS, ASYNCHRONOUS, base_algorithm

COLOURS = "RdBu_r"  # negative (AFL faster) blue, positive red


def asynchronous_families(in_flight: dict[str, int]) -> list[str]:
    """The asynchronous algorithms among the run names, in the catalogue's order: the map's rows of panels."""
    return [family for family in ASYNCHRONOUS if any(base_algorithm(name) == family for name in in_flight)]


def matched_cells(verdicts: pd.DataFrame, in_flight: dict[str, int]) -> pd.DataFrame:
    """Per asynchronous algorithm (`family`), target, severity and synchronous run name: the comparison
    (the primary time, to stay above the target) with that algorithm's run name of its clients in
    flight, or a row without numbers where the sweep has no such run."""
    synchronous = [name for name in in_flight if base_algorithm(name) == "sync"]
    primary = primary_set(verdicts)
    first = primary[primary.metric == METRICS[0]].set_index(["target", "severity", "reference", "other"])
    replications = {
        target: replication_of(rows) for target, rows in verdicts.groupby("target", sort=False)
    }  # fmt: skip
    numbers = ["seeds", "difference", "ci_low", "ci_high", "p_holm", "family_size", "reference_reached",
               "other_reached", "verdict"]  # fmt: skip
    numbers += [column for column in ("p_equivalence_holm", "equivalence_margin", "family_unrun") if column in first]
    rows = []
    for family in asynchronous_families(in_flight):
        matching = {in_flight[name]: name for name in in_flight if base_algorithm(name) == family}
        for target, severity in verdicts[["target", "severity"]].drop_duplicates().itertuples(index=False):
            for other in synchronous:
                reference = matching.get(in_flight[other])
                key = (target, severity, reference, other)
                found = first.loc[key] if reference is not None and key in first.index else None
                cell = {"family": family, "target": target, "severity": severity, "other": other,
                        "reference": reference or ""}  # fmt: skip
                cell |= {column: (found[column] if found is not None else math.nan) for column in numbers}
                cell["replication"] = replications[target].get((severity, METRICS[0], reference, other), "")
                rows.append(cell)
    return pd.DataFrame(rows)


def draw_advantage(axes: np.ndarray, cells: pd.DataFrame, severities: list[str], in_flight: dict[str, int]) -> None:
    """One heatmap per asynchronous algorithm (a row of panels) and target (a column, in increasing
    order): rows the severities, columns the synchronous run names."""
    columns = list(dict.fromkeys(cells.other))
    coloured = cells.difference
    span = float(np.nanmax(np.abs(coloured.to_numpy(dtype=float)), initial=1.0)) or 1.0
    norm = TwoSlopeNorm(0.0, -span, span)
    families = list(dict.fromkeys(cells.family))
    targets = sorted(cells.target.unique(), key=float)
    grid_of_axes = np.asarray(axes).reshape(len(families), len(targets))
    for (family, target), panel in cells.groupby(["family", "target"], sort=False):
        ax = grid_of_axes[families.index(family), targets.index(target)]
        grid = panel.assign(difference=coloured).pivot(index="severity", columns="other", values="difference")
        grid = grid.reindex(severities)[columns]
        image = ax.imshow(grid.to_numpy(dtype=float), cmap=COLOURS, norm=norm, aspect="auto")
        for row in panel.itertuples():
            y, x = severities.index(row.severity), columns.index(row.other)
            dark = abs(coloured[row.Index]) > 0.6 * span  # white words on the darkest cells
            ax.text(
                x,
                y,
                cell_text(row, in_flight),
                ha="center",
                va="center",
                fontsize=5,
                color="white" if dark else "black",
            )
            if row.verdict in (TIED, UNDECIDED, TOO_FEW) or not row.reference:
                greyed = row.verdict == TOO_FEW or not row.reference
                ax.add_patch(hatched(x, y, "grey" if greyed else "black", filled=greyed))
            elif row.verdict == EQUIVALENT:
                ax.add_patch(hatched(x, y, "darkgreen", filled=False, hatch="\\\\\\"))
            elif row.replication and row.replication != row.verdict:
                ax.add_patch(hatched(x, y, "darkorange", filled=False))
        ax.set_xticks(range(len(columns)), [f"{name}\n({in_flight[name]} in flight)" for name in columns])
        ax.set_yticks(range(len(severities)), severities)
        ax.tick_params(labelsize=5)
        ax.grid(False)
        seeds = panel.seeds.dropna().unique()
        paired = f", {seeds[0]:.0f} paired seeds" if len(seeds) == 1 else ""
        family_size = panel.family_size.dropna().unique()
        over = f" over {family_size[0]:.0f}" if len(family_size) == 1 else ""
        unrun = panel.family_unrun.dropna().unique() if "family_unrun" in panel else []
        if len(unrun) == 1 and over:  # a declared family: on a line of its own (a one-panel map is narrow)
            over = f"\nover{over.removeprefix(' over')} declared, {unrun[0]:.0f} not run (each at p = 1)"
        margins = panel.equivalence_margin.dropna().unique() if "equivalence_margin" in panel else []
        band = f"\nequivalent: within ±{margins[0]:g} s (TOST, green)" if len(margins) == 1 else ""
        ax.set_title(
            f"{ALGORITHMS[family]}: {METRIC_WORDS[METRICS[0]]} {target:.0%} test accuracy\n{paired.lstrip(', ')}"
            f"{', ' if paired else ''}t 95 % CIs, p Holm-adjusted{over}{band}",
            fontsize="small",
        )
        ax.set_xlabel(
            f"synchronous run (against {ALGORITHMS[family]} with as many clients in flight)", fontsize="x-small"
        )
    colourbar = grid_of_axes[0, 0].figure.colorbar(image, ax=list(grid_of_axes.flat), shrink=0.8)
    colourbar.set_label(
        f"asynchronous − synchronous, restricted mean {METRIC_WORDS[METRICS[0]]}\nthe target (s); blue: "
        "asynchrony faster",
        fontsize="x-small",
    )
    colourbar.ax.tick_params(labelsize=5)


# A verdict in a cell: short, the hatching and the caption say the rest
CELL_VERDICTS = {
    FASTER: "{name}{gap}faster",
    SLOWER: "{name}{gap}slower",
    TIED: "n.s.",
    EQUIVALENT: "equivalent",
    UNDECIDED: "undecided",
}
# "FedAsync slower" fills a cell's line; a longer name ("FedCompass faster" ran past the cell's edge) takes
# a line of its own, the words before and after it lines of theirs
LONGEST_INLINE_NAME = len("FedAsync")


def cell_text(row: Any, in_flight: dict[str, int]) -> str:
    """A cell's words: its difference, interval and verdict, or why it has none."""
    name = ALGORITHMS[row.family]
    gap = "\n" if len(name) > LONGEST_INLINE_NAME else " "  # between the name and the words beside it
    if not row.reference:
        return f"no{gap}{name}{gap}at\nM = {in_flight[row.other]}"
    if row.verdict == TOO_FEW:
        return f"{row.difference:+.1f} s\n{row.seeds:.0f} seeds:\ntoo few (≥ {MIN_SEEDS})"
    p = row.p_equivalence_holm if row.verdict == EQUIVALENT else row.p_holm  # the test that decided
    verdict = f"{CELL_VERDICTS[row.verdict].format(name=name, gap=gap)}\np {p:.2g}"
    text = f"{row.difference:+.1f} s\n[{row.ci_low:+.1f}, {row.ci_high:+.1f}]\n{verdict}"
    if min(row.reference_reached, row.other_reached) < row.seeds:  # censored runs: how many reached
        text += f"\nreached {row.reference_reached:.0f} vs {row.other_reached:.0f}"
    if not row.replication:
        return text
    agrees = row.replication == row.verdict
    again = CELL_VERDICTS.get(row.replication, row.replication).format(name=name, gap=gap)
    return text + ("\nreplicated" if agrees else f"\nrepl.:{gap}{again}")


def hatched(x: int, y: int, colour: str, filled: bool, hatch: str = "///") -> Rectangle:
    """The mark of a cell that decides no difference: hatched (no significant difference, or undecided;
    green and the other way: equivalent within the margin; orange: a verdict the replication seeds did
    not give), or greyed and hatched (too few seeds, or no asynchronous run to compare)."""
    face = (0.85, 0.85, 0.85, 0.8) if filled else "none"
    return Rectangle((x - 0.5, y - 0.5), 1, 1, facecolor=face, edgecolor=colour, hatch=hatch, lw=0, alpha=0.5)
