"""The SLURM tests' shared parts (not a test module): the tests' cluster as a site's user names it, and a
small config of one AFL run."""

import re
import subprocess
from pathlib import Path

import yaml

from conftest import ENV, QUICK_CONFIG, REPO

SLURM_PROFILE = ["--profile", str(REPO / "profiles/slurm"), "--workflow-profile", str(REPO / "tests/slurm/profile")]
# The test cluster's two partition pairs and their MaxTime in minutes (tests/slurm/cluster.sh), and the
# second cluster's pair (typed GPUs, select/cons_res), as a site's user writes them into the config they
# run (docs/cluster.md "Your cluster"): max_runtime is the MaxTime of the partition that trains
SITES = {
    "cpu": ({"cpu": "cpu", "gpu": "gpu"}, {"cpu": 1440, "gpu": 2160}),
    "standard": ({"cpu": "standard", "gpu": "gpu_a100"}, {"cpu": 480, "gpu": 1440}),
    "batch": ({"cpu": "batch", "gpu": "a100"}, {"cpu": 240, "gpu": 2880}),
}
VARIANT_CONF = "/etc/slurm-variant/slurm.conf"


def site_env(pair: str) -> dict[str, str]:
    """The environment whose SLURM commands ask the cluster of partition pair `pair`: the second
    cluster's slurm.conf for its pair, the default cluster's otherwise."""
    return {**ENV, "SLURM_CONF": VARIANT_CONF} if pair == "batch" else ENV


def on_this_site(config: dict, pair: str = "cpu") -> dict:
    partitions, limits = SITES[pair]
    train = config["resources"]["train"]
    trains_on = "cpu" if train.get("gpu") == 0 and "gres" not in train else "gpu"
    return {**config, "resources": {**config["resources"], "partitions": partitions, "max_runtime": limits[trains_on]}}


def write_config(path: Path, rounds: int = 30, **train) -> Path:
    """The quick config reduced to one small experiment with one AFL run of `rounds` rounds (no budget),
    its job asking for `resources.train.runtime`."""
    config = yaml.safe_load((QUICK_CONFIG).read_text())
    experiment = {**config["experiments"]["digits_mlp"], "algorithms": ["afl"], "participation": [5], "seeds": [0]}
    experiment.pop("budget", None)
    experiment.pop("pack_runs", None)  # one job per run: the `train` rule and its per-run log
    experiment["rounds"] = rounds  # the workflow's key: refused under train:
    experiment["train"] = {**experiment["train"], **train}
    config["experiments"] = {"small": experiment}
    config["resources"].pop("cost")  # nothing measured: the run asks for resources.train.runtime
    path.write_text(yaml.safe_dump(on_this_site(config)))
    return path


RUN = "results/small/runs/afl/J5/seed0"


def assert_resumed_to_the_straight_bytes(cluster: Path, local: Path) -> None:
    """The last attempt resumed from a checkpoint, or found the run finished by an attempt that SLURM
    then killed, and restored it (both are a resume); the bytes are the straight run's."""
    log = (cluster / "logs/train/small/afl_J5_seed0.log").read_text()
    assert "resuming" in log or "this run already finished" in log, log[-2000:]
    for name in ("metrics.csv", "events.csv", "model.pt"):
        assert (cluster / RUN / name).read_bytes() == (local / RUN / name).read_bytes(), name


def slurm_jobs(rule: str, folder: Path) -> list[dict[str, str]]:
    """The cluster's jobs of `rule` run in `folder`, oldest first, finished ones too (MinJobAge keeps them
    listed), each with the fields `scontrol show job` gives: never another test's, whose jobs the SLURM
    files running side by side (`make test`) queue on the same cluster."""
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


def jobs_by_rule(workdir: Path) -> dict[str, list[dict[str, str]]]:
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
