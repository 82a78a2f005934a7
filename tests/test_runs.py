"""A run folder has one owner at a time, a finished run is not retrained, and run.json never
contradicts the CSVs beside it: through the real command, concurrently where it matters."""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from asyncfl.cli import main
from conftest import ENV, REPO

OUTPUTS = ("metrics.csv", "events.csv", "model.pt", "run.json")
SETTINGS = '{"eval_every": 2, "checkpoint_every": 2, "gamma0": 0.01}'


def train_argv(partition: Path, out: Path, rounds: int = 4, *extra: str) -> list[str]:
    return [
        "train", "--dataset", "digits", "--partition", str(partition), "--algorithm", "afl",
        "--clients-per-round", "3", "--rounds", str(rounds), "--local-epochs", "2", "--seed", "0",
        "--settings", SETTINGS, "--out", str(out), *extra,
    ]  # fmt: skip


@pytest.fixture(scope="module")
def partition(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("partition") / "part.npz"
    argv = ["partition", "--dataset", "digits", "--clients", "6", "--alpha", "0.5", "--seed", "0", "--out", str(path)]
    assert main(argv) == 0
    return path


@pytest.fixture(scope="module")
def lone_run(partition, tmp_path_factory) -> dict[str, bytes]:
    """The outputs of one uninterrupted run, the reference every other case must reproduce."""
    out = tmp_path_factory.mktemp("lone") / "run"
    assert main(train_argv(partition, out, 30)) == 0
    return {name: (out / name).read_bytes() for name in OUTPUTS if name != "run.json"}


def rows(path: Path) -> int | None:
    try:
        return len(path.read_text().splitlines())
    except FileNotFoundError:
        return None


def outputs(out: Path) -> dict[str, bytes]:
    return {name: (out / name).read_bytes() for name in OUTPUTS if name != "run.json"}


def test_two_concurrent_commands_one_proceeds_and_matches_a_lone_run(partition, lone_run, tmp_path):
    out = tmp_path / "run"
    command = [sys.executable, "-m", "asyncfl", *train_argv(partition, out, 30)]
    first = subprocess.Popen(command, cwd=REPO, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (out / "metrics.csv").exists() and time.monotonic() < deadline:  # the first owns the folder
        time.sleep(0.05)
    second = subprocess.run(command, cwd=REPO, env=ENV, capture_output=True, text=True, timeout=600)
    first_out, first_err = first.communicate(timeout=600)
    assert first.returncode == 0, first_err
    assert second.returncode == 1, second.stderr
    line = second.stderr.strip()
    assert len(line.splitlines()) == 1 and line.startswith("asyncfl train: error: ")
    assert f"{out} is in use by pid {first.pid} on {socket.gethostname()}" in line
    assert outputs(out) == lone_run
    metrics = (out / "metrics.csv").read_text().splitlines()
    assert [row.split(",")[0] for row in metrics[1:]] == [str(r) for r in range(1, 31)]


def test_a_finished_run_is_not_retrained(partition, lone_run, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(train_argv(partition, out, 30)) == 0
    before = {name: (out / name).stat().st_mtime_ns for name in OUTPUTS}
    capsys.readouterr()
    assert main(train_argv(partition, out, 30)) == 0
    assert "already finished" in capsys.readouterr().out
    assert {name: (out / name).stat().st_mtime_ns for name in OUTPUTS} == before
    assert outputs(out) == lone_run


def test_a_finished_run_with_other_settings_needs_force(partition, lone_run, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(train_argv(partition, out, 30)) == 0
    old_run_json = (out / "run.json").read_text()
    capsys.readouterr()
    assert main(train_argv(partition, out, 3)) == 1
    err = capsys.readouterr().err
    assert "holds a finished run with other settings" in err and "--force" in err
    assert (out / "run.json").read_text() == old_run_json  # nothing touched
    assert main(train_argv(partition, out, 30, "--force")) == 0
    moved = [p for p in (out / "replaced").iterdir()]
    assert len(moved) == 1 and (moved[0] / "run.json").read_text() == old_run_json
    assert outputs(out) == lone_run


def test_outputs_that_contradict_run_json_are_never_taken_as_finished(partition, lone_run, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(train_argv(partition, out, 30)) == 0
    with open(out / "metrics.csv", "a") as stream:
        stream.write("31,1.0,,,,,,,\n")
    capsys.readouterr()
    assert main(train_argv(partition, out, 30)) == 1
    assert "do not match the hashes in its run.json" in capsys.readouterr().err
    assert main(train_argv(partition, out, 30, "--force")) == 0
    assert outputs(out) == lone_run


def test_a_killed_rerun_leaves_no_run_json_beside_other_csvs(partition, tmp_path):
    """Killed at any moment of a rerun with --force, the folder holds no run.json that vouches for other CSVs."""
    out = tmp_path / "run"
    assert main(train_argv(partition, out, 30)) == 0
    command = [sys.executable, "-m", "asyncfl", *train_argv(partition, out, 30, "--force")]
    process = subprocess.Popen(command, cwd=REPO, env=ENV, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and rows(out / "metrics.csv") in (None, 0, 31):  # until it is mid-run
        time.sleep(0.02)
    process.kill()
    process.wait()
    assert not (out / "run.json").exists() and not (out / "model.pt").exists()


def test_a_stale_lock_of_a_dead_process_is_taken_over(partition, lone_run, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (out / ".lock").write_text(json.dumps({"pid": int(dead.stdout), "host": socket.gethostname()}))
    assert main(train_argv(partition, out, 30)) == 0
    assert outputs(out) == lone_run and os.path.exists(out / "run.json")
