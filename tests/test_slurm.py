"""The workflow on a real SLURM cluster (tests/slurm/cluster.sh): the quick config's jobs and bytes, and
every job of the papers' plans accepted by a strict cluster. Failures, scancel, the time limit and resume:
test_slurm_faults.py (a file of its own, so that `make test` runs it beside this one).

Without a cluster these tests skip; CI starts one and sets ASYNCFL_REQUIRE_ALL=1, which turns
the skip into a failure.
"""

import json
import shlex
import shutil
import subprocess
import sys

import pytest
import yaml

from asyncfl.planning.layout import RUN_OUTPUTS
from conftest import REPO, RUN_METRICS_GLOBS, quick_run_jobs, snakemake
from slurm_cases import SLURM_PROFILE, on_this_site, site_env, write_config

pytestmark = pytest.mark.slurm


def test_quick_config_on_slurm_matches_the_local_run(quick_run, tmp_path):
    """The quick config on the cluster (the session's `quick_run`, every figure and the archive checked by
    test_workflow.py's end-to-end test): each job on the partition of its kind, with its GPU and threads,
    the partitions made locally;
    and a training job run again locally, in a copy, makes the cluster's bytes: the clients' world
    experiment's job, whose runs' bytes depend on the most (drawn links, offline periods, failures)."""
    workdir, config = quick_run
    quick = yaml.safe_load(config.read_text())
    ran = json.loads(quick_run_jobs(workdir).read_text())
    trained = {rule for rule in ran if rule.startswith(("train_", "tune_", "theory"))}
    assert trained and set(ran) - trained >= {"figures", "straggler_claim"}
    assert not {"partition", "partition_validated"} & set(ran)  # local rules: made where snakemake runs
    assert list(workdir.glob("results/partitions/*.npz"))
    for rule, jobs in ran.items():
        for job in jobs:
            assert job["Partition"] == ("gpu" if rule in trained else "cpu"), (rule, job)
            assert ("gpu:1" in job.get("TresPerJob", "")) == (rule in trained), (rule, job)
            assert job["NumCPUs"] == "1", (rule, job)  # the quick config's threads
    runs = {p.parent.relative_to(workdir) for pattern in RUN_METRICS_GLOBS for p in workdir.glob(pattern)}
    assert {run.parts[1] for run in runs} == set(quick["experiments"])
    local = tmp_path / "local"
    shutil.copytree(workdir, local, symlinks=True)
    world = sorted(run for run in runs if run.parts[1] == "digits_world")
    assert len(world) == len(quick["experiments"]["digits_world"]["algorithms"])
    for run in world:
        shutil.rmtree(local / run)
    targets = [f"{run}/model.pt" for run in world]  # before --configfile, which takes every word after it
    again = snakemake(*targets, "--cores", "2", "--configfile", str(config), workdir=local)
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
    assert "train_digits_world_pack0" in again.stdout + again.stderr  # trained here, not found done
    for run in world:
        for name in RUN_OUTPUTS:
            assert (local / run / name).read_bytes() == (workdir / run / name).read_bytes(), f"{run}/{name}"


def node_limits(pair: str) -> tuple[int, int]:
    """The CPUs and memory (MB) of the one node of the test cluster that has partition pair `pair`."""
    listed = subprocess.run(["sinfo", "-h", "-o", "%c %m"], capture_output=True, text=True, env=site_env(pair))
    cpus, memory = listed.stdout.split()[:2]
    return int(cpus), int(memory.rstrip("+"))


@pytest.mark.parametrize(("name", "gres", "pair"), [("config/config.yaml", None, "cpu"),
                                                   ("config/claim.yaml", None, "standard"),
                                                   ("config/config.yaml", "gpu:1", "standard"),
                                                   ("config/config.yaml", "gpu:a100:1", "batch")])  # fmt: skip
def test_every_job_of_a_papers_plan_is_accepted_by_a_strict_cluster(tmp_path, name, gres, pair):
    """The plugin's own sbatch line for each job of the plan (tests/slurm/submit_strings.py), asked of the
    cluster with `sbatch --test-only`, and again asking for `max_runtime`, the most a retry asks: each
    within its partition's MaxTime, on the partition of its kind, with CPUs equal to its threads, on
    either partition pair with only the documented edits (partitions, max_runtime: config/claim.yaml,
    which trains on CPUs, on an 8 h CPU partition), and on the second cluster (typed GPUs,
    select/cons_res: --gres with the type). The node's size stands in for a site's larger nodes:
    threads and memory are cut to it, the time limits and partitions are not."""
    config = on_this_site(yaml.safe_load((REPO / name).read_text()), pair)
    partitions = config["resources"]["partitions"]
    cpus, memory = node_limits(pair)
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
        cwd=tmp_path, capture_output=True, text=True, env=site_env(pair), timeout=900,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr[-3000:]
    submits = json.loads(listed.stdout)
    rules = {submit["rule"] for submit in submits}  # every job but the local rules' (data, plans, partitions)
    assert any(rule.startswith("train_") for rule in rules) and not rules & {"partition", "partition_validated"}
    asked: dict[str, dict] = {}
    for submit in submits:
        words = shlex.split(submit["call"])
        minutes = int(words[words.index("-t") + 1])
        trains = submit["rule"].startswith(("train", "tune_", "theory"))
        gpu = [word for word in words if word.startswith(("--gpus", "--gres"))]
        on_gpus = trains and bool(train["gpu"] or gres)
        assert minutes <= config["resources"]["max_runtime"], submit
        assert words[words.index("-p") + 1] == partitions["gpu" if on_gpus else "cpu"], submit
        assert gpu == ([f"--gres={gres}" if gres else f"--gpus={train['gpu']}"] if on_gpus else []), submit
        assert f"--cpus-per-task={submit['threads']}" in words, submit
        rule = submit["rule"]
        spread = rule.startswith("tune_") or (rule.startswith("train_") and "_pack" not in rule)
        if trains:  # a sweep's severity and tuning jobs spread their runs over processes
            assert submit["threads"] == train["threads"] * (train.get("processes", 1) if spread else 1), submit
        comment = words.index("--comment")
        asked.setdefault(shlex.join(words[:comment] + words[comment + 2 :]), submit)
    for line, submit in asked.items():
        words = shlex.split(line)
        retried = [
            *words[: words.index("-t") + 1],
            str(config["resources"]["max_runtime"]),
            *words[words.index("-t") + 2 :],
        ]
        trains = submit["rule"].startswith(("train", "tune_", "theory"))  # what a retry asks more time for
        for call in (words, retried) if trains else (words,):
            test = subprocess.run(
                [*call, "--test-only", "--wrap", "true"], capture_output=True, text=True, timeout=60, env=site_env(pair)
            )
            assert test.returncode == 0, (submit["rule"], shlex.join(call), test.stderr)


def test_partitions_the_cluster_lacks_or_limits_are_refused_before_anything_is_submitted(tmp_path):
    site = yaml.safe_load(write_config(tmp_path / "c.yaml").read_text())
    train = site["resources"]["train"]
    for resources, message in [
        ({"partitions": {"cpu": "cpu", "gpu": "gpus"}}, "resources.partitions.gpu is 'gpus', which this cluster"),
        ({"max_runtime": 2880}, "resources.max_runtime is 2880 min, over partition gpu's MaxTime of 2160"),
        # the test cluster's GPUs are untyped: a GPU type is refused in either spelling, naming its key
        ({"train": {**train, "gpu_model": "a100"}}, "resources.train.gpu_model asks for GPU type 'a100'"),
        ({"train": {**train, "gpu": 0, "gres": "gpu:a100:1"}}, "resources.train.gres asks for GPU type 'a100'"),
    ]:
        config = {**site, "resources": {**site["resources"], **resources}}
        path = tmp_path / "bad.yaml"
        path.write_text(yaml.safe_dump(config))
        result = snakemake("-n", *SLURM_PROFILE, "--configfile", str(path), workdir=tmp_path)
        assert result.returncode != 0 and message in result.stdout + result.stderr, result.stderr[-2000:]


def test_a_gpu_spelling_the_second_cluster_refuses_is_refused_before_anything_is_submitted(tmp_path):
    """The second cluster (typed GPUs, select/cons_res) refuses --gpus, which gpu and gpu_model make, and
    a GPU type its nodes lack: `-n` says so in one line naming the key, as sbatch would refuse it three
    times (its own error, not the key's); the spelling it accepts, --gres with the type, plans."""
    refused = subprocess.run(
        ["sbatch", "-p", "a100", "--gpus=a100:1", "-t", "60", "--test-only", "--wrap", "true"],
        capture_output=True, text=True, timeout=60, env=site_env("batch"),
    )  # fmt: skip
    assert refused.returncode != 0 and "unsupported by configured SelectType" in refused.stderr, refused.stderr
    site = on_this_site(yaml.safe_load(write_config(tmp_path / "c.yaml").read_text()), "batch")
    train = site["resources"]["train"]
    for spelling, message in [
        ({"gpu": 1, "gpu_model": "a100"}, 'refuses: write resources.train.gres: "gpu:a100:1" instead of gpu and'),
        ({"gpu": 0, "gres": "gpu:h100:1"}, "resources.train.gres asks for GPU type 'h100'"),
        ({"gpu": 0, "gres": "gpu:a100:1"}, None),
    ]:
        config = {**site, "resources": {**site["resources"], "train": {**train, **spelling}}}
        path = tmp_path / "variant.yaml"
        path.write_text(yaml.safe_dump(config))
        result = snakemake("-n", *SLURM_PROFILE, "--configfile", str(path), workdir=tmp_path, env=site_env("batch"))
        output = result.stdout + result.stderr
        if message is None:
            assert result.returncode == 0, output[-2000:]
        else:
            assert result.returncode != 0 and message in output, output[-2000:]
            assert len([line for line in output.splitlines() if message in line]) == 1, output[-2000:]
