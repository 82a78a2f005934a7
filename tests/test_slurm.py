"""The workflow on a real SLURM cluster (tests/slurm/cluster.sh): same bytes as locally, failures, scancel and resume.

Without a cluster these tests skip; CI starts one and sets ASYNCFL_REQUIRE_ALL=1, which turns
the skip into a failure.
"""

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from asyncfl.planning.layout import RUN_OUTPUTS
from conftest import ENV, QUICK_CONFIG, REPO, RUN_METRICS_GLOBS, figure_names, skip_unless, snakemake, started, wait_for

pytestmark = pytest.mark.slurm

SLURM_PROFILE = ["--profile", str(REPO / "profiles/slurm"), "--workflow-profile", str(REPO / "tests/slurm/profile")]
# The test cluster's partitions and the longest job its GPU partition allows (tests/slurm/cluster.sh), as a
# site's user writes them into the config they run
SITE = {"partitions": {"cpu": "cpu", "gpu": "gpu"}, "max_runtime": 2160}


def on_this_site(config: dict) -> dict:
    return {**config, "resources": {**config["resources"], **SITE}}


def cluster_is_up() -> bool:
    if shutil.which("sinfo") is None:
        return False
    result = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True)
    states = set(result.stdout.split())
    return result.returncode == 0 and bool(states) and states <= {"idle", "mixed", "allocated"}


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
    path.write_text(yaml.safe_dump(on_this_site(config)))
    return path


RUN = "results/small/runs/afl/J5/seed0"


def test_quick_config_on_slurm_matches_the_local_run(tmp_path, quick_local_run):
    """Every job of the quick config's seed 0 (a run depends on its own seed only) on the cluster: the
    same bytes as the local run's, and every figure and the archive."""
    quick = yaml.safe_load((QUICK_CONFIG).read_text())
    for experiment in quick["experiments"].values():
        experiment["seeds"] = [0]
    config = tmp_path / "quick_seed0.yaml"
    config.write_text(yaml.safe_dump(on_this_site(quick), sort_keys=False))  # a sweep's severities keep their order
    result = snakemake(*SLURM_PROFILE, "--configfile", str(config), workdir=tmp_path)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    # where each job ran, as the cluster recorded it: what trains on the GPU partition with its GPU and
    # threads, everything else on the CPU partition without one
    ran = jobs_of(tmp_path)
    trained = {rule for rule in ran if rule.startswith(("train_", "tune_", "theory"))}
    assert trained and set(ran) - trained >= {"partition_validated", "figures", "straggler_claim"}
    for rule, jobs in ran.items():
        for job in jobs:
            assert job["Partition"] == ("gpu" if rule in trained else "cpu"), (rule, job)
            assert ("gpu:1" in job.get("TresPerJob", "")) == (rule in trained), (rule, job)
            assert job["NumCPUs"] == "1", (rule, job)  # the quick config's threads
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
    assert (tmp_path / "results/archive/quick_seed0/asyncfl-results.tar.gz").is_file()


def jobs_of(workdir: Path) -> dict[str, list[dict[str, str]]]:
    """The cluster's record of the jobs a workflow in `workdir` submitted (`scontrol show job`, which
    keeps finished jobs for MinJobAge: no accounting here), by rule."""
    listed = subprocess.run(["scontrol", "-o", "show", "job"], capture_output=True, text=True, check=True).stdout
    jobs: dict[str, list[dict[str, str]]] = {}
    for line in listed.splitlines():
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        rule = re.match(r"rule_(\w+?)(_wildcards_|$)", fields.get("Comment", ""))
        if rule and fields.get("WorkDir") == str(workdir):
            jobs.setdefault(rule[1], []).append(fields)
    return jobs


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


def node_limits() -> tuple[int, int]:
    """The CPUs and memory (MB) of the test cluster's one node."""
    cpus, memory = subprocess.run(["sinfo", "-h", "-o", "%c %m"], capture_output=True, text=True).stdout.split()[:2]
    return int(cpus), int(memory.rstrip("+"))


@pytest.mark.parametrize(("name", "gres"), [("config/config.yaml", None), ("config/claim.yaml", None),
                                           ("config/config.yaml", "gpu:1")])  # fmt: skip
def test_every_job_of_a_papers_plan_is_accepted_by_a_strict_cluster(tmp_path, name, gres):
    """The plugin's own sbatch line for each job of the plan (tests/slurm/submit_strings.py), asked of the
    cluster with `sbatch --test-only`: each within its partition's MaxTime, on the partition of its kind,
    with CPUs equal to its threads. The node's size stands in for a site's larger nodes: threads and
    memory are cut to it, the time limits and partitions are not."""
    config = on_this_site(yaml.safe_load((REPO / name).read_text()))
    cpus, memory = node_limits()
    train = config["resources"]["train"]
    train["threads"] = max(1, min(train["threads"], cpus // train.get("processes", 1)))
    train["mem_mb"] = min(train["mem_mb"], memory)
    if gres:  # the spelling of sites whose select plugin refuses --gpus
        train.update(gpu=0, gres=gres)
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    profiles = [str(REPO / "profiles/slurm"), str(REPO / "tests/slurm/profile")]
    listed = subprocess.run(
        [sys.executable, str(REPO / "tests/slurm/submit_strings.py"), str(path), *profiles],
        cwd=tmp_path, capture_output=True, text=True, env=ENV, timeout=900,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr[-3000:]
    submits = json.loads(listed.stdout)
    assert len(submits) > 20
    asked: dict[str, dict] = {}
    for submit in submits:
        words = shlex.split(submit["call"])
        minutes = int(words[words.index("-t") + 1])
        trains = submit["rule"].startswith(("train", "tune_", "theory"))
        gpu = [word for word in words if word.startswith(("--gpus", "--gres"))]
        on_gpus = trains and bool(train["gpu"] or gres)
        assert minutes <= SITE["max_runtime"], submit
        assert words[words.index("-p") + 1] == ("gpu" if on_gpus else "cpu"), submit
        assert gpu == ([f"--gres={gres}" if gres else f"--gpus={train['gpu']}"] if on_gpus else []), submit
        assert f"--cpus-per-task={submit['threads']}" in words, submit
        rule = submit["rule"]
        spread = rule.startswith("tune_") or (rule.startswith("train_") and "_pack" not in rule)
        if trains:  # a sweep's severity and tuning jobs spread their runs over processes
            assert submit["threads"] == train["threads"] * (train.get("processes", 1) if spread else 1), submit
        comment = words.index("--comment")
        asked.setdefault(shlex.join(words[:comment] + words[comment + 2 :]), submit)
    for line, submit in asked.items():
        test = subprocess.run(
            [*shlex.split(line), "--test-only", "--wrap", "true"], capture_output=True, text=True, timeout=60
        )
        assert test.returncode == 0, (submit["rule"], line, test.stderr)


def test_partitions_the_cluster_lacks_or_limits_are_refused_before_anything_is_submitted(tmp_path):
    config = yaml.safe_load(write_config(tmp_path / "c.yaml").read_text())
    for resources, message in [
        ({"partitions": {"cpu": "cpu", "gpu": "gpus"}}, "resources.partitions.gpu is 'gpus', which this cluster"),
        ({"max_runtime": 2880, "partitions": {"cpu": "cpu", "gpu": "gpu"}}, "over partition gpu's MaxTime of 2160"),
    ]:
        config["resources"].update(resources)
        config["resources"]["train"]["runtime"] = 2880 if "max_runtime" in resources else 30
        path = tmp_path / "bad.yaml"
        path.write_text(yaml.safe_dump(config))
        result = snakemake("-n", *SLURM_PROFILE, "--configfile", str(path), workdir=tmp_path)
        assert result.returncode != 0 and message in result.stdout + result.stderr, result.stderr[-2000:]
