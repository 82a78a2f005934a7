"""The system behind the curves (docs/world.md "The clients' world"): each client's dispatches over
virtual time, split into their phases, with its offline periods and its lost dispatches, for the
first rounds (under a day's rhythm, the first virtual day) of every algorithm described by the paper,
at the reference J and the first seed.

Drawn from events.csv (dispatch and arrival times, the phases where the clients have links, `lost`)
and, for the offline periods, from the run's own settings in run.json: availability is drawn from
its seed alone, so the figures recompute the exact periods the run saw (a trace is read again and
checked against the SHA-256 its run recorded).
"""

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.artist import Artist  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

from asyncfl.files import sha256  # noqa: E402
from asyncfl.runs.logs import PHASE_COLUMNS  # noqa: E402
from asyncfl.settings.config import make_config  # noqa: E402
from asyncfl.settings.errors import InputError  # noqa: E402
from asyncfl.settings.names import ALGORITHMS  # noqa: E402
from asyncfl.sim.availability import Availability  # noqa: E402
from asyncfl.sim.periods import DAY  # noqa: E402

SHOWN = ("afl", "sync", "fedasync", "fedbuff")  # the algorithms the paper describes, one panel each
FIRST_ROUNDS = 5  # the window ends when every algorithm shown has aggregated this many rounds' worth (× J)
MAX_LANES = 40  # clients drawn, from client 0; a larger population is said to be cut
PALETTE = sns.color_palette("colorblind")
PHASE_COLOURS = {  # (label, colour) of each part of a dispatch, in the order it happens
    "download_seconds": ("download", PALETTE[9]),
    "compute_seconds": ("compute", PALETTE[0]),
    "upload_seconds": ("upload", PALETTE[1]),
    "latency": ("latency (the rest of the dispatch)", PALETTE[2]),
}
WHOLE_DISPATCH = ("compute + latency (no links modelled)", PALETTE[0])
OFFLINE_COLOUR, LOST_COLOUR = (0.82, 0.82, 0.82), PALETTE[3]
LOST_LABEL = "dispatch lost: client offline before its upload ended, or failed (phases faded)"
LOST_ALPHA = 0.35  # the phases of a lost dispatch, faded: work that never reached the server


def offline_periods(run: Path, record: dict, clients: int, until: float) -> list[list[tuple[float, float]]]:
    """Per client, its offline periods (start, length) that begin before `until`, as the run saw them."""
    config = make_config(record["config"], f"{run}/run.json")
    if config.availability == "trace" and sha256(Path(str(config.availability_trace))) != record.get(
        "availability_trace_sha256"
    ):
        raise InputError(
            f"availability_trace {config.availability_trace} is not the trace {run} was trained on (SHA-256 "
            "differs); give the trace file the run used, or train the run again"
        )
    availability = Availability.of(config, clients)
    if availability is None:
        return [[] for _ in range(clients)]
    periods = []
    for client in range(clients):
        starts_online, flips_after_start = availability.flips_until(client, until)
        flips = [0.0, *flips_after_start, np.inf]
        starts_offline = not starts_online
        pairs = enumerate(zip(flips, flips[1:], strict=False))
        spans = [(a, b - a) for i, (a, b) in pairs if (i % 2 == 0) == starts_offline]
        periods.append([(a, min(length, until - a)) for a, length in spans if a < until])
    return periods


def window_end(dispatches: pd.DataFrame, j: int, day: bool = False) -> float:
    """When the slowest algorithm shown has aggregated FIRST_ROUNDS × J updates (or all it aggregated);
    under a day's rhythm (`day`), the first virtual day, or the runs' last arrival if sooner: the
    rhythm is what there is to see."""
    if day:
        return float(min(DAY, dispatches.arrival_time.max()))
    aggregated = dispatches[dispatches.lost == ""].sort_values("arrival_time")
    return float(max(runs.arrival_time.iloc[: FIRST_ROUNDS * j].max() for _, runs in aggregated.groupby("algorithm")))


def segments(dispatches: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Each dispatch's parts as (client, start, length) per phase, cut where a lost dispatch ended."""
    begin = dispatches.dispatch_time.to_numpy()
    end = dispatches.arrival_time.to_numpy()
    if not set(PHASE_COLUMNS) <= set(dispatches.columns):
        return {"whole": pd.DataFrame({"client": dispatches.client, "start": begin, "length": end - begin})}
    parts = {}
    for phase in PHASE_COLUMNS:
        length = np.clip(dispatches[phase].to_numpy(), 0.0, end - begin)
        parts[phase] = pd.DataFrame({"client": dispatches.client, "start": begin, "length": length})
        begin = begin + length
    parts["latency"] = pd.DataFrame({"client": dispatches.client, "start": begin, "length": end - begin})
    return parts


def system_timeline(
    axes: np.ndarray,
    dispatches: pd.DataFrame,
    metrics: pd.DataFrame,
    records: dict[str, tuple[Path, dict]],
    j: int,
    clients: int,
) -> None:
    """One panel per algorithm shown, over the same window of virtual time: a lane per client with its
    dispatches and its offline periods (`records`: each algorithm's run folder and run.json, of one J and seed)."""
    lanes = min(clients, MAX_LANES)
    configs = [record["config"] for _, record in records.values()]
    diurnal = any(config.get("availability") == "diurnal" for config in configs)
    until = window_end(dispatches[dispatches.algorithm.isin(SHOWN)], j, diurnal)
    for ax, algorithm in zip(np.ravel(axes), SHOWN, strict=True):
        ax.set(xlim=(0, until), ylim=(lanes - 0.5, -0.5), xlabel="Virtual time (s)", ylabel="Client")
        ax.set_title(ALGORITHMS[algorithm], fontsize="small")
        ax.grid(False)
        if algorithm not in records:
            ax.text(0.5, 0.5, "not run in this experiment", ha="center", transform=ax.transAxes, fontsize="small")
            continue
        for client, spans in enumerate(offline_periods(*records[algorithm], clients, until)[:lanes]):
            ax.broken_barh(spans, (client - 0.45, 0.9), facecolor=OFFLINE_COLOUR, edgecolor="white", hatch="///", lw=0)
        run = dispatches[(dispatches.algorithm == algorithm) & (dispatches.client < lanes)]
        run = run[run.dispatch_time < until]
        lost = run[run.lost != ""]
        for dispatches_drawn, alpha in ((run[run.lost == ""], 1.0), (lost, LOST_ALPHA)):
            for phase, parts in segments(dispatches_drawn).items():
                colour = PHASE_COLOURS[phase][1] if phase in PHASE_COLOURS else WHOLE_DISPATCH[1]
                for client, rows in parts.groupby("client"):
                    spans = list(zip(rows.start, rows.length, strict=True))
                    # a white edge parts back-to-back dispatches of one client (and the phases of one)
                    ax.broken_barh(spans, (client - 0.3, 0.6), facecolor=colour, alpha=alpha, edgecolor="white", lw=0.3)
        ax.scatter(lost.arrival_time, lost.client, marker="x", color=LOST_COLOUR, s=14, zorder=3, lw=1)
        for time in metrics[(metrics.algorithm == algorithm) & (metrics.virtual_time <= until)].virtual_time:
            ax.axvline(time, color="black", lw=0.4, alpha=0.35)
        if clients > lanes:
            ax.text(1.0, 1.01, f"clients 0–{lanes - 1} of {clients}", ha="right", transform=ax.transAxes, fontsize=5)
    if diurnal:
        for ax in np.ravel(axes):
            clock_hours(ax)
    offline = any(config.get("availability", "always") != "always" for config in configs)
    lost = offline or any(config.get("failure_probability", 0) > 0 for config in configs)
    legend(list(np.ravel(axes)), set(PHASE_COLUMNS) <= set(dispatches.columns), offline, lost)


def to_hours(seconds: Any) -> Any:
    return np.asarray(seconds, dtype=float) / 3600


def to_seconds(hours: Any) -> Any:
    return np.asarray(hours, dtype=float) * 3600


def clock_hours(ax: Axes) -> None:
    """The virtual clock's hour of day on the top axis, for a day's rhythm (`availability: diurnal`,
    whose population is most online at t = 0, hour 00)."""
    top = ax.secondary_xaxis("top", functions=(to_hours, to_seconds))
    top.xaxis.set_major_formatter(FuncFormatter(lambda hours, _: f"{hours % 24:02.0f}h"))
    top.set_xlabel("Virtual hour of day (the population most online at 00h)", fontsize="x-small")
    top.tick_params(labelsize=5)


def legend(axes: Sequence[Axes], with_phases: bool, offline: bool, lost: bool) -> None:
    """What the panels draw: the phases (or the whole dispatch), offline periods and losses where the
    runs' world has them, and the aggregations."""
    shown = [PHASE_COLOURS[p] for p in (*PHASE_COLUMNS, "latency")] if with_phases else [WHOLE_DISPATCH]
    handles: list[Artist] = [Patch(color=colour, label=label) for label, colour in shown]
    if offline:
        handles.append(Patch(facecolor=OFFLINE_COLOUR, edgecolor="white", hatch="///", label="offline"))
    if lost:
        handles.append(axes[0].scatter([], [], marker="x", color=LOST_COLOUR, label=LOST_LABEL))
    handles.append(axes[0].plot([], [], color="black", lw=0.4, alpha=0.35, label="server aggregation")[0])
    axes[0].figure.legend(handles=handles, loc="outside lower center", ncols=3, frameon=False, fontsize="x-small")
