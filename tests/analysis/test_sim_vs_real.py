"""The simulator against measured execution: a run with measured durations, replayed on the virtual clock
with each dispatch's measured training, compared arrival by arrival (`asyncfl sim-vs-real`)."""

import csv
import json
from pathlib import Path

import pandas as pd
import pytest

from asyncfl import api
from asyncfl.analysis.sim_vs_real import COLUMNS, arrivals, compared, run_names, sim_vs_real
from asyncfl.cli import main
from asyncfl.settings.errors import InputError

# 1 virtual second is 50 ms of wall time: a run of ~6 virtual s is measured over about a third of a second
MEASURED = {"algorithm": "afl", "rounds": 5, "local_epochs": 1, "clients_per_round": 3, "model": "mlp",
            "clock": "real", "durations": "measured", "time_scale": 0.05}  # fmt: skip


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """A measured run on digits, its partition, and its sim-vs-real folder."""
    folder = tmp_path_factory.mktemp("measured")
    partition = api.partition("digits", clients=10, alpha=0.5, seed=0, out=folder / "p.npz")
    api.train("digits", partition, folder / "afl", MEASURED)
    table = sim_vs_real([folder / "afl"], [partition], folder / "compared")
    return folder, partition, table


def test_the_replay_times_each_dispatch_by_the_training_the_measured_run_logged(measured):
    """Without links a dispatch is its compute and its latency: in the replay, the compute is the logged
    training × the client's slowness, for every dispatch the measured run made."""
    folder, _, _ = measured
    replay = folder / "compared" / "replays" / "afl"
    record = json.loads((replay / "run.json").read_text())
    assert record["config"]["clock"] == "virtual" and "clock" not in record
    with (folder / "afl" / "wall.csv").open() as handle:
        trained = {(int(r["client"]), int(r["dispatch_index"])): r for r in csv.DictReader(handle)}
    events = arrivals(pd.read_csv(replay / "events.csv"))
    matched = [row for row in events.itertuples() if (row.client, row.dispatch_index) in trained]
    assert len(matched) >= len(events) // 2
    for row in matched:
        wall = trained[row.client, row.dispatch_index]
        training = (float(wall["trained_to"]) - float(wall["trained_from"])) / MEASURED["time_scale"]
        assert row.arrival_time - row.dispatch_time > training  # compute ≥ the training, latency on top


def test_a_run_compared_with_itself_agrees_everywhere(measured):
    folder, _, _ = measured
    row = compared("self", folder / "afl", folder / "afl")
    assert (row["same_position"], row["rank_correlation"], row["staleness_ks"], row["replay_estimated"]) == (1, 1, 0, 0)
    assert row["accuracy_real"] == row["accuracy_replay"] and row["virtual_time_real"] == row["virtual_time_replay"]


def test_the_table_and_figure_say_how_close_the_simulator_came(measured):
    folder, _, table = measured
    assert list(table.columns) == list(COLUMNS) and len(table) == 1
    row = table.iloc[0]
    assert 0 <= row.same_position <= 1 and -1 <= row.rank_correlation <= 1 and 0 <= row.staleness_ks <= 1
    assert row.arrivals == 5 * 3 and row.algorithm == "afl" and row.clients == 10
    assert (folder / "compared" / "sim_vs_real.png").stat().st_size > 10_000
    assert (folder / "compared" / "sim_vs_real.pdf").stat().st_size > 0
    assert pd.read_csv(folder / "compared" / "sim_vs_real.csv").equals(table)


def test_what_cannot_be_replayed_is_one_line(measured, tmp_path, capsys):
    folder, partition, _ = measured
    paced = {**MEASURED, "durations": "paced"}
    api.train("digits", partition, tmp_path / "paced", paced)
    other = api.partition("digits", clients=10, alpha=0.5, seed=1, out=tmp_path / "other.npz")
    cases = {
        "paced": (tmp_path / "paced", partition, "only a run with clock: real and durations: measured"),
        "partition": (folder / "afl", other, "is not the partition"),
        "missing": (tmp_path / "nowhere", partition, "has no wall.csv"),
    }
    capsys.readouterr()  # the paced run's own lines
    for name, (run, part, message) in cases.items():
        argv = ["sim-vs-real", "--runs", str(run), "--partitions", str(part), "--out", str(tmp_path / f"{name}-out")]
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, (name, err)
    with pytest.raises(InputError, match="one partition per run"):
        sim_vs_real([folder / "afl"], [], tmp_path / "none")


def test_each_run_is_named_by_its_shortest_tail_no_other_run_shares():
    """The names of the table's rows, the figure's columns and the replays' folders."""
    runs = [Path("results/x/runs/afl/J5/seed0"), Path("results/x/runs/sync/J5/seed0")]
    assert run_names(runs) == ["afl/J5/seed0", "sync/J5/seed0"]
    assert run_names([Path("one/afl"), Path("two/sync")]) == ["afl", "sync"]
    with pytest.raises(InputError, match="given twice"):
        run_names([Path("a/afl"), Path("a/afl")])
