"""The `straggler_curves` figure: per straggler severity, each run name's test accuracy over virtual time
(top) and over the client work spent (bottom), the mean over seeds at each instant of the runs' time
grid (docs/theory.md "Stragglers"). The work axis is what the time axis hides: an algorithm that keeps
more clients busy, or discards their work, pays for it there."""

from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from asyncfl.analysis.run_styles import display_name, run_names, run_styles


def mean_curves(trajectories: pd.DataFrame) -> pd.DataFrame:
    """Per (severity, run name) and instant: the mean over seeds of the test accuracy and the work
    spent, each seed's last evaluation carried forward to the instants of the others (equal on a time
    grid, where every seed is evaluated at the same instants)."""
    curves = []
    for (severity, name), runs in trajectories.groupby(["severity", "algorithm"], sort=False):
        instants = np.sort(runs.virtual_time.unique())
        seeds = [
            seed_run.set_index("virtual_time")[["test_accuracy", "busy_seconds"]].reindex(instants, method="ffill")
            for _, seed_run in runs.groupby("seed")
        ]
        mean = pd.concat(seeds).groupby(level=0).mean()
        curves.append(mean.reset_index(names="virtual_time").assign(severity=severity, algorithm=name))
    return pd.concat(curves, ignore_index=True)


def draw_curves(axes: np.ndarray, trajectories: pd.DataFrame, severities: list[str], target: float,
                budget: float) -> None:  # fmt: skip
    """Columns: severities; rows: accuracy over virtual time, over client-busy seconds. The legend's columns
    fit the figure's width (two under a sweep of one severity, whose three ran off its edges)."""
    curves = mean_curves(trajectories)
    names = run_names(trajectories)
    styles = run_styles(names)
    columns: list[Sequence[Axes]] = list(np.asarray(axes).reshape(2, -1).T)
    for (over_time, over_work), severity in zip(columns, severities, strict=True):
        for name in names:
            line, style = styles[name]
            curve = curves[(curves.severity == severity) & (curves.algorithm == name)]
            plain = {key: value for key, value in style.items() if key not in ("marker", "ms")}
            over_time.plot(curve.virtual_time, curve.test_accuracy, ls=line, label=display_name(name), **plain)
            over_work.plot(curve.busy_seconds, curve.test_accuracy, ls=line, **plain)
        over_time.set_title(severity, fontsize="small")
        over_time.set(xlabel="Virtual time (s)", xlim=(0, budget))
        over_work.set(xlabel="Client-busy seconds spent")
        for ax in (over_time, over_work):
            ax.axhline(target, color="grey", ls="--", lw=0.8)
            ax.set_ylim(0, 1)
        if trajectories.busy_seconds.isna().all():
            over_work.text(0.5, 0.5, "no time grid: work not logged\n(set eval_every_seconds)", ha="center",
                           transform=over_work.transAxes, fontsize="x-small")  # fmt: skip
    columns[0][0].set_ylabel("Test accuracy (mean over seeds)")
    columns[0][1].set_ylabel("Test accuracy (mean over seeds)")
    resolution = trajectories.resolution.iloc[0]
    read = f"evaluated every {resolution:g} virtual s" if resolution == resolution else "evaluated at aggregations"
    handles, labels = columns[0][0].get_legend_handles_labels()
    columns[0][0].figure.legend(
        handles, labels, loc="outside lower center", ncols=min(3, len(severities) + 1), fontsize="x-small",
        frameon=False,
        title=f"Grey dashed line: the target, {target:.0%}; {read}", title_fontsize="x-small",
    )  # fmt: skip
