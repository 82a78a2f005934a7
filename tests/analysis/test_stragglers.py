"""The straggler_claim figure from real runs laid out as the workflow lays out a severity sweep."""

import csv
import json
import math
import shutil
from pathlib import Path

import pandas as pd
import pytest

from asyncfl.analysis.stragglers import claim_table, draw_straggler_claim, trajectory
from asyncfl.cli import main
from asyncfl.planning.families import Family
from asyncfl.planning.layout import SEVERITY_RUN_FOLDER
from asyncfl.settings.errors import InputError

BUDGET = 12.0
SEVERITIES = {"even": {"speed_sigma": 0.0}, "tail": {"speed_sigma": 0.0, "slow_fraction": 0.3}}
ALGORITHMS = {"afl": {}, "sync": {}, "sync-over": {"over_selection": 0.5}}


def train_sweep(
    root: Path, evaluation: dict, budget: float = BUDGET, alpha: float = 0.5
) -> tuple[Path, list[Path], Path]:
    """Two severities × AFL, sync and a sync variant × one seed, trained by `asyncfl train-many` (the MLP:
    a CNN's sample costs about 4× on a CPU, and these tests need runs, not a model) on a partition of
    Dirichlet `alpha`."""
    partition = root / "part.npz"
    argv = ["partition", "--dataset", "digits", "--clients", "8", "--alpha", str(alpha), "--seed", "0",
            "--out", str(partition)]  # fmt: skip
    assert main(argv) == 0
    plan, runs = [], []
    for severity, system in SEVERITIES.items():
        for name, variant in ALGORITHMS.items():
            out = root / SEVERITY_RUN_FOLDER.format(experiment="x", severity=severity, algorithm=name, J=3, seed=0)
            settings = {"algorithm": name.split("-")[0], "model": "mlp", "clients_per_round": 3, "seed": 0,
                        "local_epochs": 1, "batch_size": 16, "gamma0": 0.01, "rounds": 10_000,
                        "max_virtual_time": budget, "eval_gradient": False, **evaluation, **system,
                        **variant}  # fmt: skip
            plan.append({"partition": str(partition), "out": str(out), "settings": settings})
            runs.append(out)
    (root / "plan.json").write_text(json.dumps(plan))
    assert main(["train-many", "--dataset", "digits", "--plan", str(root / "plan.json")]) == 0
    return root, runs, partition.with_suffix(".json")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> tuple[Path, list[Path], Path]:
    """Evaluated every 3 client updates, as the quick pipeline's sweep was before its time grid."""
    return train_sweep(tmp_path_factory.mktemp("sweep"), {"eval_every_updates": 3})


@pytest.fixture(scope="module")
def grid_sweep(tmp_path_factory) -> tuple[Path, list[Path], Path]:
    """Evaluated on a time grid of 0.5 virtual s (and at the last round only otherwise)."""
    return train_sweep(tmp_path_factory.mktemp("grid"), {"eval_every": 100_000, "eval_every_seconds": 0.5})


def evaluations(run: Path) -> list[tuple[float, float]]:
    rows = csv.DictReader((run / "metrics.csv").read_text().splitlines())
    return [(float(row["virtual_time"]), float(row["test_accuracy"])) for row in rows if row["test_accuracy"]]


def test_the_table_is_each_runs_first_time_at_the_target_and_its_accuracy_at_the_budget(sweep):
    _, runs, stats = sweep
    target = 0.15
    table = claim_table(runs, [stats], SEVERITIES, target, BUDGET)
    assert len(table) == len(runs)
    assert table.equals(claim_table(runs[::-1], [stats], SEVERITIES, target, BUDGET))  # one order
    for run in runs:
        severity, name = run.parents[2].name, run.parents[1].name
        (row,) = table[(table.severity == severity) & (table.algorithm == name)].itertuples()
        in_budget = [(time, accuracy) for time, accuracy in evaluations(run) if time <= BUDGET]
        assert evaluations(run)[-1][0] >= BUDGET > in_budget[-1][0]  # the run went on to the budget
        assert row.accuracy_at_budget == in_budget[-1][1]
        reached = [time for time, accuracy in in_budget if accuracy >= target]
        assert (row.time_to_target == reached[0]) if reached else math.isnan(row.time_to_target)
        stays = [time for index, (time, _) in enumerate(in_budget) if all(a >= target for _, a in in_budget[index:])]
        assert (row.time_to_stay == stays[0]) if stays else math.isnan(row.time_to_stay)


def test_a_target_no_run_reaches_is_marked_not_dropped(sweep, tmp_path):
    _, runs, stats = sweep
    written = draw_straggler_claim(runs, [stats], SEVERITIES, [1.0, 0.5], BUDGET, tmp_path, "x")
    figures = [f"{name}.{ext}" for name in ("straggler_claim", "straggler_curves") for ext in ("png", "pdf")]
    maps = [f"{name}.{ext}" for name in ("async_advantage", "verdict_over_budget", "verdict_summary")
            for ext in ("png", "pdf")]  # fmt: skip
    tables = ["straggler_claim.csv", "straggler_verdicts.csv", "verdict_over_budget.csv"]
    assert [path.name for path in written] == [*figures, *maps, *tables]
    assert all(path.stat().st_size > 1000 for path in written if path.suffix != ".csv")
    table = pd.read_csv(tmp_path / "straggler_claim.csv")
    assert len(table) == len(runs) and table.time_to_target.isna().all()  # every run is in it, without a time
    verdicts = pd.read_csv(tmp_path / "straggler_verdicts.csv")
    assert set(verdicts.verdict) == {"too few seeds"}  # one seed: no verdict is drawn from it
    assert list(verdicts.target.unique()) == [1.0, 0.5]  # every comparison at each target, the figures' first
    never = verdicts[verdicts.target == 1.0]
    assert (never.difference == 0).all()  # never reached: both counted as T


def test_runs_of_another_budget_or_severity_are_refused(sweep):
    _, runs, stats = sweep
    with pytest.raises(InputError, match="ran to a virtual-time budget of 12.0, not --virtual-time 20.0"):
        claim_table(runs, [stats], SEVERITIES, 0.5, 20.0)
    with pytest.raises(InputError, match="no run of severity 'steep' among --runs"):
        claim_table(runs, [stats], {**SEVERITIES, "steep": {}}, 0.5, BUDGET)
    with pytest.raises(InputError, match=r"runs of severities \['tail'\] are not among --severities"):
        claim_table(runs, [stats], {"even": SEVERITIES["even"]}, 0.5, BUDGET)
    without_afl = [run for run in runs if run.parents[1].name != "afl"]
    with pytest.raises(InputError, match="no AFL run of severity 'even' among --runs"):
        claim_table(without_afl, [stats], SEVERITIES, 0.5, BUDGET)
    misspelt = {**SEVERITIES, "tail": {**SEVERITIES["tail"], "slow_fractoin": 0.3}}
    with pytest.raises(InputError, match="--severities tail: 'slow_fractoin' is not a run setting"):
        claim_table(runs, [stats], misspelt, 0.5, BUDGET)


def test_swapped_severity_folders_are_refused(sweep):
    """The severity is read from the folder's name: a run whose settings are another severity's is
    refused, not drawn under the wrong label."""
    _, runs, stats = sweep
    swapped = {"even": SEVERITIES["tail"], "tail": SEVERITIES["even"]}
    with pytest.raises(InputError, match="was trained with slow_fraction = 0.0, not severity even's 0.3"):
        claim_table(runs, [stats], swapped, 0.5, BUDGET)


def test_a_severity_missing_a_synchronous_run_is_refused(sweep):
    _, runs, stats = sweep
    without = [run for run in runs if not (run.parents[1].name == "sync" and run.parents[2].name == "tail")]
    with pytest.raises(InputError, match="no sync run of seed 0 at severity 'tail' among --runs"):
        claim_table(without, [stats], SEVERITIES, 0.5, BUDGET)


def test_on_a_time_grid_the_times_and_the_work_to_the_target_are_read_on_the_grid(grid_sweep):
    """Each run's first grid instant at or past the target, the client-seconds spent by then, and its
    accuracy at the last instant within the budget: evaluations.csv's, not metrics.csv's."""
    _, runs, stats = grid_sweep
    target = 0.15
    table = claim_table(runs, [stats], SEVERITIES, target, BUDGET)
    assert (table.resolution == 0.5).all()
    for run in runs:
        severity, name = run.parents[2].name, run.parents[1].name
        (row,) = table[(table.severity == severity) & (table.algorithm == name)].itertuples()
        grid = pd.read_csv(run / "evaluations.csv")
        grid = grid[grid.virtual_time <= BUDGET]
        assert grid.virtual_time.tolist() == [0.5 * k for k in range(1, len(grid) + 1)]
        reached = grid[grid.test_accuracy >= target]
        assert row.time_to_target == reached.virtual_time.iloc[0] and row.work_to_target == reached.busy_seconds.iloc[0]
        assert row.accuracy_at_budget == grid.test_accuracy.iloc[-1]
    over = table[table.algorithm == "sync-over"].work_to_target.to_numpy()
    assert (over > 0).all()  # over-selection's discarded work is in its count


def test_runs_evaluated_at_different_resolutions_are_refused(sweep, grid_sweep):
    mixed = [*grid_sweep[1][:-1], sweep[1][-1]]
    with pytest.raises(InputError, match="different resolutions"):
        claim_table(mixed, [grid_sweep[2]], SEVERITIES, 0.5, BUDGET)


def test_an_edited_time_grid_is_refused(grid_sweep, tmp_path):
    import shutil

    _, runs, stats = grid_sweep
    copies = [tmp_path / run.relative_to(grid_sweep[0]) for run in runs]
    for run, copy in zip(runs, copies, strict=True):
        shutil.copytree(run, copy)
    grid = copies[0] / "evaluations.csv"
    grid.write_text(grid.read_text().replace("\n0.5,", "\n0.25,", 1))
    with pytest.raises(InputError, match="evaluations.csv is not the file its run wrote"):
        claim_table(copies, [stats], SEVERITIES, 0.5, BUDGET)


def test_a_run_with_no_evaluation_by_the_budget_is_refused_not_dropped(tmp_path):
    """Evaluated only at its last aggregation, past T: once dropped from the claim without a word (its
    severity's verdicts vanished), or an AttributeError where every run was."""
    _, runs, stats = train_sweep(tmp_path, {"eval_every_updates": 100_000})
    with pytest.raises(InputError, match=r"has no evaluation at or before the budget T = 12 virtual s \(its first at"):
        claim_table(runs, [stats], SEVERITIES, 0.5, BUDGET)


@pytest.mark.parametrize(
    ("targets", "named"),
    [
        ([0.5, 0.5], "(--target-accuracy and --other-targets)"),
        ([0.5, 0.7, 0.7], "(--other-targets)"),
        ([math.nan], "not a number in (0, 1]"),
        ([0.5, 1.5], "not a number in (0, 1]"),
    ],
)
def test_repeated_or_impossible_targets_are_refused_before_anything_is_written(sweep, tmp_path, targets, named):
    """A repeat names where the user gave it: the command's flags, never the config's keys (ST09)."""
    _, runs, stats = sweep
    with pytest.raises(InputError, match="target accuracy") as error:
        draw_straggler_claim(runs, [stats], SEVERITIES, targets, BUDGET, tmp_path / "out", "x")
    assert named in str(error.value) and "_" not in str(error.value).split(":")[0]
    assert "\n" not in str(error.value) and not (tmp_path / "out").exists()


def test_the_figures_and_tables_are_written_together_or_not_at_all(sweep, tmp_path):
    """The verdicts' CSV cannot be written (a folder stands there): no figure is written either, and
    the outputs of the previous call stay as they were, not half replaced."""
    _, runs, stats = sweep
    written = draw_straggler_claim(runs, [stats], SEVERITIES, [0.5], BUDGET, tmp_path, "old")
    before = {path: path.read_bytes() for path in written}
    (tmp_path / "straggler_verdicts.csv").unlink()
    (tmp_path / "straggler_verdicts.csv").mkdir()
    with pytest.raises(InputError, match="straggler_verdicts.csv is a folder"):
        draw_straggler_claim(runs, [stats], SEVERITIES, [0.5, 0.3], BUDGET, tmp_path, "new")
    assert all(path.read_bytes() == before[path] for path in written if path.is_file())
    assert not [path.name for path in tmp_path.iterdir() if path.name.startswith(".")]


@pytest.mark.parametrize(
    ("seeds", "message"),
    [
        ([5], r"--replication-seeds \[5\] have no runs among --runs \(their seeds: \[0\]\)"),
        ([0], "--replication-seeds name every seed of the runs; leave some as the discovery set"),
        ([0, 0], r"--replication-seeds \[0, 0\] repeat a seed"),
    ],
)
def test_replication_seeds_without_runs_or_without_a_discovery_set_are_refused(sweep, tmp_path, seeds, message):
    _, runs, stats = sweep
    with pytest.raises(InputError, match=message) as error:
        draw_straggler_claim(runs, [stats], SEVERITIES, [0.5], BUDGET, tmp_path / "out", "x", seeds)
    assert "\n" not in str(error.value) and not (tmp_path / "out").exists()


def test_verdicts_at_a_shorter_budget_are_those_of_runs_trained_to_it(grid_sweep, tmp_path):
    """The runs cut at T/2 give the verdicts that runs trained only to T/2 give (what a run did before T
    does not depend on T), beside the verdicts at T, which stay as they were without --other-budgets."""
    root, runs, stats = grid_sweep
    alone = draw_straggler_claim(runs, [stats], SEVERITIES, [0.15, 0.3], BUDGET, tmp_path / "alone", "x")
    both = draw_straggler_claim(runs, [stats], SEVERITIES, [0.15, 0.3], BUDGET, tmp_path / "both", "x", (), [6.0])
    verdicts = pd.read_csv(tmp_path / "both" / "straggler_verdicts.csv")
    assert list(verdicts.columns[:3]) == ["target", "budget", "seed_set"] and list(verdicts.budget.unique()) == [12, 6]
    at_t = verdicts[verdicts.budget == BUDGET].drop(columns="budget").reset_index(drop=True)
    pd.testing.assert_frame_equal(at_t, pd.read_csv(tmp_path / "alone" / "straggler_verdicts.csv"))
    for first, second in zip(alone, both, strict=True):  # the figures and the claim's table: T's, unchanged
        assert first.name == second.name
        assert first.name == "straggler_verdicts.csv" or first.read_bytes() == second.read_bytes(), first.name
    curve = pd.read_csv(tmp_path / "both" / "verdict_over_budget.csv")
    at_half = curve[curve.budget == 6.0].drop(columns=["budget", "holds_from"]).reset_index(drop=True)
    cut_primary = verdicts[(verdicts.budget == 6) & (verdicts.target == 0.15) & (verdicts.metric == "time_to_stay")]
    assert list(at_half.difference) == pytest.approx(list(cut_primary.difference))  # the curve at T/2: the cut's
    short = train_sweep(tmp_path / "short", {"eval_every": 100_000, "eval_every_seconds": 0.5}, budget=6.0)
    draw_straggler_claim(short[1], [short[2]], SEVERITIES, [0.15, 0.3], 6.0, tmp_path / "short_out", "x")
    trained = pd.read_csv(tmp_path / "short_out" / "straggler_verdicts.csv")
    cut = verdicts[verdicts.budget == 6].drop(columns="budget").reset_index(drop=True)
    pd.testing.assert_frame_equal(cut, trained)
    assert (cut.reference_accuracy != at_t.reference_accuracy).any()  # the cut changed what was read


def test_pooled_seed_sets_without_replication_seeds_are_refused_before_anything_is_written(sweep, tmp_path):
    _, runs, stats = sweep
    with pytest.raises(InputError, match="--pooled pools the discovery and replication seed sets; name") as error:
        draw_straggler_claim(runs, [stats], SEVERITIES, [0.5], BUDGET, tmp_path / "out", "x", pooled=True)
    assert "\n" not in str(error.value) and not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("budgets", "message"),
    [
        ([12.0], r"--other-budgets 12.0 is not a virtual time in \(0, 12\)"),
        ([13.0], r"--other-budgets 13.0 is not a virtual time in \(0, 12\)"),
        ([math.nan], "--other-budgets nan is not a virtual time"),
        ([0.0], "--other-budgets 0.0 is not a virtual time"),
        ([6.0, 3.0, 6.0], "--other-budgets gives 6.0 twice"),
        (
            [0.25],
            r"no evaluation at or before --other-budgets 0.25 \(a workflow config's other_budgets\): give a budget",
        ),
    ],
)
def test_impossible_other_budgets_are_refused_before_anything_is_written(grid_sweep, tmp_path, budgets, message):
    _, runs, stats = grid_sweep
    with pytest.raises(InputError, match=message) as error:
        draw_straggler_claim(runs, [stats], SEVERITIES, [0.5], BUDGET, tmp_path / "out", "x", (), budgets)
    assert "\n" not in str(error.value) and not (tmp_path / "out").exists()


def test_a_timing_only_run_is_refused_not_judged_as_staying_above_every_target(tmp_path):
    """Its accuracy is empty on the time grid: read as "never below the target", it once stayed above every
    target from its first evaluation (time_to_stay 1 s, issue 94)."""
    record = {"config": {"trainer": "none", "eval_every_seconds": 1.0}}
    with pytest.raises(InputError, match="is a timing-only run \\(trainer: none\\): it has no test accuracy"):
        trajectory(tmp_path, record)


def test_a_margin_reaches_the_verdicts_table_and_one_as_long_as_a_budget_is_refused(sweep, tmp_path):
    """With --equivalence-margin the table gives each comparison's TOST p (raw and Holm-adjusted) and the
    margin; a margin as long as the shortest budget read (every difference lies within it) is refused
    before anything is written."""
    _, runs, stats = sweep
    draw_straggler_claim(runs, [stats], SEVERITIES, [0.5], BUDGET, tmp_path / "out", "x", (), [6.0], 3.0)
    verdicts = pd.read_csv(tmp_path / "out" / "straggler_verdicts.csv")
    assert {"p_equivalence", "p_equivalence_holm"} <= set(verdicts.columns) and set(verdicts.equivalence_margin) == {3}
    for margin, shortest in ((12.0, 6), (6.0, 6)):
        with pytest.raises(InputError, match=rf"--equivalence-margin {margin:g} s is not below the shortest budget "
                           rf"\({shortest:g} s\)") as error:  # fmt: skip
            draw_straggler_claim(runs, [stats], SEVERITIES, [0.5], BUDGET, tmp_path / "no", "x", (), [6.0], margin)
        assert "\n" not in str(error.value) and not (tmp_path / "no").exists()


def test_the_kept_minimum_re_judges_the_sweep_to_the_same_bytes_and_an_edit_to_it_is_refused(grid_sweep, tmp_path):
    """A referee who kept each run's run.json and evaluations.csv alone (no metrics.csv, events.csv nor
    partition statistics) gets, from the command line, the verdict and claim tables and figures that
    every file gave; an evaluations.csv edited after the run is refused by its run.json's hash."""
    root, runs, stats = grid_sweep
    severities = json.dumps(SEVERITIES)
    common = ["stragglers", "--severities", severities, "--target-accuracy", "0.3", "--other-targets", "0.15",
              "--virtual-time", str(BUDGET), "--equivalence-margin", "3"]  # fmt: skip
    full = ["--runs", *map(str, runs), "--partition-stats", str(stats), "--out", str(tmp_path / "full")]
    assert main([*common, *full]) == 0
    kept = []
    for run in runs:
        copy = tmp_path / "kept" / run.relative_to(root)
        copy.mkdir(parents=True)
        for name in ("run.json", "evaluations.csv"):
            (copy / name).write_bytes((run / name).read_bytes())
        kept.append(copy)
    assert main([*common, "--runs", *map(str, kept), "--out", str(tmp_path / "kept_out")]) == 0
    written = sorted(path.name for path in (tmp_path / "full").iterdir())
    assert written == sorted(path.name for path in (tmp_path / "kept_out").iterdir())
    for name in written:
        assert (tmp_path / "full" / name).read_bytes() == (tmp_path / "kept_out" / name).read_bytes(), name
    edited = kept[0] / "evaluations.csv"
    edited.write_text(edited.read_text().replace("0.", "0.9", 1))
    with pytest.raises(InputError, match="evaluations.csv is not the file its run wrote") as error:
        claim_table(kept, [], SEVERITIES, 0.3, BUDGET)
    assert "\n" not in str(error.value)
    edited.write_bytes((runs[0] / "evaluations.csv").read_bytes())
    (kept[1] / "evaluations.csv").unlink()
    with pytest.raises(InputError, match="evaluations.csv is missing beside its run.json"):
        claim_table(kept, [], SEVERITIES, 0.3, BUDGET)


def test_a_declared_family_adjusts_one_rows_runs_over_every_row_and_refuses_runs_outside_it(sweep, tmp_path):
    """One severity's runs given with the family the sweep declared (both severities): its comparisons are
    adjusted as two of four, family_unrun 2, where without the declaration they are a family of two; a
    family that leaves out a run name given is refused in one line before anything is written."""
    root, runs, stats = sweep
    even = [run for run in runs if "/even/" in run.as_posix()]
    one_row = json.dumps({"even": SEVERITIES["even"]})
    common = ["stragglers", "--runs", *map(str, even), "--partition-stats", str(stats), "--severities", one_row,
              "--target-accuracy", "0.5", "--virtual-time", str(BUDGET)]  # fmt: skip
    family = {"severities": list(SEVERITIES), "names": list(ALGORITHMS)}
    declared_with_power = ["--family", json.dumps(family), "--power", "0.8", "--out", str(tmp_path / "declared")]
    assert main([*common, *declared_with_power]) == 0
    assert main([*common, "--out", str(tmp_path / "at_hand")]) == 0
    declared = pd.read_csv(tmp_path / "declared" / "straggler_verdicts.csv")
    at_hand = pd.read_csv(tmp_path / "at_hand" / "straggler_verdicts.csv")
    assert set(at_hand.family_size) == {2} and "family_unrun" not in at_hand
    assert set(declared.family_size) == {4} and set(declared.family_unrun) == {2}
    assert "detectable_difference" in declared and "detectable_difference" not in at_hand  # NaN: one seed
    adjusted = ["p_holm", "family_size", "family_unrun", "verdict", "detectable_difference"]
    pd.testing.assert_frame_equal(declared.drop(columns=adjusted),
                                  at_hand.drop(columns=["p_holm", "family_size", "verdict"]))  # fmt: skip
    with pytest.raises(InputError, match="--family does not hold the sweep's run name 'sync-over'") as error:
        draw_straggler_claim(runs, [stats], SEVERITIES, [0.5], BUDGET, tmp_path / "no", "x",
                             family=Family(tuple(SEVERITIES), ("afl", "sync")))  # fmt: skip
    assert "\n" not in str(error.value) and not (tmp_path / "no").exists()


def test_a_variant_run_in_its_plain_names_folder_or_a_run_of_another_partition_is_refused(grid_sweep, tmp_path):
    """run.json names the algorithm, not the variant: a sync-over run copied into sync's folder at one
    severity once failed with a traceback (or, in every such folder, was paired as sync silently). A run
    trained on another partition than its seed's is refused though no partition statistics are given."""
    root, runs, _ = grid_sweep

    def copied(replace: str, by: Path) -> list[Path]:
        folder = tmp_path / replace.strip("/").replace("/", "_")
        copies = [folder / run.relative_to(root) for run in runs]
        for run, copy in zip(runs, copies, strict=True):
            shutil.copytree(by if f"/{replace}/" in run.as_posix() else run, copy)
        return copies

    over = next(run for run in runs if "/even/sync-over/" in run.as_posix())
    with pytest.raises(InputError, match=r"both sync runs, differ in over_selection \(0.0 against 0.5\)") as error:
        claim_table(copied("even/sync", over), [], SEVERITIES, 0.3, BUDGET)
    assert "\n" not in str(error.value)
    other = train_sweep(tmp_path / "alpha5", {"eval_every": 100_000, "eval_every_seconds": 0.5}, alpha=5.0)
    afl = next(run for run in other[1] if "/even/afl/" in run.as_posix())
    with pytest.raises(InputError, match="was trained on another partition than .* of the same seed 0") as error:
        claim_table(copied("even/afl", afl), [], SEVERITIES, 0.3, BUDGET)
    assert "\n" not in str(error.value)
