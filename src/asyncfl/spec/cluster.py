"""What each job asks a SLURM cluster for, from the config's `resources:` (docs/cluster.md "Your cluster").

A site refuses a job that asks for more time than its partition allows (`EnforcePartLimits`) or leaves
it pending forever; so no job asks for more than `resources.max_runtime`, and the planner splits a job
that trains several runs into as many jobs as that takes (`split_runs`). Jobs that train go to the GPU
partition with the site's spelling of a GPU request; the others to the CPU partition, without one.
Pure functions of the config, torch-free: the workflow reads them while it parses.
"""

import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from asyncfl.spec.errors import InputError

# A gres GPU request as sites spell it: gpu:N or gpu:MODEL:N
GRES = re.compile(r"gpu(:[A-Za-z0-9_.-]+)?:[1-9][0-9]*")
PARTITION = re.compile(r"[A-Za-z0-9_.-]+")
Run = TypeVar("Run")
MAX_RUNTIME = 2880  # minutes: two days, within what GPU partitions commonly allow (1–7 days)


@dataclass(frozen=True)
class JobBudget:
    """The minutes a training job may ask for.

    Attributes:
        runtime: one run's minutes (`resources.train.runtime`), an upper bound on its training.
        processes: the processes a sweep's job spreads its runs over (`resources.train.processes`).
        cap: the most minutes any job asks for (`resources.max_runtime`).
    """

    runtime: int
    processes: int
    cap: int

    def minutes(self, runs: int, spread: bool) -> int:
        """A job of `runs` runs: they train `processes` at a time where the job spreads them (a sweep's
        severity or tuning job), one after another otherwise (a packed job, one process)."""
        return math.ceil(runs / (self.processes if spread else 1)) * self.runtime

    def most_runs(self, spread: bool) -> int:
        """The most runs one job may train within the cap."""
        return (self.processes if spread else 1) * (self.cap // self.runtime)


def job_budget(resources: dict[str, Any]) -> JobBudget:
    train = resources["train"]
    budget = JobBudget(train["runtime"], train.get("processes", 1), resources.get("max_runtime", MAX_RUNTIME))
    if budget.runtime > budget.cap:
        raise InputError(
            f"resources.train.runtime is {budget.runtime} min for one run, over resources.max_runtime "
            f"{budget.cap} min, the longest job: no job can train a run; raise max_runtime to your partition's "
            "MaxTime or lower runtime"
        )
    return budget


def split_runs(runs: Sequence[Run], most: int) -> list[tuple[Run, ...]]:
    """`runs` in order, in as few consecutive parts of at most `most` runs as there can be, their sizes
    as even as they can be (the first parts one run more)."""
    parts = max(1, math.ceil(len(runs) / most))
    size, extra = divmod(len(runs), parts)
    bounds = [0]
    for index in range(parts):
        bounds.append(bounds[-1] + size + (index < extra))
    return [tuple(runs[start:end]) for start, end in itertools.pairwise(bounds)]


def part_key(key: str, index: int, parts: int) -> str:
    """A job's key where it is one of `parts` (a part's runs' plan file and log name): unchanged alone."""
    return key if parts == 1 else f"{key}.part{index}"


def check_resources(resources: dict[str, Any]) -> None:
    """What the schema cannot check of `resources:` besides the cap, which the planner checks as it
    splits jobs (`job_budget`); raises InputError naming the key."""
    train = resources["train"]
    gres = train.get("gres")
    if gres is not None:
        if not GRES.fullmatch(gres):
            raise InputError(f"resources.train.gres is {gres!r}: write gpu:N or gpu:MODEL:N, e.g. gpu:1 or gpu:a100:1")
        if train.get("gpu", 0) or train.get("gpu_model"):
            raise InputError(
                "resources.train has gres and gpu/gpu_model, two spellings of one request: keep gres "
                "(gpu:MODEL:N) or gpu (with gpu_model), not both"
            )
    for kind, name in resources.get("partitions", {}).items():
        if name is not None and not PARTITION.fullmatch(name):
            raise InputError(f"resources.partitions.{kind} is {name!r}: a SLURM partition name (`sinfo -s` lists them)")


def gpu_job_resources(resources: dict[str, Any]) -> dict[str, Any]:
    """What a job that trains asks for besides threads and runtime: its GPUs in the site's spelling
    (`--gpus` by default, `--gres` with `resources.train.gres`), memory and the GPU partition; with no
    GPU (`gpu: 0`), memory and the CPU partition."""
    train = resources["train"]
    asked: dict[str, Any] = {"mem_mb": train["mem_mb"]}
    if train.get("gres") is not None:
        asked["gres"] = train["gres"]
    elif train.get("gpu", 0):
        asked["gpu"] = train["gpu"]
        if train.get("gpu_model") is not None:
            asked["gpu_model"] = train["gpu_model"]
    else:  # training on CPUs (gpu: 0): a CPU job
        return {**asked, "gpu": 0, **partition_resource(resources, "cpu")}
    return {**asked, **partition_resource(resources, "gpu")}


def training_kind(resources: dict[str, Any]) -> str:
    """The partition kind the jobs that train go to: gpu, or cpu where they ask for no GPU."""
    return "cpu" if gpu_job_resources(resources).get("gpu") == 0 else "gpu"


def cpu_job_resources(resources: dict[str, Any]) -> dict[str, Any]:
    """What a job that trains nothing asks for besides the profile's defaults: the CPU partition."""
    return partition_resource(resources, "cpu")


def partition_resource(resources: dict[str, Any], kind: str) -> dict[str, str]:
    name = resources.get("partitions", {}).get(kind)
    return {} if name is None else {"slurm_partition": name}


def check_partitions(resources: dict[str, Any], longest: dict[str, int], sinfo: str) -> None:
    """The partitions the config names against the cluster's (`sinfo -h -o "%R %l"`): each exists and
    allows the longest job sent to it (`longest`: minutes by kind, cpu and gpu)."""
    limits = dict(line.split() for line in sinfo.splitlines() if line.strip())
    for kind, name in resources.get("partitions", {}).items():
        if name is None:
            continue
        if name not in limits:
            raise InputError(
                f"resources.partitions.{kind} is {name!r}, which this cluster does not have; "
                f"its partitions: {', '.join(sorted(limits))}"
            )
        allowed = slurm_minutes(limits[name])
        if longest.get(kind, 0) > allowed:
            raise InputError(
                f"a {kind} job asks for {longest[kind]} min, over partition {name}'s MaxTime of {allowed:g} min "
                f"({limits[name]}): set resources.max_runtime: {math.floor(allowed)} or less"
            )


def slurm_minutes(limit: str) -> float:
    """A SLURM time limit (`sinfo %l`: [D-]HH:MM:SS, MM:SS, or infinite) in minutes."""
    if limit in {"infinite", "UNLIMITED"}:
        return math.inf
    days, _, clock = limit.rpartition("-")
    fields = [int(part) for part in clock.split(":")]
    hours, minutes, seconds = ([0] * (3 - len(fields)) + fields)[-3:]
    return (int(days or 0) * 24 + hours) * 60 + minutes + seconds / 60
