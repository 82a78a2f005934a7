"""The workflow on a real SLURM cluster (tests/slurm/cluster.sh): same bytes as locally, failures, scancel and resume.

Without a cluster these tests skip; CI starts one and sets ASYNCFL_REQUIRE_ALL=1, which turns
the skip into a failure.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from asyncfl.spec.layout import RUN_OUTPUTS
from conftest import ENV, QUICK_CONFIG, REPO, RUN_METRICS_GLOBS, figure_names, skip_unless, snakemake, started, wait_for

pytestmark = pytest.mark.slurm

SLURM_PROFILE = ["--profile", str(REPO / "profiles/slurm"), "--workflow-profile", str(REPO / "tests/slurm/profile")]


def cluster_is_up() -> bool:
    if shutil.which("sinfo") is None:
        return False
    result = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True)
    return result.returncode == 0 and result.stdout.strip() in {"idle", "mixed", "allocated"}


@pytest.fixture(autouse=True)
def slurm():
    skip_unless(cluster_is_up(), "no SLURM cluster here: start one with `tests/slurm/cluster.sh start`")


def write_config(path: Path, rounds: int = 30, **train) -> Path:
    """The quick config reduced to one small experiment with one AFL run of `rounds` rounds (no budget)."""
    config = yaml.safe_load((QUICK_CONFIG).read_text())
    experiment = {**config["experiments"]["digits_mlp"], "algorithms": ["afl"], "participation": [5], "seeds": [0]}
    experiment.pop("budget", None)
    experiment.pop("pack_runs", None)  # one job per run: the `train` rule and its per-run log
    experiment["rounds"] = rounds  # the workflow's key: refused under train:
    experiment["train"] = {**experiment["train"], **train}
    config["experiments"] = {"small": experiment}
    path.write_text(yaml.safe_dump(config))
    return path


RUN = "results/small/runs/afl/J5/seed0"


def test_quick_config_on_slurm_matches_the_local_run(tmp_path, quick_local_run):
    """Every job of the quick config's seed 0 (a run depends on its own seed only) on the cluster: the
    same bytes as the local run's, and every figure and the archive."""
    quick = yaml.safe_load((QUICK_CONFIG).read_text())
    for experiment in quick["experiments"].values():
        experiment["seeds"] = [0]
    config = tmp_path / "quick_seed0.yaml"
    config.write_text(yaml.safe_dump(quick, sort_keys=False))  # a sweep's severities keep their order
    result = snakemake(*SLURM_PROFILE, "--configfile", str(config), workdir=tmp_path)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    runs = sorted(p.relative_to(tmp_path) for pattern in RUN_METRICS_GLOBS for p in tmp_path.glob(pattern))
    local_seed0 = sorted(
        p.relative_to(quick_local_run)
        for pattern in RUN_METRICS_GLOBS
        for p in quick_local_run.glob(pattern.replace("/*/metrics.csv", "/seed0/metrics.csv"))
    )
    assert runs == local_seed0 and {run.parts[1] for run in runs} == set(quick["experiments"])
    for metrics in runs:
        for name in RUN_OUTPUTS:
            local, on_slurm = quick_local_run / metrics.parent / name, tmp_path / metrics.parent / name
            assert local.read_bytes() == on_slurm.read_bytes(), f"{metrics.parent}/{name}"
    for experiment in quick["experiments"]:
        for figure in figure_names(quick, experiment):
            assert (tmp_path / f"results/figures/{experiment}/{figure}.png").is_file()
    assert (tmp_path / "results/archive/asyncfl-results.tar.gz").is_file()


def test_a_failing_job_is_reported_promptly_and_a_rerun_completes(tmp_path):
    diverging = write_config(tmp_path / "diverging.yaml", optimizer="sgd", gamma0=1e12, rounds=3)
    failed = snakemake(*SLURM_PROFILE, "--configfile", str(diverging), workdir=tmp_path, timeout=1800)
    assert failed.returncode != 0
    output = failed.stdout + failed.stderr
    assert "Error in rule train" in output and "training loss is" in output  # the job's log, shown

    fixed = write_config(tmp_path / "fixed.yaml", rounds=3)
    rerun = snakemake(*SLURM_PROFILE, "--configfile", str(fixed), workdir=tmp_path, timeout=1800)
    assert rerun.returncode == 0, (rerun.stdout + rerun.stderr)[-3000:]
    assert (tmp_path / RUN / "model.pt").is_file()


def test_a_cancelled_training_job_resumes_from_its_checkpoint(tmp_path):
    config = write_config(tmp_path / "long.yaml", rounds=60, local_epochs=1, checkpoint_every=2, eval_every=5)

    local = tmp_path / "local"
    straight = snakemake(f"{RUN}/model.pt", "--cores", "1", "--configfile", str(config), workdir=local)
    assert straight.returncode == 0, (straight.stdout + straight.stderr)[-3000:]

    cluster = tmp_path / "cluster"
    cluster.mkdir()
    command = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(REPO / "Snakefile"),
        "--directory",
        str(cluster),
        *SLURM_PROFILE,
        "--configfile",
        str(config),
    ]
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
    assert workflow.returncode != 0, output[-2000:]
    assert (cluster / RUN / "checkpoint.pt").exists() and not (cluster / RUN / "model.pt").exists()

    resumed = snakemake(*SLURM_PROFILE, "--configfile", str(config), workdir=cluster, timeout=1800)
    assert resumed.returncode == 0, (resumed.stdout + resumed.stderr)[-3000:]
    log = (cluster / "logs/train/small/afl_J5_seed0.log").read_text()
    assert "resuming" in log
    for name in ("metrics.csv", "events.csv", "model.pt"):
        assert (cluster / RUN / name).read_bytes() == (local / RUN / name).read_bytes(), name


def rows(path: Path) -> int | None:
    try:
        return path.read_text().count("\n")
    except FileNotFoundError:
        return None
