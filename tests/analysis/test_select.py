"""`asyncfl select`: each tuned run name's grid point chosen on the validation split, from real tuning
runs laid out as the workflow lays them out; the test set never enters the choice."""

import dataclasses
import json

import pandas as pd
import pytest
import torch

from asyncfl.analysis.tuning import choose, select, tuning_heading, tuning_table, unvaried_settings, without_effect
from asyncfl.cli import main
from asyncfl.data.loading import load_dataset
from asyncfl.data.partition import load_partition
from asyncfl.files import sha256
from asyncfl.planning.layout import TUNING_RUN_FOLDER
from asyncfl.planning.tuning import point_label
from asyncfl.settings.config import make_config
from asyncfl.settings.errors import InputError
from asyncfl.sim.engine import Simulation
from conftest import TUNING_BUDGET as BUDGET
from conftest import TUNING_RUN_SETTINGS as SETTINGS
from conftest import TUNING_TARGET as TARGET

GRID = {"afl": [{"gamma0": 0.002}, {"gamma0": 0.02}], "sync": [{"gamma0": 0.002}, {"gamma0": 0.02}]}


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """The grid trained twice on one partition with a validation split: with digits' test labels, and
    with them shuffled (another test set, the same training and validation data)."""
    root = tmp_path_factory.mktemp("tuning")
    npz = root / "part.npz"
    argv = ["partition", "--dataset", "digits", "--clients", "5", "--alpha", "0.5", "--seed", "10",
            "--validation-fraction", "0.2", "--out", str(npz)]  # fmt: skip
    assert main(argv) == 0
    partition, digest = load_partition(npz), sha256(npz)
    dataset = load_dataset("digits", None)
    order = torch.randperm(len(dataset.test_labels), generator=torch.Generator().manual_seed(1))
    shuffled = dataclasses.replace(dataset, test_labels=dataset.test_labels[order])
    runs = {}
    for test_set, data in (("true", dataset), ("shuffled", shuffled)):
        runs[test_set] = []
        for name, points in GRID.items():
            for point in points:
                folder = (
                    root
                    / test_set
                    / TUNING_RUN_FOLDER.format(experiment="x", point=point_label(point), algorithm=name, J=2, seed=10)
                )
                settings = {"algorithm": name, "clients_per_round": 2, "seed": 10, **SETTINGS, **point}
                Simulation(make_config(settings), data, partition, folder, digest).run()
                runs[test_set].append(folder)
    return runs, npz.with_suffix(".json"), root


def test_the_choice_reads_the_validation_split_only(tuned, tmp_path):
    """Other test labels change every run's test accuracy and nothing of the choice."""
    runs, stats, root = tuned
    true = select(runs["true"], [stats], GRID, TARGET, BUDGET, tmp_path / "a", tmp_path / "a.json", "x")
    shuffled = select(runs["shuffled"], [stats], GRID, TARGET, BUDGET, tmp_path / "b", tmp_path / "b.json", "x")
    assert (tmp_path / "a.json").read_text() == (tmp_path / "b.json").read_text()
    assert pd.read_csv(true[-2]).equals(pd.read_csv(shuffled[-2]))  # the table: validation numbers only
    grids = [pd.read_csv(folder / "evaluations.csv") for folder in (runs["true"][0], runs["shuffled"][0])]
    assert not grids[0].test_accuracy.equals(grids[1].test_accuracy)
    assert grids[0].validation_accuracy.equals(grids[1].validation_accuracy)
    chosen = json.loads((tmp_path / "a.json").read_text())["chosen"]
    assert set(chosen) == {"afl", "sync"} and all(point in GRID[name] for name, point in chosen.items())


def test_a_grid_missing_a_point_is_refused(tuned):
    runs, stats, _ = tuned
    with pytest.raises(InputError, match="no afl run at gamma0_0.02 of seed 10"):
        tuning_table(runs["true"][:1] + runs["true"][2:], [stats], GRID, TARGET, BUDGET)


def test_a_run_trained_at_another_point_than_its_folder_says_is_refused(tuned):
    runs, stats, _ = tuned
    grid = {**GRID, "afl": [{"gamma0": 0.002}, {"gamma0": 0.03}]}
    with pytest.raises(InputError, match="is not a run of a grid point of afl"):
        tuning_table(runs["true"], [stats], grid, TARGET, BUDGET)


def test_the_fastest_point_wins_then_the_most_accurate_then_the_first_and_an_edge_is_named():
    points = [{"gamma0": g} for g in (0.001, 0.01, 0.1)]
    rows = [("a", "gamma0_0.001", 5.0, 0.9), ("a", "gamma0_0.01", 5.0, 0.95), ("a", "gamma0_0.1", 9.0, 0.99),
            ("b", "gamma0_0.001", 3.0, 0.9), ("b", "gamma0_0.01", 4.0, 0.9), ("b", "gamma0_0.1", 4.0, 0.9),
            ("c", "gamma0_0.001", 7.0, 0.9), ("c", "gamma0_0.01", 7.0, 0.9), ("c", "gamma0_0.1", 7.0, 0.9)]  # fmt: skip
    table = pd.DataFrame(rows, columns=["name", "point", "time_to_target", "accuracy_at_budget"]).assign(seed=0)
    chosen, on_edge = choose(table, {"a": points, "b": points, "c": points})
    assert chosen == {"a": {"gamma0": 0.01}, "b": {"gamma0": 0.001}, "c": {"gamma0": 0.001}}
    assert on_edge == ["b", "c"]


def test_the_time_to_stay_prefers_a_point_that_stays_to_one_that_reaches_first_and_swings():
    """`tune.metric: time_to_stay`: the table names its time column after the metric, and the choice
    follows it: the swinging point (reaches at 3 s, stays from 9 s) wins by the first reach only."""
    points = [{"gamma0": g} for g in (0.001, 0.01)]
    reach = pd.DataFrame([("a", "gamma0_0.001", 3.0, 0.8), ("a", "gamma0_0.01", 5.0, 0.8)],
                         columns=["name", "point", "time_to_target", "accuracy_at_budget"]).assign(seed=0)  # fmt: skip
    stay = reach.assign(time_to_target=[9.0, 5.0]).rename(columns={"time_to_target": "time_to_stay"})
    assert choose(reach, {"a": points})[0] == {"a": {"gamma0": 0.001}}
    assert choose(stay, {"a": points})[0] == {"a": {"gamma0": 0.01}}


def test_the_figures_title_names_the_time_to_stay_and_leaves_the_default_as_it_was():
    """The title says how the points were scored where that is the time to stay; the default metric's
    title is the one of before the setting (its figure's bytes unchanged), an edge warning after both."""
    assert tuning_heading("x: Tuning", "time_to_target", 0.78, []) == "x: Tuning"
    assert tuning_heading("x: Tuning", "time_to_stay", 0.78, ["afl"]) == (
        "x: Tuning (virtual time to stay above 78%)\nchoice on the grid's edge for afl"
    )


def test_a_setting_never_varied_at_the_choices_other_settings_is_flagged():
    """A search steps γ0 past the grid's edge at the best `a` only: the choice's `a` was tuned at other
    γ0s, never at its own, and the choice says so (in chosen.json and the figure's title)."""
    grid = [{"gamma0": g, "a": a} for g in (0.01, 0.02) for a in (0.5, 1.0)] + [{"gamma0": 0.04, "a": 1.0}]
    assert unvaried_settings({"afl": {"gamma0": 0.04, "a": 1.0}}, {"afl": grid}) == {"afl": ["a"]}
    assert unvaried_settings({"afl": {"gamma0": 0.02, "a": 1.0}}, {"afl": grid}) == {}  # a full cross there
    single = [{"gamma0": g, "a": 0.5} for g in (0.01, 0.02)]  # a never varied anywhere: nothing to flag
    assert unvaried_settings({"afl": single[0]}, {"afl": single}) == {}
    assert tuning_heading("x: Tuning", "time_to_target", 0.78, [], {"afl": ["a"]}) == (
        "x: Tuning\nnot varied at the choice's other settings: afl's a"
    )


def test_the_time_to_stay_is_read_from_each_runs_validation_grid(tuned, tmp_path):
    """Recomputed here from each run's evaluations.csv: the first time from which every later
    validation accuracy up to T is at or above the target (T where the last one is below); never
    before the first reach. The choice names its metric; a default choice writes no metric key (its
    bytes are those of before the setting)."""
    runs, stats, _ = tuned
    stay = tuning_table(runs["true"], [stats], GRID, TARGET, BUDGET, "time_to_stay")
    reach = tuning_table(runs["true"], [stats], GRID, TARGET, BUDGET)
    assert "time_to_target" not in stay and "time_to_stay" not in reach
    for folder, row in zip(runs["true"], stay.itertuples(), strict=True):
        grid = pd.read_csv(folder / "evaluations.csv").query("virtual_time <= @BUDGET")
        below = [i for i, accuracy in enumerate(grid.validation_accuracy) if accuracy < TARGET]
        expected = (
            BUDGET if below and below[-1] == len(grid) - 1 else grid.virtual_time.iloc[below[-1] + 1 if below else 0]
        )
        assert row.time_to_stay == expected
    assert (stay.time_to_stay.to_numpy() >= reach.time_to_target.to_numpy()).all()
    select(runs["true"], [stats], GRID, TARGET, BUDGET, tmp_path / "s", tmp_path / "s.json", "x", "time_to_stay")
    select(runs["true"], [stats], GRID, TARGET, BUDGET, tmp_path / "r", tmp_path / "r.json", "x")
    assert json.loads((tmp_path / "s.json").read_text())["metric"] == "time_to_stay"
    assert "metric" not in json.loads((tmp_path / "r.json").read_text())
    assert list(pd.read_csv(tmp_path / "s" / "tuning.csv").columns)[3] == "time_to_stay"


def test_a_budget_other_than_the_runs_is_refused_before_anything_is_written(tuned, tmp_path):
    runs, stats, _ = tuned
    for budget in (BUDGET / 2, BUDGET * 2):
        with pytest.raises(InputError, match=f"budget of {BUDGET}, not --virtual-time {budget:g}"):
            select(runs["true"], [stats], GRID, TARGET, budget, tmp_path / "out", tmp_path / "chosen.json", "x")
    assert not (tmp_path / "out").exists() and not (tmp_path / "chosen.json").exists()


@pytest.mark.parametrize(
    ("grid", "message"),
    [
        ('{"afl": 3}', "afl: expected a list of two or more grid points"),
        ('{"afl": [{"gamma0": 0.1}]}', "afl: expected a list of two or more"),
        ('{"afl": [{"gamma0": 0.1}, 7]}', "afl: expected a list of two or more"),
        ('{"afl": [{"gamma0": 0.1}, {"mixing": 0.5}]}', "the same settings, each point once"),
        ('{"afl": [{"gamma0": 0.1}, {"gamma0": 0.1}]}', "the same settings, each point once"),
        ("{}", "at least one tuned run name"),
        ("[1]", "expected a JSON object"),
    ],
)
def test_a_malformed_grid_is_refused_in_one_line(grid, message, tmp_path, capsys):
    argv = ["select", "--runs", str(tmp_path), "--grid", grid, "--partition-stats", str(tmp_path / "s.json"),
            "--target-accuracy", "0.8", "--virtual-time", "20", "--title", "x", "--out", str(tmp_path / "o"),
            "--chosen", str(tmp_path / "c.json")]  # fmt: skip
    with pytest.raises(SystemExit):
        main(argv)
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert message in error and "Traceback" not in error


def test_a_setting_whose_values_train_identical_runs_is_flagged_as_no_effect_and_its_value_a_tie_break(tmp_path):
    """FADAS's τ_c at 2 and 1000: its step min(η, 1/τ_max) reaches 1/τ_max only past 1/η versions (100 at
    η 0.01), which 2 clients in flight never are, so both train the same bytes; γ0's values do not. The
    choice says so (`no_effect`) and the figure's title too; without such a setting neither changes."""
    npz = tmp_path / "part.npz"
    argv = ["partition", "--dataset", "digits", "--clients", "5", "--alpha", "0.5", "--seed", "10",
            "--validation-fraction", "0.2", "--out", str(npz)]  # fmt: skip
    assert main(argv) == 0
    partition, digest, dataset = load_partition(npz), sha256(npz), load_dataset("digits", None)
    grid = {"fadas": [{"gamma0": g, "delay_threshold": t} for g in (0.002, 0.02) for t in (2, 1000)]}
    runs = []
    for point in grid["fadas"]:
        folder = tmp_path / TUNING_RUN_FOLDER.format(experiment="x", point=point_label(point), algorithm="fadas", J=2,
                                                     seed=10)  # fmt: skip
        settings = {"algorithm": "fadas", "clients_per_round": 2, "seed": 10, **SETTINGS, **point}
        Simulation(make_config(settings), dataset, partition, folder, digest).run()
        runs.append(folder)
    written = select(runs, [npz.with_suffix(".json")], grid, TARGET, BUDGET, tmp_path / "out", tmp_path / "c.json", "x")
    choice = json.loads((tmp_path / "c.json").read_text())
    assert choice["no_effect"] == {"fadas": ["delay_threshold"]} and choice["chosen"]["fadas"]["delay_threshold"] == 2
    assert "fingerprint" not in pd.read_csv(written[-2]).columns  # tuning.csv as before
    table = tuning_table(runs, [npz.with_suffix(".json")], grid, TARGET, BUDGET)
    assert without_effect(table, {"fadas": grid["fadas"][0]}, grid) == {"fadas": ["delay_threshold"]}
    assert without_effect(table.assign(fingerprint=table.point), {"fadas": grid["fadas"][0]}, grid) == {}
    assert tuning_heading("t", "time_to_target", 0.8, [], {}, {"fadas": ["delay_threshold"]}).endswith(
        "no effect at this point (identical runs; the value is the grid's first): fadas's delay_threshold"
    )
