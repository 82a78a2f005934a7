"""The run names of a severity sweep in its figures (straggler_claim, straggler_curves, tuning): their
one order, each name's line and marker, and its display name."""

import pandas as pd

from asyncfl.analysis.panels import ALGORITHM_COLOURS, PALETTE
from asyncfl.settings.names import ALGORITHMS, base_algorithm

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
# An algorithm's own runs solid, its variants dashed, dotted, …: six styles, so that synchronous FL and
# its five variants of config/claim.yaml each have their own
LineStyle = str | tuple[int, tuple[int, ...]]
VARIANT_LINES: tuple[LineStyle, ...] = (
    "-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (8, 2))
)  # fmt: skip


def run_names(table: pd.DataFrame) -> list[str]:
    """The run names in the figures' one order: by algorithm (`names.ALGORITHMS`), each before its variants."""
    order = list(ALGORITHMS)
    return sorted(set(table.algorithm), key=lambda name: (order.index(base_algorithm(name)), name))


def run_colours(names: list[str]) -> dict[str, tuple[float, ...]]:
    """One colour per run name: an algorithm's own runs in its colour (the same in every figure), each
    variant in the first colour of the palette that no name of this figure has yet (a deadline and
    partial work were once both sync's orange, told apart by the dash alone)."""
    colours = {name: ALGORITHM_COLOURS[name] for name in names if name == base_algorithm(name)}
    free = [colour for colour in PALETTE if colour not in colours.values()]
    for name in names:
        if name not in colours:
            colours[name] = free.pop(0) if free else ALGORITHM_COLOURS[base_algorithm(name)]
    return colours


def run_styles(names: list[str]) -> dict[str, tuple[LineStyle, dict]]:
    """Each run name's line style and marker style, one for all the sweep's figures: its own colour
    (`run_colours`) and marker; an algorithm's own runs solid, its variants dashed, dotted, …"""
    styles, variants_seen, colours = {}, dict[str, int](), run_colours(names)
    for index, name in enumerate(names):
        base = base_algorithm(name)
        line = VARIANT_LINES[variants_seen.setdefault(base, 0) % len(VARIANT_LINES)]
        variants_seen[base] += 1
        marker = MARKERS[index % len(MARKERS)]
        styles[name] = (line, {"color": colours[name], "marker": marker, "ms": 3.5, "lw": 1})
    return styles


def display_name(name: str) -> str:
    base = base_algorithm(name)
    return ALGORITHMS[base] + (f": {name.split('-', 1)[1].replace('_', ' ')}" if name != base else "")
