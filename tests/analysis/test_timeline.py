"""The system timeline: the offline periods it recomputes are the ones the run saw, and every dispatch
in its window is drawn as its phases."""

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_rgba

from asyncfl.analysis.figures import load_runs
from asyncfl.analysis.timeline import PHASE_COLOURS, offline_periods, segments, system_timeline, window_end
from asyncfl.runs.record import read_run_record
from asyncfl.settings.config import make_config
from asyncfl.settings.errors import InputError
from asyncfl.sim.engine import Simulation
from engine_cases import contiguous_partition, tiny_dataset

SIZES = [4, 8, 12, 8, 6]
WORLD = {
    "clients_per_round": 2,
    "rounds": 12,
    "local_epochs": 1,
    "batch_size": 4,
    "seconds_per_sample": 0.05,
    "availability": "exponential",
    "online_mean": 2.0,
    "offline_mean": 1.0,
    "failure_probability": 0.1,
    "bandwidth_median": 0.5,
}
STATS = {"dataset": "tiny", "clients": len(SIZES), "alpha": 0.5, "seed": 0, "class_counts": [[1]] * len(SIZES)}


def train(runs: Path, algorithm: str, **settings) -> Path:
    folder = runs / algorithm / "J2" / "seed0"
    values = {**WORLD, "algorithm": algorithm, **settings}
    if values["availability"] == "trace":  # the periods are the trace's
        del values["online_mean"], values["offline_mean"]
    config = make_config(values)
    Simulation(config, tiny_dataset(sum(SIZES)), contiguous_partition(SIZES), folder).run()
    return folder


def test_offline_periods_are_those_the_run_saw(tmp_path):
    """No aggregated dispatch overlaps its client's offline periods, as the figure recomputes them, before
    its upload ended (the latency after it may: the server has the update), and every dispatch lost
    offline ends exactly where one of them begins."""
    folder = train(tmp_path, "afl")
    events = pd.read_csv(folder / "events.csv")
    periods = offline_periods(folder, read_run_record(folder), len(SIZES), float(events.arrival_time.max()))
    delivered, offline = events[events.lost.isna()], events[events.lost == "offline"]
    assert len(offline) > 3 and sum(len(p) for p in periods) > 3
    for row in delivered.itertuples():
        for start, length in periods[row.client]:
            uploaded = row.dispatch_time + (row.download_seconds + row.compute_seconds + row.upload_seconds)
            assert uploaded <= start or start + length <= row.dispatch_time, row
    for row in offline.itertuples():
        assert row.arrival_time in {start for start, _ in periods[row.client]}, row


def test_a_trace_other_than_the_runs_is_refused(tmp_path):
    trace = tmp_path / "trace.csv"
    trace.write_text("client,start,end\n" + "".join(f"{c},0,{40 + c}\n{c},46,900\n" for c in range(len(SIZES))))
    settings = {"availability": "trace", "availability_trace": str(trace)}
    folder = train(tmp_path / "runs", "sync", **settings)
    periods = offline_periods(folder, read_run_record(folder), len(SIZES), 50.0)
    assert periods[0] == [(40.0, 6.0)] and periods[4] == [(44.0, 2.0)]
    trace.write_text(trace.read_text().replace("900", "800"))
    with pytest.raises(InputError, match="is not the trace .* was trained on"):
        offline_periods(folder, read_run_record(folder), len(SIZES), 50.0)


def test_phases_follow_one_another_and_stop_where_a_lost_dispatch_ended():
    dispatches = pd.DataFrame(
        {
            "client": [0, 1],
            "dispatch_time": [1.0, 2.0],
            "arrival_time": [5.5, 2.7],  # the second was lost 0.7 s in, during its compute
            "download_seconds": [0.5, 0.5],
            "compute_seconds": [1.0, 1.0],
            "upload_seconds": [2.0, 2.0],
        }
    )
    parts = segments(dispatches)
    assert parts["download_seconds"].start.tolist() == [1.0, 2.0]
    assert parts["compute_seconds"].start.tolist() == [1.5, 2.5]
    assert parts["upload_seconds"].start.tolist() == [2.5, 2.7]
    assert parts["compute_seconds"].length.tolist() == pytest.approx([1.0, 0.2])
    assert parts["upload_seconds"].length.tolist() == pytest.approx([2.0, 0.0])
    assert parts["latency"].length.tolist() == pytest.approx([1.0, 0.0])  # 5.5 − 1 − 0.5 − 1 − 2
    without_links = segments(dispatches.drop(columns=["download_seconds", "compute_seconds", "upload_seconds"]))
    assert list(without_links) == ["whole"] and without_links["whole"].length.tolist() == pytest.approx([4.5, 0.7])


def test_the_window_holds_the_slowest_algorithms_first_rounds():
    rows = [("afl", t, "") for t in range(1, 40)] + [("sync", 2 * t, "") for t in range(1, 40)]
    dispatches = pd.DataFrame(rows + [("sync", 1, "offline")], columns=["algorithm", "arrival_time", "lost"])
    assert window_end(dispatches, 2) == 20.0  # sync's 10th update aggregated (5 rounds × J = 2); losses skipped
    assert window_end(dispatches, 2, day=True) == 78.0  # a day's rhythm: the runs' end, sooner than a day
    later = pd.concat([dispatches, pd.DataFrame([("afl", 200_000.0, "")], columns=dispatches.columns)])
    assert window_end(later, 2, day=True) == 86_400.0  # or the first virtual day


def test_every_dispatch_in_the_window_is_drawn(tmp_path):
    """From real runs with the whole world on: per panel, one compute bar per dispatch started in the window."""
    folders = [train(tmp_path / "runs", algorithm) for algorithm in ("afl", "sync")]
    loaded = load_runs(folders, {"": STATS})
    fig, axes = plt.subplots(2, 2)
    records = {algorithm: loaded.records[algorithm, 2, 0] for algorithm in ("afl", "sync")}
    system_timeline(axes, loaded.dispatches, loaded.metrics, records, 2, len(SIZES))
    until = window_end(loaded.dispatches, 2)
    compute = to_rgba(PHASE_COLOURS["compute_seconds"][1])
    for ax, algorithm in zip(axes.ravel()[:2], ("afl", "sync"), strict=True):
        started = loaded.dispatches[
            (loaded.dispatches.algorithm == algorithm) & (loaded.dispatches.dispatch_time < until)
        ]
        bars = [
            len(collection.get_paths())
            for collection in ax.collections
            if np.allclose(collection.get_facecolor()[0][:3], compute[:3])
        ]
        assert sum(bars) == len(started) > 10
    assert "not run" in axes[1, 0].texts[0].get_text()  # FedAsync: no run given
    plt.close(fig)


def test_a_day_rhythm_shows_the_virtual_clocks_hour(tmp_path):
    folder = train(tmp_path / "runs", "afl", availability="diurnal", online_mean=1.0, offline_mean=4.0)
    loaded = load_runs([folder], {"": STATS})
    fig, axes = plt.subplots(2, 2)
    system_timeline(axes, loaded.dispatches, loaded.metrics, {"afl": loaded.records["afl", 2, 0]}, 2, len(SIZES))
    labels = [child.get_xlabel() for child in axes[0, 0].child_axes]
    assert labels == ["Virtual hour of day (the population most online at 00h)"]
    plt.close(fig)
