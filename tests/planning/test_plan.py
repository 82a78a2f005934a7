"""The run planner, directly: which runs and jobs a config makes, their settings, inputs and runtime."""

import copy

import yaml

from asyncfl.planning.plan import ONE_RUN, PACKED, SEVERITY, plan_workflow
from asyncfl.settings.catalogue import Scope, scope_figures
from conftest import QUICK_CONFIG, REPO

QUICK = yaml.safe_load(QUICK_CONFIG.read_text())


def test_the_quick_config_plans_three_job_shapes():
    plan = plan_workflow(QUICK)
    assert plan.of_shape(PACKED) == ["digits_mlp", "digits_resnet20", "digits_world"]
    assert plan.of_shape(SEVERITY) == ["digits_stragglers"] and plan.of_shape(ONE_RUN) == []
    runtime = QUICK["resources"]["train"]["runtime"]
    packed = plan["digits_mlp"]  # 16 runs, 8 a job, in the experiment's run order
    assert [job.key for job in packed.jobs] == ["pack0", "pack1"]
    assert [run.folder.split("/runs/")[1] for run in packed.jobs[0].runs] == [
        "afl/J3/seed0", "afl/J3/seed1", "afl/J5/seed0", "afl/J5/seed1", "sync/J5/seed0", "sync/J5/seed1",
        "fedasync/J5/seed0", "fedasync/J5/seed1",
    ]  # fmt: skip
    assert all(len(job.runs) == 8 and job.runtime == 8 * runtime for job in packed.jobs)
    assert packed.job("pack1").plan_file == "results/digits_mlp/plans/pack1.json"
    uneven = plan_workflow({**QUICK, "experiments": {"x": {**QUICK["experiments"]["digits_mlp"], "pack_runs": 4}}})
    assert [len(job.runs) for job in uneven["x"].jobs] == [4, 4, 4, 4]
    three = plan_workflow({**QUICK, "experiments": {"x": {**QUICK["experiments"]["digits_mlp"], "pack_runs": 6}}})
    assert [len(job.runs) for job in three["x"].jobs] == [6, 6, 4]  # the last job holds what is left
    sweep = plan["digits_stragglers"]
    assert [job.key for job in sweep.jobs] == ["sigma0", "heavy_tail"]
    assert all(len(job.runs) == 64 and job.runtime == 64 * runtime for job in sweep.jobs)  # 8 runs × 8 seeds
    assert sweep.figures == (*scope_figures(Scope.SEVERITY_SWEEP, 5), *scope_figures(Scope.TUNING, 5))
    alone = plan_workflow({**QUICK, "experiments": {"x": {k: v for k, v in QUICK["experiments"]["digits_world"].items()
                                                           if k != "pack_runs"}}})["x"]  # fmt: skip
    assert alone.shape == ONE_RUN and [job.runtime for job in alone.jobs] == [runtime] * 4
    assert alone.jobs[0].key == alone.jobs[0].runs[0].folder == "results/x/runs/afl/J5/seed0"


def test_a_runs_settings_are_assembled_once_with_its_severity_and_variant():
    run = plan_workflow(QUICK)["digits_stragglers"].run(
        "results/digits_stragglers/severities/heavy_tail/sync-deadline/J5/seed1"
    )
    assert (run.name, run.j, run.seed, run.severity) == ("sync-deadline", 5, 1, "heavy_tail")
    assert run.partition == "results/partitions/digits_alpha0.1_C10_seed1_val0.2.npz"
    assert run.settings["round_deadline"] == 4.0 and run.settings["slow_fraction"] == 0.2
    assert run.settings["max_virtual_time"] == 30 and "algorithm" not in run.settings
    entry = run.plan_entry()
    assert entry["settings"] == {**run.settings, "algorithm": "sync", "clients_per_round": 5, "seed": 1}
    assert entry["out"] == run.folder and entry["partition"] == run.partition


def test_a_trace_under_a_severity_is_an_input_of_the_experiment():
    config = copy.deepcopy(QUICK)
    config["experiments"]["digits_stragglers"]["severities"]["heavy_tail"].update(
        availability="trace", availability_trace="traces/v.csv"
    )
    plan = plan_workflow(config)
    assert plan["digits_stragglers"].traces == ("traces/v.csv",) and plan["digits_mlp"].traces == ()
    run = plan["digits_stragglers"].run("results/digits_stragglers/severities/heavy_tail/sync-deadline/J5/seed0")
    assert run.settings["availability_trace"] == "traces/v.csv"


def test_the_plan_names_the_probed_run_the_emulations_runs_and_the_tuning_grid():
    """What the workflow's rules once computed themselves: the theory figures' run, an emulation
    figure's runs and `asyncfl select --grid`."""
    plan = plan_workflow(QUICK)
    assert plan["digits_mlp"].probed_run == "results/digits_mlp/runs/afl/J5/seed0"
    assert plan["digits_mlp"].run_folders(("afl", "sync"), 5) == [
        f"results/digits_mlp/runs/{name}/J5/seed{seed}" for name in ("afl", "sync") for seed in (0, 1)
    ]
    sweep = plan["digits_stragglers"]
    points = [{"gamma0": 0.01}, {"gamma0": 0.02}]
    assert sweep.tuning_grid == dict.fromkeys(QUICK["experiments"]["digits_stragglers"]["algorithms"], points)
    assert plan["digits_mlp"].tuning_grid == {}


def test_the_paper_config_plans_every_run_and_figure():
    plan = plan_workflow(yaml.safe_load((REPO / "config/config.yaml").read_text()))
    one_run = [job for name in plan.of_shape(ONE_RUN) for job in plan[name].jobs]
    assert len(one_run) == 99 and all(len(job.runs) == 1 for job in one_run)
    # 5 severities of 30 runs, each in 8 jobs within the 2-day cap (4 runs of 720 min; tests/planning/test_cluster.py)
    assert {name: len(plan[name].jobs) for name in plan.of_shape(SEVERITY)} == {
        "mnist_stragglers": 40,
        "cifar10_stragglers": 40,
    }
    assert len(plan.figure_files()) == len(set(plan.figure_files()))
    assert all(path.endswith((".png", ".pdf")) for path in plan.figure_files())
