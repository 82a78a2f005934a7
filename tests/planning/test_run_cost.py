"""A run's work counted from its settings, its seconds at a measured cost, the cost table checked, and the
plan's jobs asking for their runs' measured minutes within the cap."""

import copy
import math
import re
from pathlib import Path

import pytest
import yaml

from asyncfl.planning.cluster import attempt_minutes
from asyncfl.planning.plan import plan_workflow
from asyncfl.planning.run_cost import (
    COLUMNS,
    DATASET_SIZES,
    MeasuredCost,
    RunWork,
    check_cost,
    read_cost_table,
    run_work,
)
from asyncfl.settings.errors import InputError
from asyncfl.settings.names import MODELS
from conftest import REPO

PAPER = yaml.safe_load((REPO / "config/config.yaml").read_text())
CLAIM = yaml.safe_load((REPO / "config/claim.yaml").read_text())
TABLE = read_cost_table(REPO / "config/costs.csv")
FASHION = Path("/usr/share/datasets/fashion-mnist")
ROW = MeasuredCost("cpu-x", "cnn", 64, 0.01, 1e-5, 3.0, "by hand")


def test_dataset_sizes_are_the_loaders():
    from asyncfl.data.loading import load_dataset

    digits = load_dataset("digits")
    assert DATASET_SIZES["digits"] == (len(digits.train_labels), len(digits.test_labels))
    if FASHION.is_dir():  # Debian's dataset-fashion-mnist (CI installs it)
        fashion = load_dataset("fashion-mnist", FASHION)
        assert DATASET_SIZES["fashion-mnist"] == (len(fashion.train_labels), len(fashion.test_labels))


def test_a_paper_runs_work_by_hand():
    """MNIST's AFL at J = 5 under its 5,000-update budget: 6,000 samples a client, ⌈6,000 / 64⌉ = 94
    steps an epoch, I = 10: 4,700,000 steps; evaluated every 10 × 5 = 50 updates and at the start: 101
    times the 10,000 test samples, and 101 full-batch gradients over the 60,000 training samples."""
    plan = plan_workflow(PAPER)
    (run,) = [run for run in plan["mnist"].runs if run.name == "afl" and run.j == 5 and run.seed == 0]
    work = run_work(run.settings, "afl", 5, "mnist", 10, 1.0)
    assert work == RunWork(steps=4_700_000, batch_size=64, scored_samples=1_010_000, gradient_samples=6_060_000)


def test_a_virtual_time_runs_work_by_hand():
    """The claim's AFL at slow40: a client keeps 60,000 × 0.9 / 50 = 1,080 samples, one dispatch 1 ×
    1,080 × 0.002 + 1 = 3.16 s, M = 10 in flight for 120 s: ⌈379.7⌉ = 380 updates of ⌈1,080 / 32⌉ = 34
    steps; its time grid every 1 s (121 instants) and metrics.csv's one evaluation (the last round's) each
    score the test set and the 6,000-sample validation split; no gradient."""
    plan = plan_workflow(CLAIM)
    (run,) = [r for r in plan["fashion_claim"].runs if r.name == "afl" and r.severity == "slow40" and r.seed == 0]
    assert run.settings["max_virtual_time"] == 120 and run.settings["eval_every_seconds"] == 1.0
    assert run.settings["eval_every_updates"] > 380 and not run.settings["eval_gradient"]
    work = run_work(run.settings, "afl", 10, "fashion-mnist", 50, 0.9)
    assert work == RunWork(steps=380 * 34, batch_size=32, scored_samples=(121 + 1) * 16_000, gradient_samples=0)


def test_a_timing_only_run_costs_its_start_alone():
    settings = {"model": "mlp", "rounds": 10, "trainer": "none"}
    assert run_work(settings, "afl", 5, "digits", 10, 1.0) == RunWork(0, 64, 0, 0)
    assert ROW.run_seconds(RunWork(0, 64, 0, 0)) == ROW.start_seconds


def test_a_step_costs_at_least_the_measured_step_and_more_with_a_larger_batch():
    """A smaller batch's step is charged the measured one (a GPU's small-kernel floor), a larger one in
    proportion; a scored sample at its measure, a gradient's sample as a training one (step / batch)."""
    assert ROW.run_seconds(RunWork(100, 32, 0, 0)) == pytest.approx(3.0 + 100 * 0.01)
    assert ROW.run_seconds(RunWork(100, 128, 0, 0)) == pytest.approx(3.0 + 100 * 0.02)
    assert ROW.run_seconds(RunWork(0, 64, 1000, 6400)) == pytest.approx(3.0 + 1000 * 1e-5 + 6400 * 0.01 / 64)


def test_the_papers_jobs_ask_for_their_runs_measured_minutes():
    """config.yaml's MNIST AFL job on the H100 row, by hand: 2 × (60 s + 4,700,000 × 0.3277 ms + 1,010,000
    × 5.12 µs + 6,060,000 × 0.3277 ms / 64) = 3,256.2 s: 55 min (720 without the table); a severity job
    of 30 runs on one GPU no longer splits into parts of 4 runs at 720 min each."""
    plan = plan_workflow(PAPER, TABLE)
    cnn = TABLE["cuda-h100-80gb-hbm3", "cnn"]
    seconds = 2 * (cnn.start_seconds + 4_700_000 * cnn.step_seconds + 1_010_000 * cnn.scored_sample_seconds)
    seconds += 2 * 6_060_000 * cnn.step_seconds / 64
    job = plan["mnist"].job("results/mnist/runs/afl/J5/seed0")
    assert job.runtime == math.ceil(seconds / 60) == 55
    unmeasured = copy.deepcopy(PAPER)
    unmeasured["resources"]["cost"]["device"] = None
    assert plan_workflow(unmeasured, TABLE)["mnist"].job("results/mnist/runs/afl/J5/seed0").runtime == 720
    sweep = plan["mnist_stragglers"]
    assert sweep.severity_parts == 1 and all(job.runtime <= PAPER["resources"]["max_runtime"] for job in sweep.jobs)
    assert plan_workflow(unmeasured, TABLE)["mnist_stragglers"].severity_parts == 8


@pytest.mark.parametrize("cap", [360, 240, 120])
def test_a_measured_sweep_splits_within_the_cap_and_trains_every_run_once(cap):
    config = copy.deepcopy(PAPER)
    config["resources"]["max_runtime"] = cap
    config["resources"]["train"]["runtime"] = min(cap, 720)
    plan = plan_workflow(config, TABLE)
    for name, experiment in plan.experiments.items():
        assert all(job.runtime <= cap for job in experiment.jobs), name
        trained = sorted(run.folder for job in experiment.jobs for run in job.runs)
        assert trained == sorted(run.folder for run in experiment.runs), name
    sweep = plan["mnist_stragglers"]
    assert sweep.severity_parts > 1 and len(sweep.jobs) == sweep.severity_parts * len(sweep.severities)


def test_a_cap_below_one_runs_measured_time_is_refused_naming_the_experiment():
    """The longest of MNIST's runs, AFL at J = 8 over 1,000 rounds (8,000 updates), asks for 86 min."""
    config = copy.deepcopy(PAPER)
    config["resources"].update(max_runtime=50)
    config["resources"]["train"]["runtime"] = 50
    with pytest.raises(InputError, match=r"experiments.mnist: a run asks for 86 min, over resources.max_runtime 50"):
        plan_workflow(config, TABLE)


def test_a_retry_asks_for_twice_the_time_within_the_cap():
    assert [attempt_minutes(55, attempt, 180) for attempt in (1, 2, 3)] == [55, 110, 180]


def write_table(path: Path, *rows: str, header: str = ",".join(COLUMNS)) -> Path:
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


GOOD = "cuda-x,cnn,64,0.001,1e-6,30,2026"


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ((GOOD, GOOD), "line 3: a second row of cuda-x cnn"),
        (("cuda-x,cnn,64,nan,1e-6,30,2026",), "line 2: step_seconds 'nan': a positive number"),
        (("cuda-x,cnn,64,0.001,inf,30,2026",), "line 2: scored_sample_seconds 'inf'"),
        (("cuda-x,cnn,64,0.001,1e-6,-3,2026",), "line 2: start_seconds '-3'"),
        (("cuda-x,cnn,64,0.001,1e-6,1e12,2026",), "line 2: start_seconds '1e12'"),
        (("cuda-x,cnn,0,0.001,1e-6,30,2026",), "line 2: batch_size '0'"),
        (("cuda-x,cnn,6.4,0.001,1e-6,30,2026",), "line 2: batch_size '6.4'"),
        (("cuda-x,cnn,64,,1e-6,30,2026",), "line 2: step_seconds ''"),
        (("cuda-x,cnn,64,0.001",), "line 2: 4 fields, 7 expected"),
        (("cuda-x,vgg,64,0.001,1e-6,30,2026",), "line 2: model 'vgg'"),
        (("../gpu,cnn,64,0.001,1e-6,30,2026",), "line 2: device '../gpu'"),
        (("CUDA-X,cnn,64,0.001,1e-6,30,2026",), "line 2: device 'CUDA-X'"),
    ],
)
def test_a_bad_cost_row_is_refused_naming_its_line(tmp_path, rows, message):
    with pytest.raises(InputError, match=r"cost table .*costs\.csv, " + re.escape(message)):
        read_cost_table(write_table(tmp_path / "costs.csv", *rows))


def test_a_table_that_is_not_one_is_refused(tmp_path):
    with pytest.raises(InputError, match=r"columns none; expected device, model"):
        read_cost_table(write_table(tmp_path / "empty.csv", header=""))
    with pytest.raises(InputError, match=r"columns device, model; expected"):
        read_cost_table(write_table(tmp_path / "short.csv", header="device,model"))
    binary = tmp_path / "binary.csv"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(InputError, match=r"cannot be read"):
        read_cost_table(binary)
    with pytest.raises(InputError, match=r"cannot be read"):
        read_cost_table(tmp_path / "missing.csv")
    assert read_cost_table(write_table(tmp_path / "header.csv")) == {}  # nothing measured yet: valid


@pytest.mark.parametrize(
    ("cost", "message"),
    [
        ({"device": "cuda-nosuch", "safety": 2}, "resources.cost.device is 'cuda-nosuch', which config/costs.csv"),
        ({"device": None, "safety": float("nan")}, "resources.cost.safety is nan"),
        ({"device": None, "safety": 0.5}, "resources.cost.safety is 0.5"),
        ({"device": None, "safety": 1e6}, "resources.cost.safety is 1000000.0"),
        ({"device": None, "safety": True}, "resources.cost.safety is True"),
    ],
)
def test_a_bad_cost_setting_is_refused_naming_the_key(cost, message):
    with pytest.raises(InputError, match=re.escape(message)):
        check_cost(cost, TABLE)


def test_the_shipped_table_has_every_model_of_its_device_kinds():
    kinds = {kind for kind, _ in TABLE}
    assert kinds and all({model for each, model in TABLE if each == kind} == set(MODELS) for kind in kinds)
