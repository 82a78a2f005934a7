"""The paper's figures and the ones a reader needs beside them, drawn with seaborn from the CSVs only
(docs/outputs.md "Outputs").

Runs are found under RUNS/{algorithm}/J{J}/seed{seed}/. Curves are means over seeds
with a ±1 standard-deviation band where there are several seeds. Every algorithm keeps one
colour across all figures; the J of a sweep get distinct colours in the order of J. The
paper's "server loss" is the clients' training loss, a proxy: it is labelled so, and the
global model's test metrics stand beside it.
"""

import textwrap
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure as MatplotlibFigure  # noqa: E402

from asyncfl.analysis import drawers  # noqa: E402
from asyncfl.analysis.drawers import Drawing  # noqa: E402
from asyncfl.files import sha256, written_together  # noqa: E402
from asyncfl.planning.layout import EVENTS, METRICS, NPZ_HASH, RUN_DIR, RUN_LOGS  # noqa: E402
from asyncfl.runs.record import check_run_identity, verify_run_files  # noqa: E402
from asyncfl.settings.catalogue import Figure, Scope, catalogued, scope_figures  # noqa: E402
from asyncfl.settings.config import CLIENTS_WORLD  # noqa: E402
from asyncfl.settings.errors import InputError  # noqa: E402
from asyncfl.settings.integrity import MAX_RECORD_BYTES, read_input, strict_json_loads  # noqa: E402
from asyncfl.settings.names import TIMING_ONLY, base_algorithm  # noqa: E402

COLUMN_WIDTH = 3.4  # inches: one column of a two-column paper


TITLE_CHARACTERS_PER_INCH = 16  # of a suptitle at fontsize "medium" in the paper context


class Runs(NamedTuple):
    """What the figures read of the runs, each row tagged with algorithm, J and seed.

    Attributes:
        metrics: metrics.csv rows, with `updates`: client updates aggregated up to each round.
        dispatches: events.csv rows, with `lost` ("" for an update aggregated; where a run can lose
            dispatches, "offline" or "failed" for one lost).
        records: each run's folder and run.json, by (algorithm, J, seed).
    """

    metrics: pd.DataFrame
    dispatches: pd.DataFrame
    records: dict[tuple[str, int, int], tuple[Path, dict]]

    @property
    def events(self) -> pd.DataFrame:
        """The client updates aggregated: every dispatch but those lost."""
        return self.dispatches[self.dispatches.lost == ""]


def checked_records(runs: list[Path], partitions: dict[str, dict] | None,
                    files: tuple[str, ...] = RUN_LOGS) -> dict[tuple[str, int, int], tuple[Path, dict]]:  # fmt: skip
    """Each given run folder's run.json by (algorithm, J, seed), after checking each of `files` against it,
    and the run.json against what the folder stands for, against the other runs' world and, unless
    `partitions` is None (a judge that reads no partition), against the partitions given (statistics by
    their .npz's SHA-256) (docs/outputs.md "Outputs"). A folder given twice (overlapping globs) counts
    once; two folders holding one run are refused."""
    records: dict[tuple[str, int, int], tuple[Path, dict]] = {}
    seen: dict[tuple[str, int, int], Path] = {}  # each run's folder by what it is
    for run in runs:
        folder = Path(run).resolve()
        match = RUN_DIR.search(folder.as_posix())
        if not match:
            raise InputError(f"{run} is not a run folder (expected …/ALGORITHM/JN/seedS, as asyncfl train writes)")
        if folder in seen.values():
            continue
        record = verify_run_files(run, files)
        key = (match["algorithm"], int(match["J"]), int(match["seed"]))
        check_run_identity(run, record, algorithm=base_algorithm(key[0]), clients_per_round=key[1], seed=key[2])
        if partitions is not None and record.get("partition_sha256") not in partitions:
            raise InputError(
                f"{run} was trained on a partition none of --partition-stats describes (its run.json's "
                "partition_sha256); give the statistics FILE.json of every partition the runs used"
            )
        if key in seen:
            raise InputError(f"{seen[key]} and {folder} hold the same run ({key}); give each run once")
        seen[key] = folder
        if records:  # every earlier run was checked against the first
            check_one_world(run, record, *next(iter(records.values())))
        records[key] = (Path(run), record)
    if not records:
        raise InputError("no run folders given; pass them as --runs results/EXPERIMENT/runs/*/J*/seed*")
    return records


def load_runs(runs: list[Path], partitions: dict[str, dict]) -> Runs:
    """The given run folders' logs and records, each checked (`checked_records`)."""
    records = checked_records(runs, partitions)
    metrics, events = [], []
    for key, (run, record) in records.items():
        tags = {"algorithm": key[0], "J": key[1], "seed": key[2], "lr_clock": record.get("lr_clock", "round")}
        run_events = pd.read_csv(Path(run) / EVENTS)
        run_events["lost"] = run_events.lost.fillna("") if "lost" in run_events else ""
        run_metrics = pd.read_csv(Path(run) / METRICS)
        # The cost axis of equal-budget comparisons: client updates aggregated up to each round.
        aggregated = run_events[run_events.lost == ""]
        run_metrics["updates"] = run_metrics["round"].map(aggregated.groupby("round").size().cumsum())
        metrics.append(run_metrics.assign(**tags))
        events.append(run_events.assign(**tags))
    return Runs(pd.concat(metrics, ignore_index=True), pd.concat(events, ignore_index=True), records)


def clients_world(record: dict) -> dict:
    """The clients' system and world a run was trained in (the settings every algorithm reads, and its
    trace's content): runs drawn in one figure must share it, or the figure compares worlds, not algorithms."""
    world = {key: record["config"].get(key) for key in CLIENTS_WORLD}
    return {**world, "availability_trace": record.get("availability_trace_sha256")}


def check_one_world(run: Path, record: dict, other: Path, other_record: dict) -> None:
    ours, theirs = clients_world(record), clients_world(other_record)
    differ = [key for key in ours if ours[key] != theirs[key]]
    if differ:
        key = differ[0]
        raise InputError(
            f"{run} and {other} were trained in different clients' worlds ({key}: {ours[key]!r} against "
            f"{theirs[key]!r}); a figure compares runs of one world: give runs of one experiment"
        )


STATS_KEYS = ("dataset", "clients", "alpha", "seed", "class_counts", NPZ_HASH)


def load_partition_stats(path: Path) -> dict:
    """The partition's statistics (FILE.json of asyncfl partition), checked for what the figures read
    and against the FILE.npz beside it, whose SHA-256 it records (a .json of another partition, or
    one left from before the .npz was made again, is refused)."""
    remake = "make the partition again with asyncfl partition"
    try:
        stats = strict_json_loads(read_input(Path(path), MAX_RECORD_BYTES))
    except ValueError as error:
        raise InputError(f"{path} is not a readable partition statistics file ({type(error).__name__})") from None
    missing = [key for key in STATS_KEYS if not isinstance(stats, dict) or key not in stats]
    if not missing and not (isinstance(stats["class_counts"], list) and len(stats["class_counts"]) == stats["clients"]):
        missing = ["one class_counts row per client"]
    if missing:
        raise InputError(
            f"{path} is not the statistics file of a partition (lacks {', '.join(missing)}); "
            f"give the FILE.json that asyncfl partition wrote beside FILE.npz, or {remake}"
        )
    npz = Path(path).with_suffix(".npz")
    try:
        actual = sha256(npz)
    except OSError:
        raise InputError(f"{npz}, the partition {path} describes, cannot be read; {remake}") from None
    if actual != stats[NPZ_HASH]:
        raise InputError(f"{path} does not describe the {npz} beside it (SHA-256 differs); {remake}")
    return stats


def load_partitions(paths: list[Path]) -> tuple[dict, dict[str, dict]]:
    """The first partition's statistics (the figures' heatmap and C) and every one by its .npz's SHA-256;
    all must be of one dataset and one C."""
    described = [load_partition_stats(path) for path in paths]
    first = described[0]
    for path, stats in zip(paths, described, strict=True):
        if (stats["dataset"], stats["clients"]) != (first["dataset"], first["clients"]):
            raise InputError(
                f"{path} is a partition of {stats['dataset']} into {stats['clients']} clients, {paths[0]} of "
                f"{first['dataset']} into {first['clients']}; give the partitions of one experiment"
            )
    return first, {stats[NPZ_HASH]: stats for stats in described}


def draw_figures(
    runs: list[Path],
    partition_stats: list[Path],
    reference_j: int,
    out: Path,
    title: str,
    emulation: str | None = None,
) -> list[Path]:
    """Draw every figure of an experiment as PNG (300 dpi) and PDF into `out` (with `emulation`, only
    that figure of the paper's code as it ran beside the algorithms as described, `Scope.EMULATION`; of
    timing-only runs, the figures drawn from the clock alone); return the paths written."""
    sns.set_theme(
        context="paper", style="whitegrid", font_scale=0.9, rc={"legend.fontsize": "small", "legend.framealpha": 0.8}
    )
    if not runs:
        raise InputError("no run folders given; pass them as --runs results/EXPERIMENT/runs/*/J*/seed*")
    stats, partitions = load_partitions(partition_stats)
    loaded = load_runs(runs, partitions)
    drawing = Drawing(loaded.metrics, loaded.dispatches, loaded.records, stats, reference_j)
    if "afl" not in set(drawing.reference.algorithm):
        raise InputError(
            f"no AFL run with J = {reference_j} among --runs; the figures compare against it: add one, "
            "or set --reference-j to a J that AFL ran"
        )
    timed = {record["config"].get("trainer") == TIMING_ONLY for _, record in loaded.records.values()}
    if len(timed) > 1:
        raise InputError("--runs mixes timing-only runs (trainer: none) with trained ones; draw each kind apart")
    if timed == {True} and emulation:
        raise InputError(f"{emulation} compares losses, and the runs are timing-only (trainer: none): none to draw")
    emulations = scope_figures(Scope.EMULATION, reference_j)
    experiment = scope_figures(Scope.EXPERIMENT, reference_j, timing_only=timed == {True})
    figures = [f for f in emulations if f.name == emulation] or experiment
    for algorithm in figures[0].compares if emulation else ():
        if algorithm not in set(drawing.reference.algorithm):
            raise InputError(f"no {algorithm} run with J = {reference_j} among --runs; add one to draw {emulation}")
    drawn = []
    for figure in figures:
        suptitle = heading(title, figure.title)
        if title and len(suptitle) > TITLE_CHARACTERS_PER_INCH * COLUMN_WIDTH * figure.panels:  # cut at the edges
            suptitle = f"{title}:\n{figure.title}"
        height = figure.height + figure.height_per_client * stats["clients"]
        draw = partial(getattr(drawers, figure.key), drawing=drawing)  # the drawer named by the figure's key
        drawn.append(drawn_figure(draw, figure, height, suptitle, Path(out) / figure.name))
    written = [path for each in drawn for path in each.paths()]
    with written_together(written) as temporaries:  # every figure drawn before any is written
        write_figures(drawn, temporaries)
    return written


# Characters of a medium-size title an inch of figure holds: a longer title wraps instead of running off a
# one-panel figure's edges (a sweep of one severity drew `verdict_over_budget` with its title cut)
TITLE_CHARS_PER_INCH = 14


class DrawnFigure(NamedTuple):
    """A figure drawn in memory and the stem its PNG and PDF are written under (`write_figures`)."""

    figure: MatplotlibFigure
    stem: Path

    def paths(self) -> list[Path]:
        return [self.stem.with_suffix(".png"), self.stem.with_suffix(".pdf")]


def heading(title: str, figure_title: str) -> str:
    """A figure's suptitle: the experiment's title, where one is given, before the figure's own."""
    return f"{title}: {figure_title}" if title else figure_title


def drawn_figure(draw: Callable[[Any], None], figure: Figure, height: float, title: str, stem: Path) -> DrawnFigure:
    """Draw one catalogued figure in memory: nothing is written yet."""
    width = COLUMN_WIDTH * figure.panels
    fig, axes = plt.subplots(figure.rows, figure.panels, figsize=(width, min(height, 9)), layout="constrained")
    try:
        draw(axes)
    except BaseException:
        plt.close(fig)
        raise
    fig.suptitle(textwrap.fill(title, max(int(TITLE_CHARS_PER_INCH * width), 30)), fontsize="medium")
    return DrawnFigure(fig, Path(stem))


def write_figures(drawn: list[DrawnFigure], temporaries: dict[Path, Path]) -> None:
    """Write each drawn figure as PNG (300 dpi) and PDF (no creation date: same bytes) to the
    temporaries of `files.written_together`, and close it."""
    for fig, stem in drawn:
        for suffix, options in ((".png", {"dpi": 300}), (".pdf", {"metadata": {"CreationDate": None}})):
            fig.savefig(temporaries[stem.with_suffix(suffix)], format=suffix[1:], **options)
        plt.close(fig)


def draw_sampling_variance(table: pd.DataFrame, out: Path, title: str) -> DrawnFigure:
    """The paper's sampling claim on real client updates: variance of the mean of J updates (drawn,
    for `theory` to write with its table)."""
    sns.set_theme(context="paper", style="whitegrid", font_scale=0.9, rc={"legend.fontsize": "small"})
    colours = dict(zip(("without replacement", "with replacement"), sns.color_palette("colorblind", 2), strict=True))

    def draw(ax: Axes) -> None:
        for sampling, rows in table.groupby("sampling"):
            colour = colours[sampling]
            shown = rows[rows.closed_form > 0]  # a log axis: J = C without replacement has variance 0
            ax.plot(shown.J, shown.closed_form, color=colour, label=f"{sampling}: paper's formula")
            drawn = rows[rows.drawn_mean > 0]
            ax.errorbar(
                drawn.J, drawn.drawn_mean, yerr=drawn.drawn_sd, fmt="o", ms=3, color=colour, label=f"{sampling}: drawn"
            )
        ax.set(xlabel="J (clients whose updates are averaged)", ylabel="E‖mean update − population mean‖²")
        ax.set_yscale("log")
        ax.text(0.02, 0.03, "J = C without replacement: 0 (off the log axis)", transform=ax.transAxes, fontsize=5)
        ax.legend(fontsize="x-small")

    figure = catalogued("sampling_variance")
    return drawn_figure(draw, figure, figure.height, heading(title, figure.title), Path(out) / figure.name)
