"""Faults of the workflow on a real SLURM cluster (tests/slurm/cluster.sh): a failing job leaves the others
running, a cancelled job and a job killed at its time limit resume to the straight run's bytes.

Without a cluster these tests skip; CI starts one and sets ASYNCFL_REQUIRE_ALL=1, which turns
the skip into a failure.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import ENV, REPO, snakemake, started, wait_for
from slurm_cases import RUN, SLURM_PROFILE, require_cluster, write_config

pytestmark = pytest.mark.slurm


@pytest.fixture(autouse=True)
def slurm():
    require_cluster()


def test_a_failing_job_leaves_the_others_running_to_the_end_and_a_rerun_completes(tmp_path):
    diverging = write_config(tmp_path / "diverging.yaml", optimizer="sgd", gamma0=1e12, rounds=3)
    config = yaml.safe_load(diverging.read_text())
    small = config["experiments"]["small"]
    config["experiments"]["fine"] = {**small, "train": {**small["train"], "optimizer": "adam", "gamma0": 1e-3}}
    diverging.write_text(yaml.safe_dump(config))
    failed = snakemake(*SLURM_PROFILE, "--configfile", str(diverging), workdir=tmp_path, timeout=1800)
    assert failed.returncode != 0
    output = failed.stdout + failed.stderr
    assert "Error in rule train" in output and "training loss is" in output  # the job's log, shown
    assert (tmp_path / RUN.replace("small", "fine") / "model.pt").is_file()  # the other experiment trained on

    fixed = write_config(tmp_path / "fixed.yaml", rounds=3)
    rerun = snakemake(*SLURM_PROFILE, "--configfile", str(fixed), workdir=tmp_path, timeout=1800)
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
               *SLURM_PROFILE, "--configfile", str(config)]  # fmt: skip
    metrics = cluster / RUN / "metrics.csv"
    with started(command, cwd=REPO, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as workflow:
        wait_for(
            lambda: (cluster / RUN / "checkpoint.pt").exists() and (rows(metrics) or 0) > 10,
            workflow,
            "a checkpoint and 10 rounds of the SLURM training job",
        )
        jobs = subprocess.run(["squeue", "-h", "-o", "%i %k"], capture_output=True, text=True).stdout.split("\n")
        train_job = next(line.split()[0] for line in jobs if "rule_train" in line)
        subprocess.run(["scancel", train_job], check=True)
        output, _ = workflow.communicate(timeout=1800)
    return subprocess.CompletedProcess(command, workflow.returncode, output, "")


def assert_resumed_to_the_straight_bytes(cluster: Path, local: Path) -> None:
    """The last attempt resumed from a checkpoint, or found the run finished by an attempt that SLURM
    then killed, and restored it (both are a resume); the bytes are the straight run's."""
    log = (cluster / "logs/train/small/afl_J5_seed0.log").read_text()
    assert "resuming" in log or "this run already finished" in log, log[-2000:]
    for name in ("metrics.csv", "events.csv", "model.pt"):
        assert (cluster / RUN / name).read_bytes() == (local / RUN / name).read_bytes(), name


def test_a_cancelled_training_job_resumes_from_its_checkpoint_when_run_again(tmp_path, long_run):
    config, local = long_run
    cluster = tmp_path / "cluster"
    killed = killed_mid_run(cluster, config)
    assert killed.returncode != 0, killed.stdout[-2000:]
    assert (cluster / RUN / "checkpoint.pt").exists() and not (cluster / RUN / "model.pt").exists()
    resumed = snakemake(*SLURM_PROFILE, "--configfile", str(config), workdir=cluster, timeout=1800)
    assert resumed.returncode == 0, (resumed.stdout + resumed.stderr)[-3000:]
    assert_resumed_to_the_straight_bytes(cluster, local)


# A run that outlasts a 1-minute limit on any machine: SLURM checks limits about every 30 s, so a job asking
# for 1 minute is killed 60-90 s after it starts. Paced by the real clock (`clock: real`), the run lasts
# PACED_SECONDS of wall time however fast the machine trains, and its resume (asking 2 min) finishes it.
LIMITED_ROUNDS, PACED_SECONDS = 120, 110.0


def slurm_jobs(rule: str, folder: Path) -> list[dict[str, str]]:
    """The cluster's jobs of `rule` run in `folder`, oldest first, finished ones too (MinJobAge keeps them
    listed), each with the fields `scontrol show job` gives."""
    listed = subprocess.run(["squeue", "-h", "-t", "all", "-o", "%i|%k|%Z"], capture_output=True, text=True)
    ids = sorted(
        int(job)
        for job, comment, workdir in (line.split("|") for line in listed.stdout.splitlines())
        if f"rule_{rule}_" in comment and Path(workdir) == folder
    )
    shown = [
        subprocess.run(["scontrol", "show", "job", str(job)], capture_output=True, text=True).stdout for job in ids
    ]
    return [dict(field.split("=", 1) for field in job.split() if "=" in field) for job in shown]


def test_a_job_killed_at_its_time_limit_is_submitted_again_with_twice_the_time_and_resumes(tmp_path):
    """The real time limit: a training job asking for 1 minute (`runtime: 1`, nothing measured) whose run
    takes longer is killed by SLURM (TIMEOUT), submitted again by the running workflow asking for twice
    the time (the profile's retries), and resumes from its checkpoint, until the run ends with the bytes
    of the same run trained straight through on the virtual clock. The run on the cluster is paced by the
    real clock, so its length is the same on a fast idle machine and a slow loaded one."""
    config = write_config(
        tmp_path / "straight.yaml", rounds=LIMITED_ROUNDS, local_epochs=1, checkpoint_every=2, eval_every=20
    )
    straight = snakemake(f"{RUN}/model.pt", "--cores", "1", "--configfile", str(config), workdir=tmp_path / "local")
    assert straight.returncode == 0, (straight.stdout + straight.stderr)[-3000:]
    virtual_seconds = json.loads((tmp_path / "local" / RUN / "run.json").read_text())["virtual_time"]
    limited = yaml.safe_load(config.read_text())
    limited["resources"]["train"]["runtime"] = 1
    train = limited["experiments"]["small"]["train"]
    train.update(clock="real", time_scale=PACED_SECONDS / virtual_seconds)
    paced = tmp_path / "limited.yaml"
    paced.write_text(yaml.safe_dump(limited))
    cluster = snakemake(*SLURM_PROFILE, "--retries", "3", "--configfile", str(paced), workdir=tmp_path / "cluster")
    assert cluster.returncode == 0, (cluster.stdout + cluster.stderr)[-3000:]
    jobs = slurm_jobs("train", tmp_path / "cluster")
    states = [job["JobState"] for job in jobs]
    assert states[0] == "TIMEOUT" and states[-1] == "COMPLETED" and set(states[1:-1]) <= {"TIMEOUT"}, states
    limits = [job["TimeLimit"] for job in jobs]
    assert limits == ["00:01:00", "00:02:00", "00:04:00", "00:08:00"][: len(jobs)], limits
    assert_resumed_to_the_straight_bytes(tmp_path / "cluster", tmp_path / "local")


def rows(path: Path) -> int | None:
    try:
        return path.read_text().count("\n")
    except FileNotFoundError:
        return None
