"""An experiment's `tune:` block: its grids, its checks (one line naming the key) and the tuning job the
planner makes of it."""

import copy

import pytest
import yaml

from asyncfl.spec.errors import InputError
from asyncfl.spec.experiments import check_workflow_config
from asyncfl.spec.plan import TUNING, plan_workflow
from asyncfl.spec.tuning import point_label, tuned_names, tuning_points
from conftest import QUICK_CONFIG

QUICK = yaml.safe_load(QUICK_CONFIG.read_text())


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
    assert plan.tuning is not None and plan.tuning.shape == TUNING and plan.job("tuning") is plan.tuning
    runs = plan.tuning.runs
    assert len(runs) == 8 * 3  # every run name × three γ0, one tuning seed
    assert {run.seed for run in runs} == {10} and {run.severity for run in runs} == {"sigma0"}
    afl = [run for run in runs if run.name == "afl"]
    assert [run.settings["gamma0"] for run in afl] == [0.005, 0.01, 0.02]
    assert afl[0].folder == "results/digits_stragglers/tuning/gamma0_0.005/afl/J5/seed10"
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
    ],
    ids=["shared-seeds", "one-value", "no-validation", "bad-value", "unknown-severity", "unknown-name", "owned"],
)
def test_a_bad_tune_block_is_refused_in_one_line(tune, drop, message):
    config = with_tune(**tune)
    if drop:
        del config["experiments"]["digits_stragglers"][drop]
    with pytest.raises(InputError, match=message) as error:
        check_workflow_config(config)
    assert "\n" not in str(error.value)


def test_tune_belongs_to_severity_sweeps():
    config = copy.deepcopy(QUICK)
    config["experiments"]["digits_cnn"]["tune"] = {"seeds": [10], "grid": {"gamma0": [0.005, 0.01]}}
    with pytest.raises(InputError, match="digits_cnn.tune applies to experiments with severities"):
        check_workflow_config(config)
