"""Faults of the workflow on a real SLURM cluster (tests/slurm/cluster.sh): a failing job leaves the others
running, a cancelled job resumes to the straight run's bytes (a job killed at its time limit:
test_slurm_time_limit.py, a file of its own so that `make test` runs it beside this one).

Without a cluster these tests skip; CI starts one and sets ASYNCFL_REQUIRE_ALL=1, which turns
the skip into a failure.
"""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import ENV, REPO, snakemake, started, wait_for
from slurm_cases import RUN, SLURM_PROFILE, assert_resumed_to_the_straight_bytes, slurm_jobs, write_config

pytestmark = pytest.mark.slurm


def test_a_failing_job_leaves_the_others_running_to_the_end_and_a_rerun_completes(tmp_path):
    diverging = write_config(tmp_path / "diverging.yaml", optimizer="sgd", gamma0=1e12, rounds=3)
    config = yaml.safe_load(diverging.read_text())
    small = config["experiments"]["small"]
    config["experiments"]["fine"] = {**small, "train": {**small["train"], "optimizer": "adam", "gamma0": 1e-3}}
    diverging.write_text(yaml.safe_dump(config))
    # the two runs' jobs only (each test asks the cluster for the jobs its mechanism needs: it has two CPUs)
    targets = [f"{RUN}/model.pt", f"{RUN.replace('small', 'fine')}/model.pt"]
    failed = snakemake(*targets, *SLURM_PROFILE, "--retries", "2", "--configfile", str(diverging), workdir=tmp_path)
    assert failed.returncode != 0
    output = failed.stdout + failed.stderr
    assert "Error in rule train" in output and "training loss is" in output  # the job's log, shown
    assert (tmp_path / RUN.replace("small", "fine") / "model.pt").is_file()  # the other experiment trained on
    # the diverged run failed on its own: each retry asked for a minute and ended at once, with its cause
    jobs = [job for job in slurm_jobs("train", tmp_path) if "small" in job.get("Comment", "")]
    assert [job["TimeLimit"] for job in jobs] == ["00:30:00", "00:01:00", "00:01:00"], jobs
    assert (
        "not trained again on attempt 3: an earlier attempt failed on its own ("
        in (tmp_path / "logs/train/small/afl_J5_seed0.log").read_text()
    )

    fixed = write_config(tmp_path / "fixed.yaml", rounds=3)
    rerun = snakemake(f"{RUN}/model.pt", *SLURM_PROFILE, "--configfile", str(fixed), workdir=tmp_path)
    assert rerun.returncode == 0, (rerun.stdout + rerun.stderr)[-3000:]
    assert (tmp_path / RUN / "model.pt").is_file()


@pytest.fixture(scope="module")
def long_run(tmp_path_factory) -> tuple[Path, Path]:
    """A config of one AFL run long enough to kill mid-way, and the run trained straight through locally."""
    folder = tmp_path_factory.mktemp("long")
    config = write_config(folder / "long.yaml", rounds=60, local_epochs=1, checkpoint_every=2, eval_every=5)
    straight = snakemake(f"{RUN}/model.pt", "--cores", "1", "--configfile", str(config), workdir=folder / "local")
    assert straight.returncode == 0, (straight.stdout + straight.stderr)[-3000:]
    return config, folder / "local"


def killed_mid_run(cluster: Path, config: Path) -> subprocess.CompletedProcess:
    """The workflow on the cluster with the training job cancelled once it has a checkpoint and 10 rounds
    (`scancel`: SIGTERM, then SIGKILL, to the job's processes, as its time limit would); its outcome."""
    cluster.mkdir()
    command = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(cluster),
               f"{RUN}/model.pt", *SLURM_PROFILE, "--configfile", str(config)]  # fmt: skip
    metrics = cluster / RUN / "metrics.csv"
    with started(command, cwd=REPO, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as workflow:
        wait_for(
            lambda: (cluster / RUN / "checkpoint.pt").exists() and (rows(metrics) or 0) > 10,
            workflow,
            "a checkpoint and 10 rounds of the SLURM training job",
        )
        (train_job,) = [job["JobId"] for job in slurm_jobs("train", cluster) if job["JobState"] == "RUNNING"]
        subprocess.run(["scancel", train_job], check=True)  # its own job: another test's may be running too
        output, _ = workflow.communicate(timeout=1800)
    return subprocess.CompletedProcess(command, workflow.returncode, output, "")


def test_a_cancelled_training_job_resumes_from_its_checkpoint_when_run_again(tmp_path, long_run):
    config, local = long_run
    cluster = tmp_path / "cluster"
    killed = killed_mid_run(cluster, config)
    assert killed.returncode != 0, killed.stdout[-2000:]
    assert (cluster / RUN / "checkpoint.pt").exists() and not (cluster / RUN / "model.pt").exists()
    resumed = snakemake(f"{RUN}/model.pt", *SLURM_PROFILE, "--configfile", str(config), workdir=cluster)
    assert resumed.returncode == 0, (resumed.stdout + resumed.stderr)[-3000:]
    assert_resumed_to_the_straight_bytes(cluster, local)


def rows(path: Path) -> int | None:
    try:
        return path.read_text().count("\n")
    except FileNotFoundError:
        return None
