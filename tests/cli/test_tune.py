"""`asyncfl tune`: a tuning grid trained, searched past its edges on real runs (digits, a validation
split), and chosen as `asyncfl select` chooses; its refusals in one line, before anything trains."""

import json
import re

import pandas as pd
import pytest

from asyncfl.analysis.tuning import select
from asyncfl.cli import main
from asyncfl.planning.layout import TUNING_RUN_FOLDER
from asyncfl.planning.tuning import point_label
from conftest import TUNING_BUDGET as BUDGET
from conftest import TUNING_RUN_SETTINGS as SETTINGS
from conftest import TUNING_TARGET as TARGET

GRID = {"afl": [{"gamma0": 0.002}, {"gamma0": 0.02}], "sync": [{"gamma0": 0.002}, {"gamma0": 0.02}]}
AXES = {"afl": {"gamma0": [0.0002, 0.002, 0.02, 0.2]}}  # one step of the grid's ratio past each end


def plan_of(root, npz, grid=GRID):
    return [
        {
            "partition": str(npz),
            "out": str(
                root / TUNING_RUN_FOLDER.format(experiment="x", point=point_label(p), algorithm=n, J=2, seed=10)
            ),
            "settings": {"algorithm": n, "clients_per_round": 2, "seed": 10, **SETTINGS, **p},
        }
        for n, points in grid.items()
        for p in points
    ]


def tune_argv(root, plan, axes=AXES, grid=GRID):
    (root / "plan.json").write_text(json.dumps(plan))
    return ["tune", "--dataset", "digits", "--plan", str(root / "plan.json"),
            "--grid", json.dumps(grid), "--axes", json.dumps(axes),
            "--partition-stats", str(root / "part.json"), "--target-accuracy", str(TARGET),
            "--virtual-time", str(BUDGET), "--title", "x", "--out", str(root / "figures"),
            "--chosen", str(root / "chosen.json"), "--timings", str(root / "search_timings.csv")]  # fmt: skip


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    root = tmp_path_factory.mktemp("tune")
    argv = ["partition", "--dataset", "digits", "--clients", "5", "--alpha", "0.5", "--seed", "10",
            "--validation-fraction", "0.2", "--out", str(root / "part.npz")]  # fmt: skip
    assert main(argv) == 0
    plan = plan_of(root, root / "part.npz")
    assert main(tune_argv(root, plan)) == 0
    return root, plan


def test_the_search_steps_past_the_edge_the_choice_sits_on_until_it_is_interior_or_the_axis_ends(searched):
    root, plan = searched
    choice = json.loads((root / "chosen.json").read_text())
    rounds = choice["search"]["rounds"]
    assert rounds[0] == {"points": {n: [point_label(p) for p in points] for n, points in GRID.items()}, "runs": 4}
    added = [label for round_ in rounds[1:] for label in round_["points"].get("afl", [])]
    assert added and all("sync" not in round_["points"] for round_ in rounds[1:])  # sync has no search axis
    assert choice["search"]["runs"] == 4 + len(added)
    # Every added point is a search value past the grid, trained at its own γ0 on the tuning seed
    for label in added:
        value = float(label.removeprefix("gamma0_"))
        assert value in (0.0002, 0.2)
        record = json.loads((root / f"results/x/tuning/{label}/afl/J2/seed10/run.json").read_text())
        assert record["config"]["gamma0"] == value
    # The search stopped where the choice is interior along γ0 or no search value is left past it
    searched_values = sorted([0.002, 0.02, *(float(label.removeprefix("gamma0_")) for label in added)])
    picked = choice["chosen"]["afl"]["gamma0"]
    assert picked in searched_values[1:-1] or picked in (0.0002, 0.2)
    # The choice is the one asyncfl select makes of the same runs and the searched grid
    grid = {**GRID, "afl": GRID["afl"] + [{"gamma0": float(label.removeprefix("gamma0_"))} for label in added]}
    runs = [root / run["out"] for run in plan_of(root, root / "part.npz", grid)]
    select(runs, [root / "part.json"], grid, TARGET, BUDGET, root / "again", root / "again.json", "x")
    assert json.loads((root / "again.json").read_text())["chosen"] == choice["chosen"]
    timings = pd.read_csv(root / "search_timings.csv")
    assert list(timings.runs) == [round_["runs"] for round_ in rounds] and (timings.cpu_seconds >= 0).all()
    assert (root / "figures/tuning.png").stat().st_size > 1000


def test_a_rerun_trains_nothing_and_chooses_the_same_bytes(searched, capsys):
    root, plan = searched
    before = {p: p.read_bytes() for p in (root / "chosen.json", root / "figures/tuning.csv")}
    models = {p: p.read_bytes() for p in root.glob("results/x/tuning/*/*/J2/seed10/model.pt")}
    assert main(tune_argv(root, plan)) == 0
    assert "finished" in capsys.readouterr().out
    assert all(p.read_bytes() == content for p, content in {**before, **models}.items())


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"axes": {"fedbuff": {"gamma0": [0.002, 0.02]}}}, "--axes names fedbuff, which --grid does not tune"),
        ({"axes": {"afl": {"gamma0": [0.002, 0.2]}}}, r"--axes afl.gamma0 lacks 0.02, a value of its grid"),
        ({"plan": slice(1, None)}, "--plan has no run of afl at gamma0_0.002"),
        ({"grid": {"afl": GRID["afl"]}}, r"--plan run 2 .* is not a run of a point of --grid"),
    ],
    ids=["unknown-name", "axis-without-a-grid-value", "a-point-without-runs", "a-run-of-no-point"],
)
def test_a_search_that_does_not_match_its_grid_is_refused_before_anything_trains(tmp_path, capsys, change, message):
    plan = plan_of(tmp_path, tmp_path / "missing.npz")[change.get("plan", slice(None))]
    argv = tune_argv(tmp_path, plan, change.get("axes", AXES), change.get("grid", GRID))
    assert main(argv) == 1
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and re.search(message, error), error
    assert not (tmp_path / "results").exists() and not (tmp_path / "chosen.json").exists()


@pytest.mark.parametrize(
    "axes",
    ['{"afl": {"gamma0": [0.02, 0.002]}}', '{"afl": {"gamma0": [0.002]}}', '{"afl": {"gamma0": [0.002, NaN]}}',
     '{"afl": {"gamma0": [0.002, true]}}', '{"afl": {"gamma0": ["a", "b"]}}', '{"afl": {}}', "[1]", "{"],
)  # fmt: skip
def test_malformed_search_axes_are_refused_by_the_parser(tmp_path, capsys, axes):
    argv = tune_argv(tmp_path, plan_of(tmp_path, tmp_path / "p.npz"))
    argv[argv.index("--axes") + 1] = axes
    with pytest.raises(SystemExit):
        main(argv)
    assert "--axes" in capsys.readouterr().err


def test_an_earlier_configs_run_at_a_searched_point_is_moved_aside_and_the_point_trained(searched, tmp_path, capsys):
    """A point the search adds is no output Snakemake clears: an earlier config's search may have left a
    run of other settings (another severity, say) under its name. It is moved into replaced/, not
    refused (the job once failed on it after an hour) and not deleted; the point trains; the choice is
    the one made without it."""
    import shutil

    root, plan = searched
    choice = json.loads((root / "chosen.json").read_text())
    added = choice["search"]["rounds"][1]["points"]["afl"][0]
    shutil.copytree(root / "results", tmp_path / "results")
    for name in ("part.npz", "part.json"):
        shutil.copy(root / name, tmp_path / name)
    folder = tmp_path / f"results/x/tuning/{added}/afl/J2/seed10"
    other = root / f"results/x/tuning/{point_label(GRID['afl'][0])}/afl/J2/seed10"
    shutil.rmtree(folder)
    shutil.copytree(other, folder)  # a finished run of γ0 0.002 where the search's point lives
    moved_plan = [{**run, "partition": str(tmp_path / "part.npz"), "out": run["out"].replace(str(root), str(tmp_path))}
                  for run in plan]  # fmt: skip
    assert main(tune_argv(tmp_path, moved_plan)) == 0
    assert f"{folder} held a run of other settings" in capsys.readouterr().out
    assert json.loads((folder / "run.json").read_text())["config"]["gamma0"] == float(added.removeprefix("gamma0_"))
    (kept,) = (folder / "replaced").iterdir()
    assert (kept / "run.json").read_bytes() == (other / "run.json").read_bytes()
    assert json.loads((tmp_path / "chosen.json").read_text())["chosen"] == choice["chosen"]


@pytest.mark.subprocess
def test_a_search_in_two_processes_trains_and_chooses_the_bytes_of_one(searched, tmp_path):
    """--processes deals each round's runs out to child processes: every run, the choice and the
    figure's table are those of the search in one process."""
    import shutil

    root, plan = searched
    for name in ("part.npz", "part.json"):
        shutil.copy(root / name, tmp_path / name)
    moved_plan = [{**run, "partition": str(tmp_path / "part.npz"), "out": run["out"].replace(str(root), str(tmp_path))}
                  for run in plan]  # fmt: skip
    assert main([*tune_argv(tmp_path, moved_plan), "--processes", "2"]) == 0  # each as the fixture: torch's threads
    for name in ("chosen.json", "figures/tuning.csv"):
        assert (tmp_path / name).read_bytes() == (root / name).read_bytes()
    runs = sorted(path.relative_to(root) for path in root.glob("results/x/tuning/*/*/J2/seed10"))
    assert runs == sorted(path.relative_to(tmp_path) for path in tmp_path.glob("results/x/tuning/*/*/J2/seed10"))
    for run in runs:
        for name in ("model.pt", "evaluations.csv", "events.csv"):
            assert (tmp_path / run / name).read_bytes() == (root / run / name).read_bytes()
