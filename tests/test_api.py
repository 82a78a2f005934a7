"""asyncfl from Python: the command line's code path, so the same settings make the same bytes."""

import json
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
