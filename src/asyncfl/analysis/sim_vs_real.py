"""The simulator against measured execution (docs/clocks.md "Measured durations"): a run on the real clock
with measured durations is replayed on the virtual clock with each dispatch's measured training, and the
two are compared: the order of arrivals, the staleness the server saw, and test accuracy over time.

What the replay leaves out is what the simulator assumes away: a client waiting for a free worker, the
server's own time (aggregating, scoring, dispatching) and the event loop's delays. What it keeps is each
dispatch's compute as the machine took it, so where the two differ, those are the reasons.
"""

import dataclasses
import math
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from scipy import stats

from asyncfl.analysis.figures import TITLE_CHARS_PER_INCH, DrawnFigure, write_figures
from asyncfl.data.partition import load_partition
from asyncfl.files import sha256, written_together
from asyncfl.launch import dataset_once
from asyncfl.planning.layout import CHECKPOINT, EVENTS, METRICS, RUN_RECORD, WALL
from asyncfl.runs.record import verify_run_files
from asyncfl.settings.catalogue import catalogued
from asyncfl.settings.config import TrainConfig, config_dict, make_config
from asyncfl.settings.errors import InputError
from asyncfl.sim.client_system import ReplayedCompute
from asyncfl.sim.engine import Simulation

# The table's columns, one row per measured run (docs/clocks.md "The simulator against measured runs")
COLUMNS = (
    "run",
    "algorithm",
    "clients",
    "arrivals",
    "same_position",
    "rank_correlation",
    "staleness_ks",
    "staleness_p",
    "virtual_time_real",
    "virtual_time_replay",
    "accuracy_real",
    "accuracy_replay",
    "replay_estimated",
    "worker_wait",
    "late_batches",
)
FIGURE = catalogued("sim_vs_real")
MACHINE_ONLY = ("clock", "time_scale", "client_workers", "durations")  # what the replay leaves at its default


def measured_run(run: Path) -> tuple[dict, TrainConfig, pd.DataFrame]:
    """A finished measured run's record, config and wall.csv, each checked against its run.json."""
    if not (run / WALL).exists():
        raise InputError(f"{run} has no {WALL}: only a run with clock: real and durations: measured can be replayed")
    record = verify_run_files(run, (EVENTS, METRICS, WALL))
    config = make_config(record["config"], str(run / RUN_RECORD))
    if config.clock != "real" or config.durations != "measured":
        raise InputError(
            f"{run / RUN_RECORD}: clock {config.clock}, durations {config.durations}: only a run with clock: real and "
            "durations: measured can be replayed (a paced run is its virtual twin already)"
        )
    wall = pd.read_csv(run / WALL)
    numbers = wall[["trained_from", "trained_to"]].to_numpy(dtype=float)
    if wall.empty or not np.isfinite(numbers).all() or (numbers[:, 1] < numbers[:, 0]).any():
        raise InputError(f"{run / WALL}: no trainings, or one that ends before it begins; train the run again")
    return record, config, wall


def replayed_compute(config: TrainConfig, wall: pd.DataFrame, speed: np.ndarray) -> ReplayedCompute:
    """Each dispatch's compute as the measured run took it, without its waits: its training's wall time ×
    its client's slowness against the fastest, in virtual seconds."""
    slowness = speed.max() / speed
    trained = (wall.trained_to - wall.trained_from) * slowness[wall.client.to_numpy()] / config.time_scale
    keys = zip(wall.client.astype(int), wall.dispatch_index.astype(int), strict=True)
    return ReplayedCompute({key: float(seconds) for key, seconds in zip(keys, trained, strict=True)})


def replay(run: Path, partition_path: Path, out: Path, root: Path | None = None) -> Path:
    """Replay the measured run `run` on the virtual clock into `out` (made afresh): its settings but the
    machine's, its dispatches' measured compute. `partition_path` must be the file the run trained on."""
    record, config, wall = measured_run(run)
    if sha256(partition_path) != record["partition_sha256"]:
        raise InputError(f"{partition_path} is not the partition {run} trained on (SHA-256 differs from its run.json)")
    values = {key: value for key, value in config_dict(config).items() if key not in MACHINE_ONLY}
    virtual = make_config(values, f"{run / RUN_RECORD} (replayed)")
    data, partition = dataset_once(record["dataset"], root), load_partition(partition_path)
    simulation = Simulation(virtual, data, partition, out, record["partition_sha256"])
    system = simulation.context.system
    compute = replayed_compute(config, wall, system.speed)
    simulation.context = dataclasses.replace(simulation.context, system=dataclasses.replace(system, replayed=compute))
    for name in (EVENTS, METRICS, RUN_RECORD, CHECKPOINT):  # afresh: never a resume of another replay
        (out / name).unlink(missing_ok=True)
    simulation.run()
    return out


def arrivals(events: pd.DataFrame) -> pd.DataFrame:
    """The run's arrivals in the order the server took them, each keyed by (client, its dispatch's index
    among the client's)."""
    ordered = events.sort_values(["arrival_time", "client", "dispatch_time"], kind="stable")
    by_dispatch = ordered.sort_values(["client", "dispatch_time"], kind="stable")
    index = by_dispatch.groupby("client").cumcount()
    return ordered.assign(dispatch_index=index.reindex(ordered.index)).reset_index(drop=True)


def compared(name: str, real: Path, replayed: Path) -> dict:
    """One row of the table: how the replay's arrivals, staleness and accuracy match the measured run's."""
    record = verify_run_files(real, (EVENTS, WALL))
    config = make_config(record["config"], str(real / RUN_RECORD))
    verify_run_files(replayed, (EVENTS, METRICS))
    ours, theirs = (arrivals(pd.read_csv(folder / EVENTS)) for folder in (real, replayed))
    wall = pd.read_csv(real / WALL)
    keys = [list(zip(frame.client, frame.dispatch_index, strict=True)) for frame in (ours, theirs)]
    shared = min(len(keys[0]), len(keys[1]))
    same = sum(a == b for a, b in zip(keys[0][:shared], keys[1][:shared], strict=True)) / shared
    rank_of = {key: rank for rank, key in enumerate(keys[1])}
    common = [(rank, rank_of[key]) for rank, key in enumerate(keys[0]) if key in rank_of]
    rho = stats.spearmanr(*zip(*common, strict=True)).statistic if len(common) > 2 else math.nan
    ks = stats.ks_2samp(ours.staleness, theirs.staleness, method="asymp")  # τ is discrete: conservative
    metrics = [pd.read_csv(folder / METRICS) for folder in (real, replayed)]
    estimated = sum(key not in set(keys[0]) for key in keys[1]) / len(keys[1])
    return {
        "run": name,
        "algorithm": config.algorithm,
        "clients": int(ours.client.max()) + 1,
        "arrivals": len(keys[0]),
        "same_position": round(same, 4),
        "rank_correlation": round(float(rho), 4),
        "staleness_ks": round(float(ks.statistic), 4),
        "staleness_p": float(f"{ks.pvalue:.3g}"),
        "virtual_time_real": round(float(metrics[0].virtual_time.iloc[-1]), 3),
        "virtual_time_replay": round(float(metrics[1].virtual_time.iloc[-1]), 3),
        "accuracy_real": round(float(metrics[0].test_accuracy.dropna().iloc[-1]), 4),
        "accuracy_replay": round(float(metrics[1].test_accuracy.dropna().iloc[-1]), 4),
        "replay_estimated": round(estimated, 4),
        # what the replay leaves out: the mean wall seconds a trained client waited for a free worker, and
        # the event batches the server reached late (busy with its own work)
        "worker_wait": round(float((wall.trained_from - wall.downloaded).mean()), 4),
        "late_batches": int((record.get("clock") or {}).get("late_batches", 0)),
    }


def draw(pairs: dict[str, tuple[Path, Path]], table: pd.DataFrame) -> Figure:
    """Per measured run, a column: test accuracy over virtual time (measured and replayed), and each
    one's staleness histogram."""
    figure = Figure(figsize=(3.2 * len(pairs), 5.6), layout="constrained")
    axes = figure.subplots(2, len(pairs), squeeze=False)
    for column, (name, (real, replayed)) in enumerate(pairs.items()):
        row = table.set_index("run").loc[name]
        over_time, staleness = axes[0, column], axes[1, column]
        for folder, label, style in ((real, "measured", "-"), (replayed, "replayed (simulator)", "--")):
            metrics = pd.read_csv(folder / METRICS).dropna(subset=["test_accuracy"])
            over_time.plot(metrics.virtual_time, metrics.test_accuracy, style, label=label)
        over_time.set(title=f"{name}\nsame position {row.same_position:.0%}, ρ {row.rank_correlation:.2f}",
                      xlabel="virtual time (s)", ylabel="test accuracy")  # fmt: skip
        frames = [pd.read_csv(folder / EVENTS).staleness for folder in (real, replayed)]
        bins = np.arange(max(int(frame.max()) for frame in frames) + 2) - 0.5
        staleness.hist(frames, bins=bins, label=["measured", "replayed"], density=True)
        staleness.set(title=f"staleness: KS {row.staleness_ks:.2f} (p {row.staleness_p:.2g})", xlabel="τ",
                      ylabel="share of updates")  # fmt: skip
    axes[0, 0].legend(fontsize="small")
    return figure


def run_names(runs: list[Path]) -> list[str]:
    """Each run's shortest trailing path that no other run shares (`afl/J5/seed0` beside `sync/J5/seed0`):
    its column's title, its row's name and its replay's folder."""
    for depth in range(1, max(len(run.parts) for run in runs) + 1):
        names = ["/".join(run.parts[-depth:]) for run in runs]
        if len(set(names)) == len(names):
            return names
    raise InputError(f"a run folder is given twice ({', '.join(map(str, runs))}); give each once")


def sim_vs_real(
    runs: list[Path],
    partitions: list[Path],
    out: Path,
    root: Path | None = None,
    replays: Path | None = None,
    title: str | None = None,
) -> pd.DataFrame:
    """Replay each measured run (`runs[i]` on `partitions[i]`) into `replays` (default `out/replays/`), and
    write `out/sim_vs_real.csv`, `.png` and `.pdf` together (`files.written_together`), the figure titled
    `title: ` and the catalogue's title; the table is returned."""
    if len(runs) != len(partitions) or not runs:
        raise InputError(
            f"--runs and --partitions: give one partition per run, in order ({len(runs)} runs, {len(partitions)} "
            "partitions)"
        )
    names = run_names(runs)
    replays = out / "replays" if replays is None else replays
    pairs = {
        name: (run, replay(run, partition, replays / name, root))
        for name, run, partition in zip(names, runs, partitions, strict=True)
    }
    table = pd.DataFrame([compared(name, *pair) for name, pair in pairs.items()], columns=list(COLUMNS))
    figure, stem = draw(pairs, table), out / FIGURE.key
    heading = FIGURE.title if title is None else f"{title}: {FIGURE.title}"
    figure.suptitle(textwrap.fill(heading, max(int(TITLE_CHARS_PER_INCH * figure.get_figwidth()), 30)))
    with written_together([stem.with_suffix(suffix) for suffix in (".csv", ".png", ".pdf")]) as temporaries:
        table.to_csv(temporaries[stem.with_suffix(".csv")], index=False)
        write_figures([DrawnFigure(figure, stem)], temporaries)
    return table
