"""What each job asks a cluster for: runtimes within the cap, the jobs split to stay there, GPU spellings,
partitions, and the refusals of what a site would refuse."""

import copy
import math

import pytest
import yaml

from asyncfl.planning.cluster import (
    JobBudget,
    check_resources,
    cpu_job_resources,
    even_parts,
    gpu_job_resources,
)
from asyncfl.planning.plan import SEVERITY, plan_workflow
from asyncfl.settings.errors import InputError
from conftest import QUICK_CONFIG, REPO

PAPER = yaml.safe_load((REPO / "config/config.yaml").read_text())
CLAIM = yaml.safe_load((REPO / "config/claim.yaml").read_text())
QUICK = yaml.safe_load(QUICK_CONFIG.read_text())


def with_resources(config: dict, **resources) -> dict:
    changed = copy.deepcopy(config)
    changed["resources"].update(resources)
    return changed


def test_parts_keep_the_runs_order_and_are_as_even_as_they_can_be():
    assert even_parts(30, 8) == [range(i, i + 4) for i in range(0, 24, 4)] + [range(24, 27), range(27, 30)]
    assert even_parts(5, 1) == [range(5)] and even_parts(3, 3) == [range(0, 1), range(1, 2), range(2, 3)]


@pytest.mark.parametrize("cap", [2880, 2160, 720])
def test_no_job_of_the_papers_plan_asks_for_more_than_the_cap_and_every_run_is_trained_once(cap):
    plan = plan_workflow(with_resources(PAPER, max_runtime=cap))
    for name, experiment in plan.experiments.items():
        assert all(job.runtime <= cap for job in experiment.jobs), name
        trained = [run.folder for job in experiment.jobs for run in job.runs]
        assert sorted(trained) == sorted(run.folder for run in experiment.runs), name
    sweep = plan["mnist_stragglers"]
    runtime = PAPER["resources"]["train"]["runtime"]
    assert sweep.shape == SEVERITY and sweep.severity_parts == math.ceil(30 / (cap // runtime))
    first = [job for job in sweep.jobs if job.runs[0].severity == sweep.severities[0]]
    assert [job.key for job in first] == [f"{sweep.severities[0]}.part{i}" for i in range(sweep.severity_parts)]
    # every severity is split alike: a part's outputs are one rule's, its severity a wildcard
    assert sweep.severity_job_outputs(("metrics.csv",), 1)[0].startswith(
        f"results/mnist_stragglers/severities/{{severity}}/{first[1].runs[0].name}/"
    )


def test_a_job_that_fits_the_cap_keeps_its_name_and_runs():
    """Today's quick plan: nothing split, the same job keys as before the cap."""
    plan = plan_workflow(QUICK)
    assert [job.key for job in plan["digits_stragglers"].jobs] == ["sigma0", "heavy_tail"]
    assert plan["digits_stragglers"].severity_parts == 1
    assert [job.key for job in plan["digits_stragglers"].tunings] == ["tuning"]


def test_a_job_spread_over_processes_asks_for_its_runs_a_process_at_a_time():
    plan = plan_workflow(CLAIM)
    runtime, processes = CLAIM["resources"]["train"]["runtime"], CLAIM["resources"]["train"]["processes"]
    job = plan["fashion_claim"].jobs[0]
    assert job.runtime == math.ceil(len(job.runs) / processes) * runtime


def test_a_packed_experiment_packs_fewer_runs_where_its_packs_would_outlast_the_cap():
    quick = with_resources(QUICK, max_runtime=3 * QUICK["resources"]["train"]["runtime"])  # 3 runs a job
    packed = plan_workflow(quick)["digits_mlp"]  # pack_runs: 8
    assert [len(job.runs) for job in packed.jobs] == [3, 3, 3, 3, 3, 1]


def test_a_cap_below_one_runs_time_is_refused_naming_both_keys():
    with pytest.raises(InputError, match=r"resources.train.runtime is 720 min .* over resources.max_runtime 600"):
        plan_workflow(with_resources(PAPER, max_runtime=600))


def test_a_searching_tuning_that_outlasts_the_cap_is_refused_since_it_cannot_be_split():
    claim = with_resources(CLAIM, max_runtime=600)
    with pytest.raises(InputError, match=r"experiments.fashion_claim: its tuning searches past its grid in one job"):
        plan_workflow(claim)


def test_a_grid_tuning_is_split_within_the_cap():
    whole = plan_workflow(QUICK)["digits_stragglers"]
    quick = with_resources(QUICK, max_runtime=5 * QUICK["resources"]["train"]["runtime"])
    sweep = plan_workflow(quick)["digits_stragglers"]
    assert not sweep.search_axes and [job.key for job in sweep.tunings] == [f"tuning.part{i}" for i in range(4)]
    assert all(job.runtime <= quick["resources"]["max_runtime"] for job in sweep.tunings)
    parts = sweep.tuning_parts(sweep.tuning_layouts[0])
    assert [run for job in parts for run in job.runs] == list(whole.tunings[0].runs)


def test_gpus_in_the_sites_spelling():
    train = {"threads": 4, "mem_mb": 100, "runtime": 10}
    assert gpu_job_resources({"train": {**train, "gpu": 1}}) == {"mem_mb": 100, "gpu": 1}
    assert gpu_job_resources({"train": {**train, "gpu": 2, "gpu_model": "a100"}})["gpu_model"] == "a100"
    gres = {"train": {**train, "gres": "gpu:h100:1"}, "partitions": {"gpu": "gpu-h100", "cpu": "cpu"}}
    assert gpu_job_resources(gres) == {"mem_mb": 100, "gres": "gpu:h100:1", "slurm_partition": "gpu-h100"}
    on_cpus = {"train": {**train, "gpu": 0}, "partitions": {"gpu": "g", "cpu": "c"}}
    assert gpu_job_resources(on_cpus) == {"mem_mb": 100, "gpu": 0, "slurm_partition": "c"}
    assert cpu_job_resources(on_cpus) == {"slurm_partition": "c"} and cpu_job_resources({"train": train}) == {}


@pytest.mark.parametrize(
    ("resources", "message"),
    [
        ({"gpu": 1, "gres": "gpu:1"}, "two spellings of one request"),
        ({"gpu": 0, "gres": "gpu:1", "gpu_model": "a100"}, "two spellings of one request"),
        ({"gpu": 0, "gres": "gpu:a100"}, "write gpu:N or gpu:MODEL:N"),
        ({"gpu": 0, "gres": "gpu:0"}, "write gpu:N or gpu:MODEL:N"),
        ({"gpu": 0, "gres": ""}, "write gpu:N or gpu:MODEL:N"),
    ],
)
def test_a_gpu_request_a_site_cannot_read_is_refused(resources, message):
    with pytest.raises(InputError, match=message):
        check_resources({"train": {"threads": 1, "mem_mb": 1, "runtime": 1, **resources}})


@pytest.mark.parametrize("name", ["../gpu", "gpu partition", "", "gpu;rm"])
def test_a_partition_name_slurm_cannot_have_is_refused(name):
    with pytest.raises(InputError, match="resources.partitions.gpu is"):
        check_resources({"train": {"threads": 1, "mem_mb": 1, "runtime": 1}, "partitions": {"gpu": name}})


REAL_CLOCK = yaml.safe_load((REPO / ".test/config/real_clock.yaml").read_text())


def real_clock_plan(budget: dict, **train):
    """The plan of .test/config/real_clock.yaml's experiment with this budget and `train:` changes."""
    config = copy.deepcopy(REAL_CLOCK)
    experiment = config["experiments"]["digits_real_clock"]
    experiment["budget"] = budget
    experiment["train"].update(train)
    return plan_workflow(config)["digits_real_clock"]


def test_a_real_clock_run_asks_for_its_paced_wall_time_besides_its_compute():
    """On the real clock a run lasts time_scale × its virtual-time budget of wall time, however fast the
    machine computes: its job asks for that besides its compute (here resources.train.runtime, no cost
    row); without a virtual-time budget its length is unknown before it runs, so runtime alone."""
    runtime = REAL_CLOCK["resources"]["train"]["runtime"]
    assert [job.runtime for job in real_clock_plan({"virtual_time": 4}).jobs] == [runtime + 1] * 3
    paced = real_clock_plan({"virtual_time": 4}, time_scale=100.0)  # 400 wall s paced, + 600 of compute
    assert [job.runtime for job in paced.jobs] == [math.ceil((400 + 60 * runtime) / 60)] * 3
    assert [job.runtime for job in real_clock_plan({"updates": 50}).jobs] == [runtime] * 3
    assert [job.runtime for job in real_clock_plan({"virtual_time": 4}, clock="virtual").jobs] == [runtime] * 3
    budget = JobBudget(runtime=10, processes=1, cap=100, safety=2.0)
    assert budget.real_clock_seconds(30.0, 0.5, 100.0) == 2.0 * 0.5 * 100.0 + 30.0
    assert budget.real_clock_seconds(30.0, 0.5, None) == 600.0


def test_measured_runs_get_the_simulator_figure_and_a_replay_job_as_long_as_theirs():
    measured = real_clock_plan({"virtual_time": 4})
    assert [run.name for run in measured.measured_runs] == ["afl", "fedbuff", "sync"]
    assert "sim_vs_real" in [figure.name for figure in measured.figures]
    assert measured.replay_minutes == sum(job.runtime for job in measured.jobs)
    paced = real_clock_plan({"virtual_time": 4}, durations="paced")  # a paced run is its virtual twin already
    assert paced.measured_runs == () and "sim_vs_real" not in [figure.name for figure in paced.figures]
