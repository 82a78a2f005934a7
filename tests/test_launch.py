"""A run folder has one owner at a time, a finished run is not retrained, and run.json never
contradicts the CSVs beside it: whole runs through the real command, concurrently where it matters
(the `subprocess` tier)."""

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from asyncfl.cli import main
from asyncfl.cli.processes import stopped_by_signals
from asyncfl.files import sha256, write_json
from asyncfl.planning.layout import RUN_FILES, RUN_OUTPUTS
from asyncfl.settings.integrity import SELF_HASH, sealed
from conftest import ENV, REPO, started, wait_for

pytestmark = pytest.mark.subprocess

# McMahan et al.'s MLP: what these tests check (owners, signals, resumes) does not depend on the model's
# layers, and its steps cost a fraction of the paper's CNN's on a CPU
SETTINGS = '{"eval_every": 2, "checkpoint_every": 2, "gamma0": 0.01, "model": "mlp"}'
# The reference run's rounds: a signal once a checkpoint is written, or a kill after a few rounds, finds it
# going on with 14 rounds to go (the tests poll every 10 ms)
LONE_ROUNDS = 16


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
    assert main(train_argv(partition, out, LONE_ROUNDS)) == 0
    return {name: (out / name).read_bytes() for name in RUN_OUTPUTS}


def rows(path: Path) -> int | None:
    try:
        return len(path.read_text().splitlines())
    except FileNotFoundError:
        return None


def outputs(out: Path) -> dict[str, bytes]:
    return {name: (out / name).read_bytes() for name in RUN_OUTPUTS}


def test_two_concurrent_commands_one_proceeds_and_matches_a_lone_run(partition, lone_run, tmp_path):
    out = tmp_path / "run"
    command = [sys.executable, "-m", "asyncfl", *train_argv(partition, out, LONE_ROUNDS)]
    with started(command, cwd=REPO, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as first:
        wait_for(lambda: (out / "metrics.csv").exists(), first, "the first command's metrics.csv")  # it owns the folder
        first.send_signal(signal.SIGSTOP)  # holding its lock, however long the second takes to start
        second = subprocess.run(command, cwd=REPO, env=ENV, capture_output=True, text=True, timeout=1800)
        first.send_signal(signal.SIGCONT)
        first_out, first_err = first.communicate(timeout=1800)
    assert first.returncode == 0, first_err
    assert second.returncode == 1, second.stderr
    line = second.stderr.strip()
    assert len(line.splitlines()) == 1 and line.startswith("asyncfl train: error: ")
    assert f"{out} is in use by pid {first.pid} on {socket.gethostname()}" in line
    assert outputs(out) == lone_run
    metrics = (out / "metrics.csv").read_text().splitlines()
    assert [row.split(",")[0] for row in metrics[1:]] == [str(r) for r in range(1, LONE_ROUNDS + 1)]


def test_a_finished_run_is_not_retrained(partition, lone_run, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(train_argv(partition, out, LONE_ROUNDS)) == 0
    before = {name: (out / name).stat().st_mtime_ns for name in RUN_FILES}
    capsys.readouterr()
    assert main(train_argv(partition, out, LONE_ROUNDS)) == 0
    assert "already finished" in capsys.readouterr().out
    assert {name: (out / name).stat().st_mtime_ns for name in RUN_FILES} == before
    assert outputs(out) == lone_run


def test_a_finished_run_with_other_settings_needs_force(partition, lone_run, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(train_argv(partition, out, LONE_ROUNDS)) == 0
    old_run_json = (out / "run.json").read_text()
    capsys.readouterr()
    assert main(train_argv(partition, out, 3)) == 1
    err = capsys.readouterr().err
    assert "holds a finished run with other settings" in err and "--force" in err
    assert (out / "run.json").read_text() == old_run_json  # nothing touched
    assert main(train_argv(partition, out, LONE_ROUNDS, "--force")) == 0
    moved = [p for p in (out / "replaced").iterdir()]
    assert len(moved) == 1 and (moved[0] / "run.json").read_text() == old_run_json
    assert outputs(out) == lone_run


def test_a_run_made_before_a_setting_existed_is_the_same_run_at_its_default(partition, lone_run, tmp_path, capsys):
    """A finished run whose record lacks a setting asyncfl added since (here AFL's `mixing`, dropped from its
    run.json) is this run where the setting is at its default, and another where it is not."""
    out = tmp_path / "run"
    assert main(train_argv(partition, out, LONE_ROUNDS)) == 0
    record = json.loads((out / "run.json").read_text())
    del record["config"]["mixing"]
    write_json(out / "run.json", sealed({key: value for key, value in record.items() if key != SELF_HASH}))
    capsys.readouterr()
    assert main(train_argv(partition, out, LONE_ROUNDS)) == 0
    assert "already finished" in capsys.readouterr().out and outputs(out) == lone_run
    other = train_argv(partition, out, LONE_ROUNDS)
    other[other.index("--settings") + 1] = json.dumps({**json.loads(SETTINGS), "mixing": 0.5})
    assert main(other) == 1
    assert "holds a finished run with other settings" in capsys.readouterr().err


def test_outputs_that_contradict_run_json_are_never_taken_as_finished(partition, lone_run, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(train_argv(partition, out, LONE_ROUNDS)) == 0
    with open(out / "metrics.csv", "a") as stream:
        stream.write(f"{LONE_ROUNDS + 1},1.0,,,,,,,\n")
    capsys.readouterr()
    assert main(train_argv(partition, out, LONE_ROUNDS)) == 1
    assert "do not match the hashes in its run.json" in capsys.readouterr().err
    assert main(train_argv(partition, out, LONE_ROUNDS, "--force")) == 0
    assert outputs(out) == lone_run


def test_a_killed_rerun_leaves_no_run_json_beside_other_csvs(partition, tmp_path):
    """Killed at any moment of a rerun with --force, the folder holds no run.json that vouches for other CSVs."""
    out = tmp_path / "run"
    assert main(train_argv(partition, out, LONE_ROUNDS)) == 0
    command = [sys.executable, "-m", "asyncfl", *train_argv(partition, out, LONE_ROUNDS, "--force")]
    with started(command, cwd=REPO, env=ENV, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL) as process:
        wait_for(lambda: rows(out / "metrics.csv") not in (None, 0, LONE_ROUNDS + 1), process, "the rerun's first rows")
        process.kill()
    assert not (out / "run.json").exists() and not (out / "model.pt").exists()


def test_a_stale_lock_of_a_dead_process_is_taken_over(partition, lone_run, tmp_path, capsys):
    """A holder killed with SIGKILL (no cleanup) leaves its lock file naming it; the kernel dropped its
    lock, so the next command proceeds, while the holder alive would have been refused."""
    out = tmp_path / "run"
    holder = "import sys; from pathlib import Path; from asyncfl.runs.folder import owned\n"
    holder += "with owned(Path(sys.argv[1])):\n    print('held', flush=True); sys.stdin.read()"
    command = [sys.executable, "-c", holder, str(out)]
    with started(command, cwd=REPO, env=ENV, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as process:
        assert process.stdout.readline() == "held\n"
        assert main(train_argv(partition, out, LONE_ROUNDS)) == 1
        assert f"in use by pid {process.pid}" in capsys.readouterr().err
        process.kill()
        process.wait()
    assert json.loads((out / ".lock").read_text())["pid"] == process.pid  # left behind, naming the dead
    assert main(train_argv(partition, out, LONE_ROUNDS)) == 0
    assert outputs(out) == lone_run and os.path.exists(out / "run.json")


def test_logs_deleted_mid_run_are_written_whole_before_run_json(partition, lone_run, tmp_path):
    """Snakemake deletes the outputs of a job it thinks failed while the orphan still runs: the run
    writes its logs whole again from memory, never hashing and finishing on a partial log."""
    out = tmp_path / "run"
    command = [sys.executable, "-m", "asyncfl", *train_argv(partition, out, LONE_ROUNDS)]
    with started(command, cwd=REPO, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) as process:
        wait_for(lambda: (rows(out / "metrics.csv") or 0) >= 4, process, "round 3")
        process.send_signal(signal.SIGSTOP)  # deterministic: nothing moves while the logs are deleted
        assert not (out / "run.json").exists(), "the run finished before its logs could be deleted"
        (out / "metrics.csv").unlink()
        (out / "events.csv").unlink()
        process.send_signal(signal.SIGCONT)
        assert process.wait() == 0, process.stderr.read()
    assert outputs(out) == lone_run
    summary = json.loads((out / "run.json").read_text())
    assert all(sha256(out / name) == digest for name, digest in summary["sha256"].items())


@pytest.mark.parametrize("planted", [".lock", "metrics.csv", ".metrics.csv.123.tmp", ".finished/run.json"])
def test_a_symlink_planted_in_a_run_folder_is_refused(partition, tmp_path, capsys, planted):
    out, victim = tmp_path / "run", tmp_path / "precious.txt"
    (out / planted).parent.mkdir(parents=True)
    victim.write_text("keep me")
    (out / planted).symlink_to(victim)  # under .finished/: a restore would install it as the run's
    assert main(train_argv(partition, out, 2)) == 1
    err = capsys.readouterr().err
    assert f"{out / planted} is a symbolic link" in err and len(err.strip().splitlines()) == 1
    assert victim.read_text() == "keep me"


def kill_mid_run(partition: Path, out: Path, *extra: str) -> None:
    """Leave `out` as a SIGKILLed run leaves it: a checkpoint, some rows, no model.pt."""
    command = [sys.executable, "-m", "asyncfl", *train_argv(partition, out, LONE_ROUNDS, *extra)]
    with started(command, cwd=REPO, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as process:
        wait_for(lambda: (out / "checkpoint.pt").exists(), process, "the first checkpoint")
        process.kill()
    assert not (out / "model.pt").exists()


@pytest.fixture
def one_thread_run(partition, tmp_path) -> Iterator[dict[str, bytes]]:
    """An uninterrupted run on one torch thread (sums split over other thread counts round differently)."""
    threads = torch.get_num_threads()
    try:
        assert main(train_argv(partition, tmp_path / "straight", LONE_ROUNDS, "--threads", "1")) == 0
        yield outputs(tmp_path / "straight")
    finally:
        torch.set_num_threads(threads)


def test_a_damaged_checkpoint_or_other_threads_are_refused_then_resume_is_byte_identical(
    partition, one_thread_run, tmp_path, capsys
):
    out = tmp_path / "run"
    kill_mid_run(partition, out, "--threads", "1")
    checkpoint = out / "checkpoint.pt"
    good = checkpoint.read_bytes()
    flipped = bytearray(good)
    flipped[len(good) // 2] ^= 0x01
    checkpoint.write_bytes(bytes(flipped))
    assert main(train_argv(partition, out, LONE_ROUNDS, "--threads", "1")) == 1
    assert "do not match its checksum" in capsys.readouterr().err and checkpoint.read_bytes() == bytes(flipped)
    checkpoint.write_bytes(good)
    assert main(train_argv(partition, out, LONE_ROUNDS, "--threads", "2")) == 1
    assert "written with 1 torch threads" in capsys.readouterr().err and checkpoint.exists()
    assert main(train_argv(partition, out, LONE_ROUNDS, "--threads", "1")) == 0
    assert outputs(out) == one_thread_run


def test_a_diverged_global_model_stops_the_run_unsaved(partition, tmp_path, capsys):
    out = tmp_path / "run"
    argv = train_argv(partition, out, 2)
    argv[argv.index("afl")] = "fedbuff"
    argv[argv.index(SETTINGS)] = '{"server_lr": 1e300, "gamma0": 0.01, "model": "mlp"}'
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "round 1: the aggregated global model has nan or inf entries" in err
    assert not (out / "model.pt").exists() and not (out / "run.json").exists()
    # the run's own failure is recorded: the workflow's retry of it ends at once with the cause, and a new
    # invocation's first attempt trains again (and fails again, recording the cause afresh)
    assert "nan or inf entries" in json.loads((out / "failed.json").read_text())["cause"]
    assert main([*argv, "--attempt", "2"]) == 1
    err = capsys.readouterr().err
    assert "not trained again on attempt 2: an earlier attempt failed on its own (round 1: the aggregated" in err
    (out / "failed.json").write_text("{not json")  # a record that cannot be read is no record: it trains
    assert main([*argv, "--attempt", "3"]) == 1 and "round 1: the aggregated" in capsys.readouterr().err
    assert main(argv) == 1 and "nan or inf" in json.loads((out / "failed.json").read_text())["cause"]


def test_durations_of_any_allowed_size_end(partition, tmp_path):
    """Clients that take 1e20 virtual seconds and more: the virtual clock still reaches them."""
    out = tmp_path / "run"
    argv = train_argv(partition, out, 3)
    argv[argv.index(SETTINGS)] = '{"seconds_per_sample": 1e6, "speed_sigma": 10, "latency_median": 1e9, "model": "mlp"}'
    command = [sys.executable, "-m", "asyncfl", *argv]
    result = subprocess.run(command, cwd=REPO, env=ENV, capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, result.stderr
    assert json.loads((out / "run.json").read_text())["virtual_time"] > 1e9


def interrupted(command: list[str], checkpoint: Path, stop: signal.Signals = signal.SIGINT) -> tuple[int, str]:
    """Run `command`, send it `stop` once `checkpoint` exists; its exit status and stderr."""
    # A shell's background job (`make test &`) inherits SIGINT ignored, and Python then leaves it so:
    # the child gets the default disposition back, as a terminal's Ctrl-C would find it.
    with started(
        command,
        cwd=REPO,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    ) as process:
        wait_for(checkpoint.exists, process, "the first checkpoint")
        process.send_signal(stop)
        err = process.communicate(timeout=1800)[1]
    return process.returncode, err


def test_ctrl_c_is_one_line_and_the_run_resumes(partition, lone_run, tmp_path):
    out = tmp_path / "run"
    command = [sys.executable, "-m", "asyncfl", *train_argv(partition, out, LONE_ROUNDS)]
    returncode, err = interrupted(command, out / "checkpoint.pt")
    assert returncode == 130 and err.startswith("asyncfl train: interrupted; run the same command again")
    assert len(err.strip().splitlines()) == 1, err
    assert main(train_argv(partition, out, LONE_ROUNDS)) == 0
    assert outputs(out) == lone_run


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_run_on_the_real_clock_stopped_by_a_signal_resumes_to_the_virtual_runs_bytes(
    partition, lone_run, tmp_path, stop
):
    """Its clients asyncio tasks training on worker threads, a real-clock run stopped mid-way (Ctrl-C: in one
    line; SIGTERM: at once, as `asyncfl train` always dies of it) resumes from its checkpoint to the virtual
    run's bytes."""
    out = tmp_path / "run"
    argv = train_argv(partition, out, LONE_ROUNDS)
    # 24 virtual seconds paced over about 6: a signal once the first checkpoint is written finds it going on
    argv[argv.index(SETTINGS)] = json.dumps({**json.loads(SETTINGS), "clock": "real", "time_scale": 0.25})
    returncode, err = interrupted([sys.executable, "-m", "asyncfl", *argv], out / "checkpoint.pt", stop)
    if stop == signal.SIGINT:
        assert returncode == 130 and err.startswith("asyncfl train: interrupted; run the same command again"), err
        assert len(err.strip().splitlines()) == 1, err
    else:
        assert returncode == -stop and not (out / "run.json").exists(), err
    assert main(argv) == 0
    assert outputs(out) == lone_run


def test_train_many_trains_real_clock_runs_alone_beside_the_stepped_ones(partition, lone_run, tmp_path):
    """A plan that mixes the clocks: the real-clock runs are not stepped with the others (each alone, its
    own loop and workers), and every folder holds the virtual run's bytes."""
    settings = {**json.loads(SETTINGS), "algorithm": "afl", "clients_per_round": 3, "rounds": LONE_ROUNDS,
                "local_epochs": 2, "seed": 0}  # fmt: skip
    paced = {**settings, "clock": "real", "time_scale": 0.05}
    plan = [
        {"partition": str(partition), "out": str(tmp_path / name), "settings": each}
        for name, each in (("paced", paced), ("virtual", settings), ("paced-too", paced))
    ]
    assert main(["train-many", "--dataset", "digits", "--plan", plan_file(tmp_path, plan)]) == 0
    for name in ("paced", "virtual", "paced-too"):
        assert outputs(tmp_path / name) == lone_run, name
    assert "clock" in json.loads((tmp_path / "paced" / "run.json").read_text())


def test_train_many_makes_each_run_as_asyncfl_train_alone(partition, lone_run, tmp_path, capsys):
    """Packed runs share a process (and its loaded dataset), never their numbers: each folder holds the
    bytes `asyncfl train` writes alone, whichever runs precede it; a finished one is not trained again."""
    settings = {**json.loads(SETTINGS), "algorithm": "afl", "clients_per_round": 3, "rounds": LONE_ROUNDS,
                "local_epochs": 2, "seed": 0}  # fmt: skip
    other = {**settings, "algorithm": "sync", "rounds": 5}
    plan = [
        {"partition": str(partition), "out": str(tmp_path / "sync"), "settings": other},
        {"partition": str(partition), "out": str(tmp_path / "afl"), "settings": settings},
    ]
    argv = ["train-many", "--dataset", "digits", "--plan", plan_file(tmp_path, plan)]
    assert main(argv) == 0
    assert outputs(tmp_path / "afl") == lone_run
    alone = tmp_path / "sync-alone"
    assert main(["train", "--dataset", "digits", "--partition", str(partition), "--settings", json.dumps(other),
                 "--out", str(alone)]) == 0  # fmt: skip
    assert outputs(tmp_path / "sync") == outputs(alone)
    capsys.readouterr()
    assert main(argv) == 0
    assert capsys.readouterr().out.count("already finished") == 2


def test_train_many_in_two_processes_makes_the_bytes_of_one_and_a_failing_run_fails_it_in_one_line(
    partition, lone_run, tmp_path, capfd
):
    """--processes deals the runs out in turn to child processes: each folder holds the bytes of one
    process; a run failing in one child leaves every other run to finish, and the job fails in a line
    of its own after the child's."""
    diverging = {"algorithm": "fedbuff", "server_lr": 1e300, "gamma0": 0.01, "rounds": 2, "model": "mlp"}
    other = {**json.loads(SETTINGS), "algorithm": "sync", "clients_per_round": 3, "rounds": 5, "seed": 0}
    plan = json.loads(Path(lone_plan(partition, tmp_path, diverging)).read_text())
    plan.insert(0, {"partition": str(partition), "out": str(tmp_path / "sync"), "settings": other})
    # each child one run at a time (--at-once 1): the same bytes
    argv = ["train-many", "--dataset", "digits", "--plan", plan_file(tmp_path, plan), "--processes", "2",
            "--at-once", "1"]  # fmt: skip
    assert main(argv) == 1  # the first process trains runs 0 and 2, the second run 1 (the diverging one)
    captured = capfd.readouterr()
    err = captured.err.strip().splitlines()
    # named by its number in the user's plan, not in its child's share (which numbers it 0)
    first = f"asyncfl train-many: error: --plan run 1 ({tmp_path / 'first'}): "
    assert len(err) == 2 and err[0].startswith(first) and "nan or inf" in err[0], err
    assert err[1] == (
        "asyncfl train-many: error: 1 of 2 training processes failed (exit status 1); each one's error is above; "
        "the runs of the others finished"
    )
    assert captured.out.count("→") == 2  # a line per finished run, from whichever process trained it
    assert outputs(tmp_path / "afl") == lone_run
    assert main(["train", "--dataset", "digits", "--partition", str(partition), "--settings", json.dumps(other),
                 "--out", str(tmp_path / "alone")]) == 0  # fmt: skip
    assert outputs(tmp_path / "sync") == outputs(tmp_path / "alone")


def lone_plan(partition: Path, tmp_path: Path, first: dict | None = None, **extra: object) -> str:
    """A train-many plan whose run "afl" is `lone_run`'s (with `extra` settings), after a `first` run where
    one is given."""
    settings = {**json.loads(SETTINGS), "algorithm": "afl", "clients_per_round": 3, "rounds": LONE_ROUNDS,
                "local_epochs": 2, "seed": 0, **extra}  # fmt: skip
    plan = [{"partition": str(partition), "out": str(tmp_path / "afl"), "settings": settings}]
    if first is not None:
        plan.insert(0, {"partition": str(partition), "out": str(tmp_path / "first"), "settings": first})
    return plan_file(tmp_path, plan)


def test_a_run_failing_in_train_many_is_one_line_and_the_others_finish(partition, lone_run, tmp_path, capsys):
    diverging = {"algorithm": "fedbuff", "server_lr": 1e300, "gamma0": 0.01, "rounds": 2, "model": "mlp"}
    assert main(["train-many", "--dataset", "digits", "--plan", lone_plan(partition, tmp_path, diverging)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("asyncfl train-many: error: --plan run 0") and len(err.splitlines()) == 1, err
    assert "nan or inf entries" in err and err.endswith("the other runs finished")
    assert outputs(tmp_path / "afl") == lone_run


def test_ctrl_c_in_train_many_is_one_line_and_every_run_resumes(partition, lone_run, tmp_path):
    other = {**json.loads(SETTINGS), "algorithm": "sync", "clients_per_round": 3, "rounds": LONE_ROUNDS}
    command = [sys.executable, "-m", "asyncfl", "train-many", "--dataset", "digits", "--plan",
               lone_plan(partition, tmp_path, other)]  # fmt: skip
    returncode, err = interrupted(command, tmp_path / "afl" / "checkpoint.pt")
    assert returncode == 130 and err.startswith("asyncfl train-many: interrupted; run the same command"), err
    assert len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "afl" / "run.json").exists()
    assert main(command[3:]) == 0
    assert outputs(tmp_path / "afl") == lone_run


def children_of(pid: int) -> list[int]:
    """The processes whose parent is `pid` (Linux's /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # it ended while we looked
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def alive(pid: int) -> bool:
    """Whether `pid` still runs (a zombie, ended but not yet reaped by its new parent, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL])
def test_a_signal_to_a_train_many_parent_alone_stops_every_child_and_every_run_resumes(
    partition, lone_run, tmp_path, stop
):
    """What `kill PID`, `timeout`, SLURM's time limit or a closed terminal sends reaches the parent of
    `--processes` alone: its children stop too (SIGKILL, which no handler sees, through the children's
    own death signal), none keeps training or holding its folder's lock, and a rerun ends every run with
    the bytes of an uninterrupted one."""
    # Both runs paced by the real clock (about 7 s each of their 75 and 24 virtual seconds, however fast the
    # machine trains): each child's run is still going when the other child writes its first checkpoint
    other = {**json.loads(SETTINGS), "algorithm": "sync", "clients_per_round": 3, "rounds": LONE_ROUNDS}
    other.update(clock="real", time_scale=0.1)
    plan = lone_plan(partition, tmp_path, other, clock="real", time_scale=0.3)
    argv = ["train-many", "--dataset", "digits", "--plan", plan, "--processes", "2"]
    with started(
        [sys.executable, "-m", "asyncfl", *argv], cwd=REPO, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    ) as parent:  # fmt: skip
        checkpoints = [tmp_path / name / "checkpoint.pt" for name in ("first", "afl")]
        wait_for(lambda: all(path.exists() for path in checkpoints), parent, "both children's first checkpoints")
        children = children_of(parent.pid)
        assert len(children) == 2
        parent.send_signal(stop)
        err = parent.communicate(timeout=1800)[1]
        if stop != signal.SIGKILL:
            assert parent.returncode == 130 and "interrupted; run the same command again" in err, err
        for child in children:
            wait_for(lambda child=child: not alive(child), DETACHED, f"child {child} to stop")
    assert not any((tmp_path / name / "run.json").exists() for name in ("first", "afl"))  # stopped, not finished
    assert main(argv) == 0
    assert outputs(tmp_path / "afl") == lone_run


def test_sigterm_and_sighup_stop_a_parent_as_ctrl_c_does():
    for stop in (signal.SIGTERM, signal.SIGHUP):
        with pytest.raises(KeyboardInterrupt, match=stop.name), stopped_by_signals():
            os.kill(os.getpid(), stop)
            signal.sigtimedwait([], 0)  # a signal is handled between bytecodes: this is one
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # restored after the block


class Detached:
    """For `wait_for` on a process that is not ours to poll: it never ends first."""

    returncode = None

    def poll(self) -> None:
        return None


DETACHED = Detached()


def test_a_finished_run_deleted_by_a_failed_jobs_cleanup_comes_back_only_intact_and_the_same(
    partition, tmp_path, capsys
):
    """Snakemake deletes a failed job's outputs, a packed job's finished runs among them: the run's kept
    hard links bring it back untrained, but only this run's, sealed and matching their hashes."""
    out = tmp_path / "run"
    assert main(train_argv(partition, out, 4)) == 0
    finished = {name: (out / name).read_bytes() for name in (*RUN_OUTPUTS, "run.json")}

    def cleanup() -> None:  # what Snakemake does to a failed job's declared outputs
        for name in finished:
            (out / name).unlink()

    cleanup()
    capsys.readouterr()
    assert main(train_argv(partition, out, 4)) == 0
    assert "already finished" in capsys.readouterr().out
    assert {name: (out / name).read_bytes() for name in finished} == finished  # run.json too: not retrained
    cleanup()
    with open(out / ".finished/metrics.csv", "a") as damaged:
        damaged.write("1,2\n")
    assert main(train_argv(partition, out, 4)) == 0
    assert "already finished" not in capsys.readouterr().out  # trained again, to the same bytes
    assert outputs(out) == {name: finished[name] for name in RUN_OUTPUTS}
    cleanup()
    assert main(train_argv(partition, out, 5)) == 0  # another run: the kept one is not it
    assert "already finished" not in capsys.readouterr().out
    assert json.loads((out / "run.json").read_text())["rounds_completed"] == 5
    assert json.loads((out / ".finished/run.json").read_text())["rounds_completed"] == 5


def test_a_kept_copy_hard_linked_to_a_file_elsewhere_is_not_installed_as_the_runs(partition, tmp_path, capsys):
    """A file of .finished/ that is also a file outside the folder (a planted hard link, content and
    hashes right) would become the run's, and a later write to the run's file would change it there:
    the run trains again instead, and the outside file keeps its one identity."""
    out = tmp_path / "run"
    assert main(train_argv(partition, out, 4)) == 0
    outside = tmp_path / "elsewhere.csv"
    os.link(out / ".finished/metrics.csv", outside)  # three links now: the run's, the kept one, outside
    for name in (*RUN_OUTPUTS, "run.json"):
        (out / name).unlink()  # a failed job's cleanup
    capsys.readouterr()
    assert main(train_argv(partition, out, 4)) == 0
    assert "already finished" not in capsys.readouterr().out  # trained again
    assert not os.path.samefile(out / "metrics.csv", outside)


def test_a_tuned_runs_choice_is_recorded_as_such_and_makes_it_another_run(partition, tmp_path, capsys):
    """run.json says which settings the tuning stage chose ("tuned"); a run without them is not that
    run, so its folder is not taken for it."""
    settings = {"algorithm": "sync", "clients_per_round": 3, "rounds": 2, "seed": 0, "model": "mlp"}
    out = tmp_path / "runs/sync/J3/seed0"
    plan = [{"partition": str(partition), "out": str(out), "settings": settings, "choices": [{"gamma0": 0.02}]}]
    (tmp_path / "chosen.json").write_text(json.dumps({"chosen": {"sync": {"gamma0": 0.02}}}))
    argv = ["train-many", "--dataset", "digits", "--plan", plan_file(tmp_path, plan)]
    assert main([*argv, "--chosen", str(tmp_path / "chosen.json")]) == 0
    record = json.loads((out / "run.json").read_text())
    assert record["tuned"] == {"gamma0": 0.02} and record["config"]["gamma0"] == 0.02
    plan[0]["settings"] = {**settings, "gamma0": 0.02}  # the same numbers, not chosen by tuning
    capsys.readouterr()
    assert main(["train-many", "--dataset", "digits", "--plan", plan_file(tmp_path, plan)]) == 1
    assert "holds a finished run with other settings or data" in capsys.readouterr().err


def test_tuned_runs_in_two_processes_each_with_its_own_names_choice_make_the_bytes_of_one(partition, tmp_path):
    """A child's share of the plan may hold only some of its run names (here one each), and --chosen
    refuses a choice for a name its plan lacks: each child gets its own names' choices, and every run
    the bytes of one process."""
    settings = {"clients_per_round": 3, "rounds": 2, "seed": 0, "model": "mlp"}
    chosen = {"sync": {"gamma0": 0.02}, "afl": {"gamma0": 0.03}}
    (tmp_path / "chosen.json").write_text(json.dumps({"chosen": chosen}))
    folders = {}
    for processes in ("1", "2"):
        plan = [
            {"partition": str(partition), "out": str(tmp_path / processes / name / "J3/seed0"),
             "settings": {**settings, "algorithm": name}, "choices": [point, {"gamma0": 0.01}]}
            for name, point in chosen.items()
        ]  # fmt: skip
        argv = ["train-many", "--dataset", "digits", "--plan", plan_file(tmp_path, plan), "--processes", processes]
        assert main([*argv, "--threads", processes, "--chosen", str(tmp_path / "chosen.json")]) == 0
        folders[processes] = [outputs(Path(run["out"])) for run in plan]
    assert folders["2"] == folders["1"]
    assert json.loads((tmp_path / "2/afl/J3/seed0/run.json").read_text())["tuned"] == {"gamma0": 0.03}


def test_a_choice_that_leaves_out_a_tuned_name_is_refused_before_anything_trains(partition, tmp_path, capsys):
    """A hand-edited chosen.json without one of the names the plan tunes once trained that name untuned."""
    settings = {"clients_per_round": 3, "rounds": 2, "seed": 0, "model": "mlp"}
    plan = [
        {"partition": str(partition), "out": str(tmp_path / name / "J3/seed0"),
         "settings": {**settings, "algorithm": name}, "choices": [{"gamma0": 0.02}, {"gamma0": 0.01}]}
        for name in ("sync", "afl")
    ]  # fmt: skip
    (tmp_path / "chosen.json").write_text(json.dumps({"chosen": {"sync": {"gamma0": 0.02}}}))
    argv = ["train-many", "--dataset", "digits", "--plan", plan_file(tmp_path, plan), "--chosen"]
    assert main([*argv, str(tmp_path / "chosen.json")]) == 1
    err = capsys.readouterr().err
    assert "chose nothing for afl, which --plan tunes" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "sync/J3/seed0/run.json").exists()


@pytest.mark.parametrize(
    "plan,message",
    [
        ("[]", "non-empty JSON list"),
        ('[{"partition": "p.npz", "out": "o"}]', "exactly the keys partition, out, settings"),
        ('[{"partition": "p.npz", "out": "o", "settings": []}]', "settings must be a JSON object"),
        ('[{"partition": 1, "out": "o", "settings": {}}]', "must be paths"),
    ],
)
def test_a_malformed_plan_is_one_line(plan, message, capsys, tmp_path):
    path = tmp_path / "plan.json"
    path.write_text(plan)
    with pytest.raises(SystemExit):
        main(["train-many", "--dataset", "digits", "--plan", str(path)])
    assert message in capsys.readouterr().err


def plan_file(folder: Path, runs: list[dict]) -> str:
    (folder / "plan.json").write_text(json.dumps(runs))
    return str(folder / "plan.json")


def test_every_planned_run_is_checked_before_any_trains(partition, tmp_path, capsys):
    good = {"partition": str(partition), "out": str(tmp_path / "good"), "settings": {"rounds": 1}}
    bad = {"partition": str(partition), "out": str(tmp_path / "bad"), "settings": {"gama0": 0.1}}
    assert main(["train-many", "--dataset", "digits", "--plan", plan_file(tmp_path, [good, bad])]) == 1
    assert f"--plan run 1 ({tmp_path / 'bad'}): unknown key 'gama0'" in capsys.readouterr().err
    assert not (tmp_path / "good").exists()


def test_a_bad_round_deadline_in_a_later_run_stops_the_job_before_any_run_trains(partition, tmp_path, capsys):
    """A deadline no client can meet is refused as its run starts: train-many checks every run first,
    so the runs before it are not trained (and then deleted by Snakemake for the job's failure)."""
    good = {"partition": str(partition), "out": str(tmp_path / "good"), "settings": {"rounds": 1}}
    late = {"algorithm": "sync", "rounds": 1, "round_deadline": 1e-6}
    bad = {"partition": str(partition), "out": str(tmp_path / "bad"), "settings": late}
    assert main(["train-many", "--dataset", "digits", "--plan", plan_file(tmp_path, [good, bad])]) == 1
    err = capsys.readouterr().err
    assert f"--plan run 1 ({tmp_path / 'bad'}): round_deadline = 1e-06 virtual seconds is shorter" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "good").exists()


@pytest.mark.parametrize("spelling", ["tm6", "./tm6", "sub/../tm6"])
def test_a_plan_naming_one_folder_twice_in_other_spellings_is_refused(partition, tmp_path, capsys, spelling):
    first = {"partition": str(partition), "out": str(tmp_path / "tm6"), "settings": {"rounds": 1}}
    second = {**first, "out": f"{tmp_path}/{spelling}", "settings": {"rounds": 2}}
    assert main(["train-many", "--dataset", "digits", "--plan", plan_file(tmp_path, [first, second])]) == 1
    assert f"--plan runs 0 and 1 both write to {tmp_path / 'tm6'}" in capsys.readouterr().err
    assert not (tmp_path / "tm6").exists()


def test_a_plan_larger_than_a_command_line_is_read_from_its_file(partition, tmp_path, capsys):
    """A sweep of hundreds of runs made a 168 KB plan, which no command line takes ("Argument list too
    long"): the plan is a file. Here 700 runs, the last one bad, so nothing trains."""
    runs = [{"partition": str(partition), "out": str(tmp_path / f"run{i:03d}"), "settings": {"rounds": 1,
             "gamma0": 0.01, "eval_every": 1}} for i in range(700)]  # fmt: skip
    runs[-1]["settings"] = {"gama0": 0.1}
    path = plan_file(tmp_path, runs)
    assert os.path.getsize(path) > 128 * 1024  # more than one argument may hold (MAX_ARG_STRLEN)
    assert main(["train-many", "--dataset", "digits", "--plan", path]) == 1
    assert "--plan run 699" in capsys.readouterr().err
