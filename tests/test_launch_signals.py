"""Signals and train-many through the real command: Ctrl-C, SIGTERM and SIGKILL mid-run and every run
resuming to the bytes of one uninterrupted, runs on the real clock stopped and resumed, several runs in one
or two processes (the `subprocess` tier; a file apart from test_launch.py so that `make test` runs the two
beside each other)."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from asyncfl.cli import main
from asyncfl.cli.processes import stopped_by_signals
from conftest import ENV, REPO, started, wait_for
from launch_cases import LONE_ROUNDS, SETTINGS, make_lone_run, make_partition, outputs, plan_file, train_argv

pytestmark = pytest.mark.subprocess

partition = pytest.fixture(scope="module")(make_partition)
lone_run = pytest.fixture(scope="module")(make_lone_run)


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
    diverging = {"algorithm": "fedbuff", "server_lr": 1e300, "gamma0": 0.01, "rounds": 2}
    other = {**json.loads(SETTINGS), "algorithm": "sync", "clients_per_round": 3, "rounds": 5, "seed": 0}
    plan = json.loads(Path(lone_plan(partition, tmp_path, diverging)).read_text())
    plan.insert(0, {"partition": str(partition), "out": str(tmp_path / "sync"), "settings": other})
    argv = ["train-many", "--dataset", "digits", "--plan", plan_file(tmp_path, plan), "--processes", "2"]
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


def lone_plan(partition: Path, tmp_path: Path, first: dict | None = None) -> str:
    """A train-many plan whose run "afl" is `lone_run`'s, after a `first` run where one is given."""
    settings = {**json.loads(SETTINGS), "algorithm": "afl", "clients_per_round": 3, "rounds": LONE_ROUNDS,
                "local_epochs": 2, "seed": 0}  # fmt: skip
    plan = [{"partition": str(partition), "out": str(tmp_path / "afl"), "settings": settings}]
    if first is not None:
        plan.insert(0, {"partition": str(partition), "out": str(tmp_path / "first"), "settings": first})
    return plan_file(tmp_path, plan)


def test_a_run_failing_in_train_many_is_one_line_and_the_others_finish(partition, lone_run, tmp_path, capsys):
    diverging = {"algorithm": "fedbuff", "server_lr": 1e300, "gamma0": 0.01, "rounds": 2}
    assert main(["train-many", "--dataset", "digits", "--plan", lone_plan(partition, tmp_path, diverging)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("asyncfl train-many: error: --plan run 0") and len(err.splitlines()) == 1, err
    assert "nan or inf entries" in err and err.endswith("the other runs finished")
    assert outputs(tmp_path / "afl") == lone_run


def test_ctrl_c_in_train_many_is_one_line_and_every_run_resumes(partition, lone_run, tmp_path):
    other = {"algorithm": "sync", "clients_per_round": 3, "rounds": LONE_ROUNDS, "eval_every": 2, "checkpoint_every": 2}
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
    other = {"algorithm": "sync", "clients_per_round": 3, "rounds": LONE_ROUNDS, "eval_every": 2, "checkpoint_every": 2}
    argv = ["train-many", "--dataset", "digits", "--plan", lone_plan(partition, tmp_path, other), "--processes", "2"]
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
