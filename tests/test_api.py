"""asyncfl from Python: the command line's code path, so the same settings make the same bytes."""

import json
import re
import subprocess
import sys

import pytest

from asyncfl import api
from asyncfl.settings.errors import InputError

SETTINGS = {"algorithm": "fedbuff", "rounds": 6, "local_epochs": 1, "clients_per_round": 3, "jitter_sigma": 0.2}
OUTPUTS = ("metrics.csv", "events.csv", "model.pt")


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    return api.partition("digits", clients=10, alpha=0.5, seed=0, out=tmp_path_factory.mktemp("p") / "p.npz")


@pytest.mark.subprocess
def test_a_run_from_python_has_the_bytes_of_asyncfl_train(tmp_path, digits):
    run = api.train("digits", digits, tmp_path / "python", SETTINGS)
    command = [sys.executable, "-m", "asyncfl", "train", "--dataset", "digits", "--partition", str(digits),
               "--out", str(tmp_path / "cli"), "--settings", json.dumps(SETTINGS)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    for name in OUTPUTS:
        assert (tmp_path / "python" / name).read_bytes() == (tmp_path / "cli" / name).read_bytes(), name
    assert list(run.metrics["round"]) == list(range(1, 7)) and len(run.events) == 6 * 3
    assert run.record["config"]["algorithm"] == "fedbuff" and run.evaluations is None
    again = api.train("digits", digits, tmp_path / "python", SETTINGS)
    assert again.already_finished and again.record == run.record


def test_runs_stepped_together_from_python_have_the_bytes_of_each_alone(tmp_path, digits):
    alone = api.train("digits", digits, tmp_path / "alone", SETTINGS | {"seed": 1})
    together = api.train_many(
        "digits", [(digits, tmp_path / "a", SETTINGS | {"seed": 1}), (digits, tmp_path / "b", SETTINGS | {"seed": 2})]
    )
    assert [result.folder.name for result in together] == ["a", "b"]
    for name in OUTPUTS:
        assert (tmp_path / "a" / name).read_bytes() == (alone.folder / name).read_bytes(), name


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda p, out: api.train("digits", p, out, {"rounds": "ten"}), "settings: rounds must be int"),
        (lambda p, out: api.train("digits", p, out, {"gama0": 0.1}), "settings: unknown key 'gama0'"),
        (lambda p, out: api.train("digits", p, out, [("rounds", 3)]), "settings must be a mapping"),
        (lambda p, out: api.train_many("digits", [(p, out, {}), (p, out, {})]), "two runs share an out folder"),
        (lambda p, out: api.train_many("digits", [(p, out / "x", {}), (p, out / "y", {"kappa": -1})]), r"runs\[1\]"),
    ],
)
def test_bad_settings_from_python_are_one_line_before_anything_trains(tmp_path, digits, call, message):
    with pytest.raises(InputError, match=message) as raised:
        call(digits, tmp_path / "out")
    assert len(str(raised.value).splitlines()) == 1 and not (tmp_path / "out").exists()


def partition_with(**changed):
    arguments = {"clients": 10, "alpha": 0.5, "seed": 0} | changed
    return lambda p, out: api.partition("digits", out=out / "p.npz", **arguments)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (partition_with(clients="10"), "clients must be an integer ≥ 1, got '10'"),
        (partition_with(clients=True), "clients must be an integer ≥ 1, got True"),
        (partition_with(clients=10.5), "clients must be an integer ≥ 1, got 10.5"),
        (partition_with(alpha="0.5"), "alpha must be a number, got '0.5'"),
        (partition_with(seed=-1), "seed must be an integer ≥ 0, got -1"),
        (partition_with(seed=1.5), "seed must be an integer ≥ 0, got 1.5"),
        (partition_with(equal_sizes="yes"), "equal_sizes must be True or False"),
        (lambda p, out: api.train("digits", p, out, {}, threads="2"), "threads must be an integer ≥ 1, got '2'"),
        (lambda p, out: api.train("digits", p, out, {}, threads=-1), "threads must be an integer ≥ 1, got -1"),
        (lambda p, out: api.train("digits", p, out, {}, threads=10**6), "threads must be ≤"),
        (lambda p, out: api.train("digits", p, out, {}, force=1), "force must be True or False"),
        (lambda p, out: api.train("digits", 3, out, {}), "partition must be a path"),
        (lambda p, out: api.train_many("digits", "runs.json"), "runs must be a list of (partition, out, settings)"),
        (lambda p, out: api.train_many("digits", {"a": 1}), "runs must be a list"),
        (lambda p, out: api.train_many("digits", [(p, out)]), "runs[0] must be a (partition, out, settings) triple"),
        (lambda p, out: api.train_many("digits", [(p, out, {})], threads=0), "threads must be an integer ≥ 1"),
    ],
)
def test_an_argument_that_is_not_a_setting_is_one_line_naming_it(tmp_path, digits, call, message):
    """As the command line's argument types refuse them (issue 94's API tracebacks): nothing is written,
    no lock is left in the run folder."""
    with pytest.raises(InputError, match=re.escape(message)) as raised:
        call(digits, tmp_path / "out")
    assert len(str(raised.value).splitlines()) == 1 and not (tmp_path / "out").exists()


def test_a_partition_under_a_file_is_one_line(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(InputError, match="a file stands where a folder must go"):
        api.partition("digits", clients=10, alpha=0.5, seed=0, out=tmp_path / "file" / "p.npz")


def test_a_run_failing_in_train_many_from_python_is_named_and_the_others_finish(tmp_path, digits):
    """PM10: the failing run's place in `runs` and its folder, as train-many's --plan run N."""
    diverging = {"algorithm": "fedbuff", "server_lr": 1e300, "gamma0": 0.01, "rounds": 2, "local_epochs": 1}
    with pytest.raises(InputError, match=r"^runs\[1\] \(.*bad\): .*nan or inf.*; the other runs finished$"):
        api.train_many("digits", [(digits, tmp_path / "ok", SETTINGS), (digits, tmp_path / "bad", diverging)])
    assert (tmp_path / "ok" / "run.json").is_file()
