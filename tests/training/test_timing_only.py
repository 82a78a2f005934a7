"""`trainer: none`: a timing-only run has a trained run's clock, dispatches, staleness and world exactly,
and trains and scores nothing."""

import json
import subprocess
import sys

import pytest

from asyncfl.settings.config import make_config
from asyncfl.settings.errors import InputError
from asyncfl.sim.engine import Simulation
from engine_cases import contiguous_partition, read_csv, tiny_dataset

SIZES = [6, 9, 12, 7, 10, 8, 11, 5]
# What the clock decides, in events.csv and metrics.csv: every column but what training makes
TIMING_EVENTS = ("round", "client", "dispatch_version", "dispatch_time", "arrival_time", "staleness", "n_samples",
                 "samples_trained")  # fmt: skip
TIMING_METRICS = ("round", "virtual_time", "mean_staleness", "max_staleness")
# Every part of the clients' world that shapes a dispatch's time or fate
WORLD = {
    "bandwidth_median": 5.0,
    "server_bandwidth": 20.0,
    "availability": "lognormal",
    "online_mean": 3.0,
    "offline_mean": 1.0,
    "failure_probability": 0.1,
    "jitter_distribution": "exponential",
    "local_epochs": 2,
}


def run_pair(tmp_path, **settings):
    """The same run trained (plain) and timing-only: both folders' logs."""
    logs = []
    for trainer in ("plain", "none"):
        out = tmp_path / trainer
        config = make_config({"rounds": 12, "clients_per_round": 3, "trainer": trainer, **settings})
        Simulation(config, tiny_dataset(sum(SIZES)), contiguous_partition(SIZES), out).run()
        logs.append((read_csv(out / "events.csv"), read_csv(out / "metrics.csv"), out))
    return logs


def columns(rows, names):
    return [{name: row[name] for name in names if name in row} for row in rows]


@pytest.mark.parametrize(
    "settings",
    [
        {"algorithm": "afl"},
        {"algorithm": "fedbuff", "buffer_size": 2, "concurrency": 5, **WORLD},
        {"algorithm": "fedasync", "max_staleness": 2, "concurrency": 6, "arrivals": "poisson", "checkin_rate": 3.0},
        {"algorithm": "sync", "over_selection": 0.5, "round_deadline": 4.0, "min_report_fraction": 0.5, **WORLD},
        {"algorithm": "fedcompass", "speed_sigma": 1.0, "local_epochs": 2},
        {
            "algorithm": "sync",
            "round_deadline": 0.8,
            "min_report_fraction": 0.6,
            "partial_work": True,
            "speed_sigma": 1.0,
            "local_epochs": 3,
        },
    ],
    ids=["afl", "fedbuff-world", "fedasync-capped-open-loop", "sync-deadline-world", "fedcompass", "partial-work"],
)
def test_a_timing_only_run_has_its_trained_twins_clock_exactly(tmp_path, settings):
    (events, metrics, _), (timed_events, timed_metrics, timed) = run_pair(tmp_path, **settings)
    phases = [name for name in ("download_seconds", "compute_seconds", "upload_seconds", "lost") if name in events[0]]
    assert columns(timed_events, TIMING_EVENTS + tuple(phases)) == columns(events, TIMING_EVENTS + tuple(phases))
    if "samples_trained" in events[0]:  # the samples each dispatch was given, trained or not (issue 94)
        assert any(row["samples_trained"] not in ("", "0") for row in timed_events)
    assert columns(timed_metrics, TIMING_METRICS) == columns(metrics, TIMING_METRICS)
    trained_rows = [row for row in timed_events if row.get("lost", "") == ""]
    assert trained_rows and all(row["train_loss"] == row["epochs_run"] == row["lr"] == "" for row in trained_rows)
    assert all(row["test_accuracy"] == row["train_loss"] == row["update_norm"] == "" for row in timed_metrics)
    assert any(row["test_accuracy"] for row in metrics)  # the trained twin was scored: the columns exist
    assert json.loads((timed / "run.json").read_text())["config"]["trainer"] == "none"


def test_a_timing_only_run_copies_no_image_and_keeps_its_initial_model(tmp_path):
    config = make_config({"rounds": 3, "clients_per_round": 2, "trainer": "none"})
    simulation = Simulation(config, tiny_dataset(sum(SIZES)), contiguous_partition(SIZES), tmp_path / "run")
    assert simulation.context.train_images.numel() == simulation.context.test_images.numel() == 0
    initial = {name: value.clone() for name, value in simulation.state.global_model.items()}
    simulation.run()
    import torch

    final = torch.load(tmp_path / "run" / "model.pt", weights_only=True)
    assert final.keys() == initial.keys() and all(torch.equal(final[k], initial[k]) for k in initial)


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        ({"gamma0": 0.01}, "gamma0"),
        ({"batch_size": 8}, "batch_size"),
        ({"kappa": 0.1}, "kappa"),
        ({"eval_gradient": False}, "eval_gradient"),
        ({"staleness": "constant"}, "staleness"),
        ({"profile": "fast"}, "profile"),
    ],
)
def test_a_setting_only_training_reads_is_refused_in_a_timing_only_run(settings, key):
    with pytest.raises(InputError, match=rf"{key} is read only by training.*trainer: none trains nothing"):
        make_config({"trainer": "none", **settings})


def test_fedadam_names_its_optimizer_and_times_without_training():
    assert make_config({"trainer": "none", "algorithm": "fedadam"}).server_optimizer == "adam"


@pytest.mark.subprocess
def test_asyncfl_train_runs_timing_only_from_the_command_line(tmp_path):
    from asyncfl.data.loading import load_dataset
    from asyncfl.data.partition import DirichletSplit, partition_stats, save_partition

    labels = load_dataset("digits").train_labels.numpy()
    split = DirichletSplit(10, 0.5, 0)
    partition, _ = split.partition(labels, "digits")
    save_partition(tmp_path / "digits.npz", partition, partition_stats(partition, labels, 10, split))
    command = [
        sys.executable, "-m", "asyncfl", "train", "--dataset", "digits", "--partition", str(tmp_path / "digits.npz"),
        "--out", str(tmp_path / "out"), "--rounds", "20", "--settings", '{"trainer": "none"}',
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "20 rounds (rounds)" in done.stdout
    assert len(read_csv(tmp_path / "out" / "metrics.csv")) == 20
