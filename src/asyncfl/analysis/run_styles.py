"""The run names of a severity sweep in its figures (straggler_claim, straggler_curves, tuning): their
one order, each name's line and marker, and its display name."""

import pandas as pd

from asyncfl.analysis.panels import ALGORITHM_COLOURS
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


def run_styles(names: list[str]) -> dict[str, tuple[LineStyle, dict]]:
    """Each run name's line style and marker style, one for all the sweep's figures: its algorithm's
    colour, its own marker; an algorithm's own runs solid, its variants dashed, dotted, …"""
    styles, variants_seen = {}, dict[str, int]()
    for index, name in enumerate(names):
        base = base_algorithm(name)
        line = VARIANT_LINES[variants_seen.setdefault(base, 0) % len(VARIANT_LINES)]
        variants_seen[base] += 1
        marker = MARKERS[index % len(MARKERS)]
        styles[name] = (line, {"color": ALGORITHM_COLOURS[base], "marker": marker, "ms": 3.5, "lw": 1})
    return styles


def display_name(name: str) -> str:
    base = base_algorithm(name)
    return ALGORITHMS[base] + (f": {name.split('-', 1)[1].replace('_', ' ')}" if name != base else "")
