"""Dirichlet partitions: coverage, determinism, skew, min-size, errors."""

import hashlib
import json
import subprocess
import sys
import time

import numpy as np
import pytest

from asyncfl.cli import main
from asyncfl.data.partition import (
    DirichletSplit,
    class_counts,
    label_entropy,
    load_partition,
    partition_stats,
    save_partition,
)
from asyncfl.settings.errors import InputError

LABELS = np.repeat(np.arange(10), 500)  # 5,000 samples, 10 balanced classes


def partition(labels=LABELS, clients=20, alpha=0.5, seed=0, min_size=1):
    return DirichletSplit(clients, alpha, seed, min_size).partition(labels, "synthetic")[0]


@pytest.mark.parametrize("clients,alpha", [(1, 0.5), (7, 0.1), (20, 0.5), (100, 10.0)])
def test_every_index_exactly_once(clients, alpha):
    part = partition(clients=clients, alpha=alpha)
    assert part.indices.dtype == np.int64 and part.offsets.dtype == np.int64
    assert np.array_equal(np.sort(part.indices), np.arange(len(LABELS)))
    assert len(part.offsets) == clients + 1 and part.offsets[0] == 0 and part.offsets[-1] == len(LABELS)
    counts = class_counts(part, LABELS, 10)
    assert np.array_equal(counts.sum(axis=0), np.bincount(LABELS))
    assert np.array_equal(counts.sum(axis=1), part.sizes)
    for c in range(clients):  # grouped by client, ascending within a client
        assert np.all(np.diff(part.client_indices(c)) > 0)


def test_smaller_alpha_means_more_label_skew():
    entropy = {
        alpha: np.mean(
            [label_entropy(class_counts(partition(alpha=alpha, seed=s), LABELS, 10)).mean() for s in range(3)]
        )
        for alpha in (0.1, 0.5, 10)
    }
    assert entropy[0.1] < entropy[0.5] < entropy[10] < np.log2(10)
    assert entropy[10] > 3.0 and entropy[0.1] < 1.5


def test_label_entropy_closed_form():
    counts = np.array([[5, 5, 0, 0], [1, 1, 1, 1], [3, 0, 0, 0], [0, 0, 0, 0]])
    assert np.allclose(label_entropy(counts), [1.0, 2.0, 0.0, 0.0])


def test_seed_determines_the_partition():
    assert np.array_equal(partition(seed=3).indices, partition(seed=3).indices)
    assert not np.array_equal(partition(seed=3).indices, partition(seed=4).indices)


def test_min_size_is_honoured_by_redrawing():
    first = partition(clients=50, alpha=0.5, seed=0, min_size=0)
    assert first.sizes.min() < 30  # the first draw of this seed leaves a client short
    part, redraws = DirichletSplit(50, 0.5, 0, min_size=30).partition(LABELS, "synthetic")
    assert part.sizes.min() >= 30 and redraws > 0


def test_impossible_min_size_fails_after_bounded_redraws():
    with pytest.raises(InputError, match="no Dirichlet draw gave all 100 clients at least 49 samples in 1000 tries"):
        DirichletSplit(100, 0.05, 0, min_size=49).partition(LABELS, "synthetic")


@pytest.mark.parametrize(
    "clients,alpha,min_size,message",
    [
        (0, 0.5, 1, "clients must be at least 1"),
        (10, 0.0, 1, "alpha must be a finite number > 0"),
        (10, -1.0, 1, "alpha must be a finite number > 0"),
        (10, float("nan"), 1, "alpha must be a finite number > 0"),
        (10, float("inf"), 0, "alpha must be a finite number > 0"),  # was: a traceback with --min-size 0
        (5001, 0.5, 0, "5001 clients exceed the 5000 training samples"),
        (100, 0.5, 51, "min-size 51 is impossible"),
    ],
)
def test_bad_arguments_are_named(clients, alpha, min_size, message):
    with pytest.raises(InputError, match=message):
        DirichletSplit(clients, alpha, 0, min_size).partition(LABELS, "synthetic")


def test_save_and_load_round_trip(tmp_path):
    part = partition()
    stats = partition_stats(part, LABELS, 10, DirichletSplit(10, 0.5, 0, 1))
    save_partition(tmp_path / "p.npz", part, stats)
    loaded = load_partition(tmp_path / "p.npz")
    assert np.array_equal(loaded.indices, part.indices) and np.array_equal(loaded.offsets, part.offsets)
    assert loaded.dataset == "synthetic"
    # the statistics name the very .npz they describe (a .json beside another .npz is refused by its readers)
    npz_sha256 = hashlib.sha256((tmp_path / "p.npz").read_bytes()).hexdigest()
    assert json.loads((tmp_path / "p.json").read_text()) == {**stats, "npz_sha256": npz_sha256}


def test_cli_writes_byte_identical_files(tmp_path, capsys):
    args = ["partition", "--dataset", "digits", "--clients", "10", "--alpha", "0.5", "--seed", "7"]
    assert main([*args, "--out", str(tmp_path / "a.npz")]) == 0
    time.sleep(2.1)  # zip timestamps have 2 s resolution: identical bytes must not depend on the clock
    assert main([*args, "--out", str(tmp_path / "b.npz")]) == 0
    assert (tmp_path / "a.npz").read_bytes() == (tmp_path / "b.npz").read_bytes()
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    stats = json.loads((tmp_path / "a.json").read_text())
    assert (stats["dataset"], stats["clients"], stats["alpha"], stats["seed"]) == ("digits", 10, 0.5, 7)
    assert len(stats["class_counts"]) == 10 and sum(map(sum, stats["class_counts"])) == 1437
    out = capsys.readouterr().out
    assert "1437 samples into 10 clients" in out and "per-class counts" in out


@pytest.mark.subprocess
def test_cli_error_is_one_line_without_traceback(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "asyncfl",
            "partition",
            "--dataset",
            "digits",
            "--clients",
            "2000",
            "--alpha",
            "0.5",
            "--seed",
            "0",
            "--out",
            str(tmp_path / "p.npz"),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1
    assert result.stderr == (
        "asyncfl partition: error: 2000 clients exceed the 1437 training samples of digits; use at most 1437 clients\n"
    )
    assert not (tmp_path / "p.npz").exists()


def partition_cli(tmp_path, name: str, *extra: str) -> tuple[int, dict]:
    args = ["partition", "--dataset", "digits", "--clients", "5", "--alpha", "0.5", "--seed", "3"]
    code = main([*args, *extra, "--out", str(tmp_path / f"{name}.npz")])
    stats = json.loads((tmp_path / f"{name}.json").read_text()) if code == 0 else {}
    return code, stats


def test_a_subset_partition_draws_its_samples_by_the_seed_and_records_them(tmp_path):
    """A fraction or a count of the training set, seeded, partitioned in the training set's own indices;
    the file and its statistics say what it was drawn from; the same command gives the same bytes."""
    assert partition_cli(tmp_path, "quarter", "--subset-fraction", "0.25")[0] == 0
    assert partition_cli(tmp_path, "again", "--subset-fraction", "0.25")[0] == 0
    _, counted = partition_cli(tmp_path, "counted", "--subset-size", "359")
    quarter, stats = load_partition(tmp_path / "quarter.npz"), json.loads((tmp_path / "quarter.json").read_text())
    assert (tmp_path / "quarter.npz").read_bytes() == (tmp_path / "again.npz").read_bytes()
    assert len(quarter.indices) == len(np.unique(quarter.indices)) == round(0.25 * 1437) == 359
    assert quarter.indices.min() >= 0 and quarter.indices.max() < 1437 and quarter.subset_of == 1437
    assert stats["subset"] == {"of": 1437, "samples": 359, "fraction": 0.25, "size": None}
    assert stats["num_samples"] == sum(stats["sizes"]) == 359
    assert np.array_equal(np.sort(load_partition(tmp_path / "counted.npz").indices), np.sort(quarter.indices))
    assert counted["subset"]["size"] == 359
    for c in range(quarter.num_clients):  # ascending within a client, as in a full partition
        assert np.all(np.diff(quarter.client_indices(c)) > 0)
    _, full = partition_cli(tmp_path, "full")
    assert "subset" not in full and "subset_of" not in np.load(tmp_path / "full.npz").files


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--subset-fraction", "0"], "--subset-fraction must be in (0, 1], got 0.0"),
        (["--subset-fraction", "1.5"], "--subset-fraction must be in (0, 1], got 1.5"),
        (["--subset-size", "5000"], "a subset of 5000 samples is impossible: the training set has 1437"),
    ],
)
def test_an_impossible_subset_is_one_line(tmp_path, capsys, extra, message):
    assert partition_cli(tmp_path, "bad", *extra)[0] == 1
    assert message in capsys.readouterr().err and not (tmp_path / "bad.npz").exists()


@pytest.mark.parametrize("clients,alpha", [(7, 0.1), (20, 0.5), (1000, 0.5), (5000, 1.0)])
def test_equal_sizes_give_every_client_the_same_count_each_sample_at_most_once(clients, alpha):
    part = DirichletSplit(clients, alpha, 0, equal_sizes=True).partition(LABELS, "synthetic")[0]
    assert set(part.sizes) == {len(LABELS) // clients}
    assert len(np.unique(part.indices)) == len(part.indices) == len(LABELS) // clients * clients
    assert part.subset_of == (len(LABELS) if len(LABELS) % clients else None)  # the few left over stay out


def test_equal_sizes_keep_the_label_skew_of_alpha():
    def entropy(alpha: float) -> float:
        part = DirichletSplit(50, alpha, 0, equal_sizes=True).partition(LABELS, "synthetic")[0]
        return float(label_entropy(class_counts(part, LABELS, 10)).mean())

    assert entropy(0.1) < entropy(1.0) < entropy(100.0) and entropy(100.0) > 3.0


def test_equal_sizes_are_drawn_by_the_seed_and_written_as_such(tmp_path, capsys):
    args = ["partition", "--dataset", "digits", "--clients", "1000", "--alpha", "0.5", "--seed", "3"]
    args += ["--sizes", "equal"]
    assert main([*args, "--out", str(tmp_path / "a.npz")]) == 0
    assert main([*args, "--out", str(tmp_path / "b.npz")]) == 0
    assert (tmp_path / "a.npz").read_bytes() == (tmp_path / "b.npz").read_bytes()
    stats = json.loads((tmp_path / "a.json").read_text())
    assert stats["equal_sizes"] is True and set(stats["sizes"]) == {1} and stats["clients"] == 1000
    assert load_partition(tmp_path / "a.npz").subset_of == 1437


@pytest.mark.parametrize(
    ("clients", "min_size", "message"),
    [(2000, 1, "2000 clients exceed the 1437 training samples"), (700, 3, "equal sizes give each of 700 clients 2")],
)
def test_equal_sizes_the_data_cannot_give_are_one_line(tmp_path, capsys, clients, min_size, message):
    args = ["partition", "--dataset", "digits", "--clients", str(clients), "--alpha", "0.5", "--seed", "0"]
    assert main([*args, "--sizes", "equal", "--min-size", str(min_size), "--out", str(tmp_path / "p.npz")]) != 0
    error = capsys.readouterr().err.strip()
    assert message in error and len(error.splitlines()) == 1 and not (tmp_path / "p.npz").exists()
