"""Runs through the real command shared by test_launch.py and test_launch_signals.py: the arguments, the
partition and the uninterrupted reference run each file makes once (its module fixtures `partition` and
`lone_run`)."""

import json
from pathlib import Path

from asyncfl.cli import main
from asyncfl.planning.layout import RUN_OUTPUTS

SETTINGS = '{"eval_every": 2, "checkpoint_every": 2, "gamma0": 0.01}'
# The reference run's rounds: enough that a signal after a checkpoint or a few rounds finds it going on
LONE_ROUNDS = 16


def train_argv(partition: Path, out: Path, rounds: int = 4, *extra: str) -> list[str]:
    return [
        "train", "--dataset", "digits", "--partition", str(partition), "--algorithm", "afl",
        "--clients-per-round", "3", "--rounds", str(rounds), "--local-epochs", "2", "--seed", "0",
        "--settings", SETTINGS, "--out", str(out), *extra,
    ]  # fmt: skip


def make_partition(tmp_path_factory) -> Path:
    """The clients' partition every run of a test file trains on."""
    path = tmp_path_factory.mktemp("partition") / "part.npz"
    argv = ["partition", "--dataset", "digits", "--clients", "6", "--alpha", "0.5", "--seed", "0", "--out", str(path)]
    assert main(argv) == 0
    return path


def make_lone_run(partition, tmp_path_factory) -> dict[str, bytes]:
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


def plan_file(folder: Path, runs: list[dict]) -> str:
    """A train-many plan of `runs` written into `folder`, its path."""
    (folder / "plan.json").write_text(json.dumps(runs))
    return str(folder / "plan.json")
