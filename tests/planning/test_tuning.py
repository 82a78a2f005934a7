"""An experiment's `tune:` block: its grids, its checks (one line naming the key) and the tuning job the
planner makes of it."""

import copy

import pytest
import yaml

from asyncfl.planning.layout import TuningLayout
from asyncfl.planning.plan import TUNING, plan_workflow
from asyncfl.planning.tuning import (
    MAX_LABEL,
    check_choice,
    next_points,
    point_label,
    search_axes,
    searchable_points,
    step_past,
    tuned_names,
    tuning_points,
)
from asyncfl.planning.workflow_config import check_workflow_config
from asyncfl.settings.errors import InputError
from conftest import QUICK_CONFIG

QUICK = yaml.safe_load(QUICK_CONFIG.read_text())
GRID = QUICK["experiments"]["digits_stragglers"]["tune"]["grid"]["gamma0"]


def with_tune(**tune) -> dict:
    config = copy.deepcopy(QUICK)
    config["experiments"]["digits_stragglers"]["tune"] = tune
    return config


def test_each_run_name_gets_the_points_of_the_settings_its_algorithm_reads():
    config = with_tune(seeds=[10], grid={"gamma0": [0.005, 0.01], "mixing": [0.5, 1.0]},
                       by_algorithm={"fedasync-m7": {"fedasync_alpha": [0.3, 0.9]}})  # fmt: skip
    experiment = config["experiments"]["digits_stragglers"]
    assert len(tuning_points(experiment, "afl")) == 4  # γ0 × β: AFL reads both
    assert tuning_points(experiment, "sync") == [{"gamma0": 0.005}, {"gamma0": 0.01}]  # sync reads no β
    assert len(tuning_points(experiment, "fedasync-m7")) == 4
    assert point_label({"gamma0": 0.005, "mixing": 1.0}) == "gamma0_0.005-mixing_1.0"
    assert tuned_names(experiment) == experiment["algorithms"]


def test_the_planner_makes_one_tuning_job_at_the_first_severity_on_the_tuning_seeds():
    plan = plan_workflow(QUICK)["digits_stragglers"]
    (tuning,) = plan.tunings
    assert tuning.shape == TUNING and plan.job("tuning") is tuning and plan.tuning_layouts == (TuningLayout(plan.name),)
    assert plan.chosen_input() == {"chosen": "results/digits_stragglers/tuning/chosen.json"}
    runs = tuning.runs
    assert len(runs) == 8 * 2  # every run name × two γ0, one tuning seed
    assert {run.seed for run in runs} == {10} and {run.severity for run in runs} == {"sigma0"}
    afl = [run for run in runs if run.name == "afl"]
    assert [run.settings["gamma0"] for run in afl] == [0.01, 0.02]
    assert afl[0].folder == "results/digits_stragglers/tuning/gamma0_0.01/afl/J5/seed10"
    assert afl[0].partition == "results/partitions/digits_alpha0.1_C10_seed10_val0.2.npz"
    assert plan.tuning_partitions == ("results/partitions/digits_alpha0.1_C10_seed10_val0.2.npz",)
    assert not any(run.folder.startswith("results/digits_stragglers/tuning") for run in plan.runs)


@pytest.mark.parametrize(
    ("tune", "drop", "message"),
    [
        ({"seeds": [0], "grid": {"gamma0": [0.005, 0.01]}}, None, r"tune.seeds \[0\] are also .*seeds"),
        ({"seeds": [10], "grid": {"gamma0": [0.01]}}, None, "tune.grid.gamma0 has one value"),
        ({"seeds": [10], "grid": {"gamma0": [0.005, 0.01]}}, "validation_fraction", "set .*validation_fraction"),
        ({"seeds": [10], "grid": {"gamma0": [0.005, -1.0]}}, None, "gamma0 must be a finite number > 0"),
        ({"seeds": [10], "severity": "calm", "grid": {"gamma0": [0.005, 0.01]}}, None, "'calm' is not one of"),
        ({"seeds": [10], "by_algorithm": {"scaffold": {"gamma0": [1.0, 2.0]}}}, None, "by_algorithm.scaffold is not"),
        ({"seeds": [10], "grid": {"max_virtual_time": [1.0, 2.0]}}, None, "max_virtual_time"),
        ({"seeds": [10], "grid": {"gamma0": [0.01, 0.02, 0.01]}}, None, "lists 0.01 twice"),
        # U21 and its family: how a run is scored, when it ends, how the machine computes it
        ({"seeds": [10], "grid": {"eval_every": [1, 2]}}, None, "grid.eval_every is a setting of evaluation, not"),
        ({"seeds": [10], "by_algorithm": {"afl": {"kappa": [0.0, 0.1]}}}, None, "kappa is a setting of when the run"),
        ({"seeds": [10], "grid": {"precision": ["fp32", "bf16"]}}, None, "precision is a setting of the machine"),
        ({"seeds": [10], "grid": {"time_scale": [1.0, 2.0]}}, None, "time_scale is a setting of the machine"),
        ({"seeds": [10], "grid": {"round_deadline": [2.0, 4.0]}}, None, "variants.sync-deadline sets round_deadline"),
        ({"seeds": [10], "grid": {"concurrency": [5, 7]}}, None, "variants.afl-m7 sets concurrency"),
        ({"seeds": [10], "grid": {"speed_sigma": [0.5, 1.0]}}, None, "speed_sigma is the clients' world"),
        ({"seeds": [10], "by_algorithm": {"sync-partial": {"round_deadline": [2.0, 4.0]}}}, None,
         "variants.sync-partial sets round_deadline"),
        ({"seeds": [10], "grid": {"gamma0": [0.01, 0.02]}, "by_algorithm": {"afl": {"gamma0": [0.1, 0.2]}}}, None,
         "tune.grid sets gamma0"),
        ({"seeds": [10], "by_algorithm": {"afl": {"latency_median": [1.0, 2.0]}}}, None,
         "by_algorithm.afl.latency_median is the clients' world, not a setting of an algorithm"),
        ({"seeds": [10], "grid": {"availability_trace": ["a.csv", "b.csv"]}}, None,
         "grid.availability_trace is the clients' world"),
        ({"seeds": [10], "grid": {"gamma0": [0.01, 0.02]}, "virtual_time": 1e12}, None,
         r"tune.virtual_time 1000000000000.0 is not a virtual time in \(0, 30\], the final runs' budget"),
        ({"seeds": [10], "grid": {"gamma0": [0.01, 0.02]}, "virtual_time": float("nan")}, None,
         r"tune.virtual_time nan is not a virtual time in \(0, 30\]"),
        ({"seeds": [10], "grid": {"gamma0": [0.01, 0.02]}, "virtual_time": 0}, None,
         r"tune.virtual_time 0 is not a virtual time"),
        ({"seeds": [10], "grid": {"gamma0": [0.01, 0.02]}, "virtual_time": "15"}, None,
         r"tune.virtual_time '15' is not a virtual time"),
        ({"seeds": [10], "grid": {"gamma0": [0.01, 0.02]}, "virtual_time": True}, None,
         r"tune.virtual_time True is not a virtual time"),
        ({"seeds": [10], "grid": {"gamma0": [0.01, 0.02]}, "metric": "time_to_reach"}, None,
         r"tune.metric 'time_to_reach' is not a tuning metric: give one of time_to_target, time_to_stay"),
        ({"seeds": [10], "grid": {"gamma0": [0.01, 0.02]}, "metric": ""}, None, r"tune.metric '' is not a tuning"),
        ({"seeds": [10], "grid": {"gamma0": [0.01, 0.02]}, "metric": float("nan")}, None,
         r"tune.metric nan is not a tuning metric"),
        ({"seeds": [10], "grid": {"gamma0": [0.01, 0.02]}, "metric": ["time_to_stay"]}, None,
         r"tune.metric \['time_to_stay'\] is not a tuning metric"),
        ({"seeds": [10], "grid": {"gamma0": [0.01, 0.02]}, "metric": True}, None,
         r"tune.metric True is not a tuning metric"),
        ({"seeds": [10], "grid": {"gamma0": [0.01, 0.02]}, "per_severity": "yes"}, None,
         r"tune.per_severity 'yes' is not true or false"),
        ({"seeds": [10], "grid": {"gamma0": [0.01, 0.02]}, "per_severity": float("nan")}, None,
         r"tune.per_severity nan is not true or false"),
        ({"seeds": [10], "grid": {"gamma0": [0.01, 0.02]}, "per_severity": True, "severity": "heavy_tail"}, None,
         r"tune.severity names the one severity tuned at, and .*tune.per_severity tunes at every one"),
        ({"seeds": [10], "grid": {"gamma0": [0.01, 0.02]}, "virtual_time": {"sigma0": 10,
          "heavy_tail": 20}}, None,
         r"tune.virtual_time gives each severity its own tuning budget, and only .*per_severity tunes at each"),
        ({"seeds": [10], "grid": {"gamma0": [0.01, 0.02]}, "per_severity": True,
          "virtual_time": {"sigma0": 10}}, None,
         r"tune.virtual_time has no budget for severity 'heavy_tail'; give every severity of .* one"),
        ({"seeds": [10], "grid": {"gamma0": [0.01, 0.02]}, "per_severity": True,
          "virtual_time": {"sigma0": 10, "heavy_tail": 20, "../calm": 5}}, None,
         r"tune.virtual_time names '../calm', not one of .*severities; give each severity its budget"),
        ({"seeds": [10], "grid": {"gamma0": [0.01, 0.02]}, "per_severity": True, "virtual_time": {}}, None,
         r"tune.virtual_time has no budget for severity 'sigma0'"),
        ({"seeds": [10], "grid": {"gamma0": [0.01, 0.02]}, "per_severity": True,
          "virtual_time": {"sigma0": 10, "heavy_tail": float("nan")}}, None,
         r"tune.virtual_time.heavy_tail nan is not a virtual time in \(0, 30\]"),
        ({"seeds": [10], "grid": {"gamma0": [0.01, 0.02]}, "per_severity": True,
          "virtual_time": {"sigma0": 10, "heavy_tail": 1e12}}, None,
         r"tune.virtual_time.heavy_tail 1000000000000.0 is not a virtual time in \(0, 30\], the final runs'"),
        ({"seeds": [10], "grid": {"gamma0": [0.01, 0.02]}, "per_severity": True,
          "virtual_time": {"sigma0": True, "heavy_tail": 20}}, None,
         r"tune.virtual_time.sigma0 True is not a virtual time"),
    ],
    ids=["shared-seeds", "one-value", "no-validation", "bad-value", "unknown-severity", "unknown-name", "owned",
         "repeated", "evaluation", "ending", "machine", "machine-clock",
         "variant-key", "variant-m", "severity-key", "own-variant-key", "both-grids", "world",
         "world-trace", "budget-huge", "budget-nan", "budget-zero", "budget-text", "budget-bool", "metric-typo",
         "metric-empty", "metric-nan", "metric-list", "metric-bool", "per-severity-text", "per-severity-nan",
         "per-severity-and-severity", "budgets-without-per-severity", "budgets-missing", "budgets-unknown",
         "budgets-empty", "budgets-nan", "budgets-huge", "budgets-bool"],
)  # fmt: skip
def test_a_bad_tune_block_is_refused_in_one_line(tune, drop, message):
    config = with_tune(**tune)
    if drop:
        del config["experiments"]["digits_stragglers"][drop]
    with pytest.raises(InputError, match=message) as error:
        check_workflow_config(config)
    assert "\n" not in str(error.value)


def test_the_tuning_trains_to_its_own_budget_and_the_final_runs_to_the_experiments():
    """tune.virtual_time: the tuning runs stop there (and are scored there: the workflow's
    --virtual-time); the final runs keep budget.virtual_time; without it every run is as before."""
    before = plan_workflow(with_tune(seeds=[10], grid={"gamma0": [0.01, 0.02]}))["digits_stragglers"]
    shorter = plan_workflow(with_tune(seeds=[10], grid={"gamma0": [0.01, 0.02]}, virtual_time=15))
    (tuning,), (shorter_tuning,) = before.tunings, shorter["digits_stragglers"].tunings
    assert {run.settings["max_virtual_time"] for run in tuning.runs} == {30}
    assert {run.settings["max_virtual_time"] for run in shorter_tuning.runs} == {15}
    assert shorter["digits_stragglers"].runs == before.runs
    same = [run.settings for run in tuning.runs]
    assert same == [run.settings for run in plan_workflow(QUICK)["digits_stragglers"].tunings[0].runs]


def test_a_grid_over_a_key_a_severity_sets_is_refused():
    config = with_tune(seeds=[10], grid={"local_epochs": [1, 2]})
    config["experiments"]["digits_stragglers"]["severities"]["heavy_tail"]["local_epochs"] = 2
    with pytest.raises(InputError, match="severities.heavy_tail sets local_epochs, and a grid over it would change"):
        check_workflow_config(config)


def test_tune_belongs_to_severity_sweeps():
    config = copy.deepcopy(QUICK)
    config["experiments"]["digits_mlp"]["tune"] = {"seeds": [10], "grid": {"gamma0": [0.005, 0.01]}}
    with pytest.raises(InputError, match="digits_mlp.tune applies to experiments with severities"):
        check_workflow_config(config)


def test_a_grid_value_becomes_one_safe_folder_name_whatever_it_holds():
    """A value that is no plain word (a path with ../, a space, 300 characters) names its folder by its
    hash: a tuning run never writes outside its experiment's tuning folder."""
    assert point_label({"gamma0": 0.005, "mixing": 1.0}) == "gamma0_0.005-mixing_1.0"
    for value in ("../../../../tmp/x.csv", "/abs/trace.csv", "a b", "x" * 300, "..", "ü"):
        label = point_label({"availability_trace": value})
        assert label.startswith("availability_trace_h") and "/" not in label and ".." not in label
    assert point_label({"a": "../x"}) != point_label({"a": "../y"})
    assert len(point_label({f"k{i}": "x" * 32 for i in range(20)})) <= MAX_LABEL


def test_train_many_applies_only_a_point_of_the_runs_grid(tmp_path):
    """A hand-edited chosen.json that changes a seed, an algorithm or a value off the grid is refused."""
    choices = [{"gamma0": 0.005}, {"gamma0": 0.01}]
    check_choice(tmp_path / "chosen.json", "afl", {"gamma0": 0.01}, choices)
    for point in ({"gamma0": 0.03}, {"gamma0": 0.01, "seed": 3}, {"algorithm": "sync"}, {}):
        with pytest.raises(InputError, match="not a point of its tuning grid") as error:
            check_choice(tmp_path / "chosen.json", "afl", point, choices)
        assert "\n" not in str(error.value)
    with pytest.raises(InputError, match="the plan tunes no setting of it"):
        check_choice(tmp_path / "chosen.json", "sync", {"gamma0": 0.01}, [])


def test_the_final_runs_of_a_tuned_name_carry_its_grid_in_their_plan():
    plan = plan_workflow(QUICK)["digits_stragglers"]
    entries = [entry for job in plan.jobs for entry in job.plan_entries()]
    assert entries and all(entry["choices"] == [{"gamma0": g} for g in GRID] for entry in entries)


def test_a_search_steps_past_each_end_by_the_grids_own_spacing():
    assert step_past([0.001, 0.003, 0.01], 1, 2) == [0.0333, 0.111]  # the ratio at that end, 3 digits
    assert step_past([0.001, 0.003, 0.01], -1, 2) == [0.000333, 0.000111]
    assert step_past([2, 4, 8], 1, 2) == [16, 32] and step_past([2, 4, 8], -1, 1) == [1]  # ints stay ints
    assert step_past([0.0, 0.5, 1.0], 1, 2) == [1.5, 2.0] and step_past([0.0, 0.5], -1, 1) == [-0.5]  # a 0: steps
    assert step_past([1, 2], 1, 3) == [4, 8, 16] and step_past([1, 3], -1, 1) == [0]  # geometric 1/3 → 0 (rounded)
    assert step_past([100.0, 100.1], 1, 2) == [100.2, 100.3]  # 3 digits would fall back on 100: 4


def test_a_search_ends_where_floats_do():
    """A step that overflows to inf or underflows to 0 once raised "generator raised StopIteration"."""
    assert step_past([1e150, 1e200], 1, 3) == [1e250, 1e300]  # 1e350 is no float
    assert step_past([1e-300, 1e-200], -1, 3) == []  # 1e-400 is 0: no positive value of a geometric grid
    assert step_past([1, 10**300], 1, 2) == []  # an int grid past a float's range
    assert step_past([-1e308, 0.0], -1, 2) == []  # an arithmetic step past -1.8e308


def test_search_values_end_where_the_algorithm_refuses_one():
    config = with_tune(seeds=[10], extend=2, grid={"gamma0": [0.01, 0.02]},
                       by_algorithm={"afl": {"mixing": [0.5, 1.0]}})  # fmt: skip
    experiment = config["experiments"]["digits_stragglers"]
    axes = search_axes(experiment, "afl", 5)
    assert axes["gamma0"] == [0.0025, 0.005, 0.01, 0.02, 0.04, 0.08]
    assert axes["mixing"] == [0.125, 0.25, 0.5, 1.0]  # mixing ≤ 1: the search stops at the bound
    assert search_axes(experiment, "sync", 5) == {"gamma0": axes["gamma0"]}
    assert len(searchable_points(experiment, "afl", 5)) == 6 * 4
    assert search_axes(with_tune(seeds=[10], grid={"gamma0": [0.01, 0.02]})["experiments"]["digits_stragglers"],
                       "afl", 5) == {}  # fmt: skip


def test_the_next_points_step_one_value_past_the_end_the_choice_sits_on_along_its_line():
    axes = {"gamma0": [0.001, 0.003, 0.01, 0.03, 0.1], "mixing": [0.25, 0.5, 1.0]}
    grid = [{"gamma0": g, "mixing": m} for g in (0.003, 0.01) for m in (0.5, 1.0)]
    assert next_points(grid, {"gamma0": 0.01, "mixing": 0.5}, axes) == [
        {"gamma0": 0.03, "mixing": 0.5},
        {"gamma0": 0.01, "mixing": 0.25},
    ]
    grid += [{"gamma0": 0.03, "mixing": 0.5}]
    assert next_points(grid, {"gamma0": 0.01, "mixing": 1.0}, axes) == [{"gamma0": 0.03, "mixing": 1.0}]
    # An interior choice, or one at the axis's last value, or on a line of one point: nothing more
    assert next_points(grid, {"gamma0": 0.01, "mixing": 0.5}, {"gamma0": axes["gamma0"]}) == []
    assert next_points(grid, {"gamma0": 0.03, "mixing": 0.5}, {"gamma0": [0.003, 0.01, 0.03]}) == []
    assert next_points(grid, {"gamma0": 0.03, "mixing": 0.5}, {"mixing": axes["mixing"]}) == []


@pytest.mark.parametrize(
    ("extend", "grid", "message"),
    [
        (2, {"staleness": ["constant", "polynomial"]}, "tune.extend steps past the ends of numeric settings"),
        (0, {"gamma0": [0.01, 0.02]}, "extend"),
        (5, {"gamma0": [0.01, 0.02]}, "extend"),
        ("2", {"gamma0": [0.01, 0.02]}, "extend"),
    ],
    ids=["no-number", "zero", "too-many", "text"],
)
def test_a_bad_extend_is_refused_in_one_line(extend, grid, message):
    with pytest.raises(InputError, match=message) as error:
        check_workflow_config(with_tune(seeds=[10], extend=extend, grid=grid))
    assert "\n" not in str(error.value)


def test_an_extended_search_plans_its_choices_and_its_time():
    plan = plan_workflow(with_tune(seeds=[10, 11, 12], extend=1, grid={"gamma0": [0.01, 0.02]}))["digits_stragglers"]
    assert plan.search_axes["afl"] == {"gamma0": [0.005, 0.01, 0.02, 0.04]}
    entries = [entry for job in plan.jobs for entry in job.plan_entries()]
    assert all(entry["choices"] == [{"gamma0": g} for g in (0.005, 0.01, 0.02, 0.04)] for entry in entries)
    (tuning,) = plan.tunings
    assert len(tuning.runs) == 8 * 2 * 3
    assert tuning.runtime == QUICK["resources"]["train"]["runtime"] * (8 * 2 * 3 + 8 * 2 * 3)


def test_per_severity_tuning_makes_a_job_per_severity_each_in_its_own_folder_at_its_own_severity():
    """`tune.per_severity`: each severity's tuning trains the same grid in that severity's world, in a
    folder of its name, and that severity's final runs read its choice; one tuning is as before."""
    config = with_tune(seeds=[10], grid={"gamma0": [0.01, 0.02]}, per_severity=True)
    plan = plan_workflow(config)["digits_stragglers"]
    severities = list(QUICK["experiments"]["digits_stragglers"]["severities"])
    assert [layout.severity for layout in plan.tuning_layouts] == severities
    assert [job.key for job in plan.tunings] == [f"tuning/{severity}" for severity in severities]
    for layout, job in zip(plan.tuning_layouts, plan.tunings, strict=True):
        assert len(job.runs) == 8 * 2 and {run.severity for run in job.runs} == {layout.severity}
        assert all(run.folder.startswith(f"results/digits_stragglers/tuning/{layout.severity}/") for run in job.runs)
        world = QUICK["experiments"]["digits_stragglers"]["severities"][layout.severity]
        assert all(run.settings.items() >= world.items() for run in job.runs)  # trained in that severity's world
        assert plan.job(job.key) is job
    assert plan.chosen_input() == {"chosen": "results/digits_stragglers/tuning/{severity}/chosen.json"}
    assert plan.tuning_layouts[1].chosen == "results/digits_stragglers/tuning/heavy_tail/chosen.json"
    stems = [stem for stem in plan.figure_stems() if stem.endswith("/tuning")]
    assert stems == [f"results/figures/digits_stragglers/{severity}/tuning" for severity in severities]
    assert plan.runs == plan_workflow(QUICK)["digits_stragglers"].runs  # the final runs: the same


def test_per_severity_tuning_budgets_train_each_severitys_tuning_to_its_own():
    """`tune.virtual_time` as a mapping: each severity's tuning runs stop at its own budget; the final
    runs and every other setting stay as with one budget."""
    budgets = {"sigma0": 10, "heavy_tail": 30}
    one = plan_workflow(with_tune(seeds=[10], grid={"gamma0": [0.01, 0.02]}, per_severity=True, virtual_time=10))
    own = plan_workflow(with_tune(seeds=[10], grid={"gamma0": [0.01, 0.02]}, per_severity=True,
                                  virtual_time=budgets))["digits_stragglers"]  # fmt: skip
    for layout, job, same in zip(own.tuning_layouts, own.tunings, one["digits_stragglers"].tunings, strict=True):
        assert {run.settings["max_virtual_time"] for run in job.runs} == {budgets[str(layout.severity)]}
        assert [{**run.settings, "max_virtual_time": 10} for run in job.runs] == [run.settings for run in same.runs]
        assert [run.folder for run in job.runs] == [run.folder for run in same.runs]
    assert own.runs == one["digits_stragglers"].runs


def test_a_severity_named_as_the_tuning_job_is_refused_where_they_would_share_a_plan():
    config = with_tune(seeds=[10], grid={"gamma0": [0.01, 0.02]})
    severities = config["experiments"]["digits_stragglers"]["severities"]
    severities["tuning"] = severities.pop("heavy_tail")
    with pytest.raises(InputError, match="severities.tuning: the tuning job's plan and log have that name"):
        check_workflow_config(config)
    config["experiments"]["digits_stragglers"]["tune"]["per_severity"] = True  # plans tuning/SEVERITY.json
    check_workflow_config(config)
