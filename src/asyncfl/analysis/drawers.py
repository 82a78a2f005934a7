"""The drawer of every figure `asyncfl figures` draws, one function per figure named by its catalogue
key (asyncfl.settings.catalogue): adding a figure is its catalogue entry, its function here and its caption
(docs/development.md "Adding a figure").

Each drawer gets the figure's axes and the runs, as `Drawing` holds them: what a figure shows of them
(which J, which algorithms) is the drawer's to say, in one place.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from asyncfl.analysis import panels, timeline
from asyncfl.analysis.gradient_panels import gradient_norms


@dataclass(frozen=True)
class Drawing:
    """The runs of one experiment as its figures read them.

    Attributes:
        metrics: every run's metrics.csv rows, tagged with algorithm, J and seed, with `updates`.
        dispatches: every run's events.csv rows, tagged likewise, with `lost` ("" for an update aggregated).
        records: each run's folder and run.json, by (algorithm, J, seed).
        stats: the partition statistics (asyncfl partition's FILE.json) of the first seed.
        reference_j: the J of the figures that show one J.
    """

    metrics: pd.DataFrame
    dispatches: pd.DataFrame
    records: dict[tuple[str, int, int], tuple[Path, dict]]
    stats: dict
    reference_j: int

    @cached_property
    def reference(self) -> pd.DataFrame:
        """The metrics of the runs at the reference J."""
        return self.metrics[self.reference_j == self.metrics.J]

    @cached_property
    def events(self) -> pd.DataFrame:
        """The client updates aggregated by the runs at the reference J."""
        dispatches = self.dispatches
        return dispatches[(self.reference_j == dispatches.J) & (dispatches.lost == "")]

    @cached_property
    def first_seed(self) -> int:
        """AFL's first seed at the reference J: the seed of the figures that show one run per algorithm."""
        reference = self.reference
        return int(reference[reference.algorithm == "afl"].seed.min())


def server_loss(axes: Axes, drawing: Drawing) -> None:
    panels.server_loss(axes, drawing.reference[drawing.reference.algorithm == "afl"])


def client_selection(axes: Axes, drawing: Drawing) -> None:
    panels.client_selection(axes, drawing.events, drawing.stats["clients"])


def participation(axes: Axes, drawing: Drawing) -> None:
    panels.participation(axes, drawing.events)


def participation_sweep(axes: Axes, drawing: Drawing) -> None:
    panels.participation_sweep(axes, drawing.metrics[drawing.metrics.algorithm == "afl"])


def afl_vs_sync(axes: Axes, drawing: Drawing) -> None:
    shown = drawing.reference[drawing.reference.algorithm.isin(["afl", "sync"])]
    panels.by_algorithm(axes, shown, "updates", "train_loss", panels.UPDATES, panels.SERVER_LOSS)


def test_metrics_updates(axes: Sequence[Axes], drawing: Drawing) -> None:
    panels.test_metrics(axes, drawing.reference, "updates", panels.UPDATES)


def test_metrics_time(axes: Sequence[Axes], drawing: Drawing) -> None:
    panels.test_metrics(axes, panels.on_time_grid(drawing.reference), "virtual_time", panels.VIRTUAL_TIME)


def staleness_distribution(axes: Axes, drawing: Drawing) -> None:
    panels.staleness_distribution(axes, drawing.events)


def partition_heatmap(axes: Axes, drawing: Drawing) -> None:
    panels.partition_heatmap(axes, drawing.stats)


def algorithms_compared(axes: Sequence[Axes], drawing: Drawing) -> None:
    panels.algorithms_compared(axes, drawing.reference)


def gradient_norm(axes: Sequence[Axes], drawing: Drawing) -> None:
    gradient_norms(axes, drawing.reference, drawing.reference_j)


def system_timeline(axes: np.ndarray, drawing: Drawing) -> None:
    """AFL's first seed at the reference J, and every algorithm's run of that seed and J."""
    j, seed = drawing.reference_j, drawing.first_seed
    records = {a: drawing.records[a, j_, s] for a, j_, s in drawing.records if (j_, s) == (j, seed)}
    dispatches = drawing.dispatches[(j == drawing.dispatches.J) & (drawing.dispatches.seed == seed)]
    metrics = drawing.reference[drawing.reference.seed == seed]
    timeline.system_timeline(axes, dispatches, metrics, records, j, drawing.stats["clients"])


def as_coded_vs_described(axes: Sequence[Axes], drawing: Drawing) -> None:
    panels.as_coded_vs_described(axes, drawing.reference)


def afl_vs_sync_as_published(axes: Sequence[Axes], drawing: Drawing) -> None:
    panels.as_published(axes, drawing.reference)
