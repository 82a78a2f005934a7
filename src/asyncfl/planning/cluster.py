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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from asyncfl.planning.run_cost import MeasuredCost, RunWork
from asyncfl.settings.errors import InputError

# A gres GPU request as sites spell it: gpu:N or gpu:MODEL:N
GRES = re.compile(r"gpu(:[A-Za-z0-9_.-]+)?:[1-9][0-9]*")
PARTITION = re.compile(r"[A-Za-z0-9_.-]+")
MAX_RUNTIME = 2880  # minutes: two days, within what GPU partitions commonly allow (1–7 days)


@dataclass(frozen=True)
class JobBudget:
    """The minutes a training job may ask for.

    Attributes:
        runtime: one run's minutes where nothing is measured (`resources.train.runtime`), an upper bound.
        processes: the processes a sweep's job spreads its runs over (`resources.train.processes`).
        cap: the most minutes any job asks for (`resources.max_runtime`).
        costs: by model, the cost table's row of the device kind `resources.cost.device` names (none:
            every run asks for `runtime`).
        safety: the factor over a measured cost a run asks for (`resources.cost.safety`).
    """

    runtime: int
    processes: int
    cap: int
    costs: dict[str, MeasuredCost] = field(default_factory=dict)
    safety: float = 1.0

    def run_seconds(self, model: str, work: Callable[[], RunWork]) -> float:
        """The seconds one run of `model` asks for: its `work` at the measured cost × the safety factor, or
        `runtime` where the device kind has no row of the model."""
        if model not in self.costs:
            return 60.0 * self.runtime
        return self.safety * self.costs[model].run_seconds(work())

    def real_clock_seconds(self, computing: float, time_scale: float, virtual_time: float | None) -> float:
        """The seconds a run on the real clock asks for: its paced length (`time_scale` × its virtual-time
        budget, × the safety factor) and its `computing` besides, which bounds the time a machine that
        falls behind adds; without a virtual-time budget its length is unknown before it runs, so
        `runtime`, the user's upper bound (docs/cluster.md "Your cluster")."""
        if virtual_time is None:
            return 60.0 * self.runtime
        return self.safety * time_scale * virtual_time + computing

    def minutes(self, seconds: Sequence[float], spread: bool, steps: int = 0, step_runs: int = 1) -> int:
        """A job of runs of `seconds` each: dealt out in turn over `processes` processes where the job
        spreads them (a sweep's severity or tuning job, `cli/processes.py`), one after another otherwise
        (a packed job, one process); the longest process's minutes, and where a tuning searches past its
        grid, `steps` more steps of `step_runs` runs each (a point on every tuning seed), each step's runs
        spread alike and each as long as the longest."""
        count = max(1, min(self.processes, len(seconds))) if spread else 1
        longest = max(sum(seconds[start::count]) for start in range(count))
        searched = steps * math.ceil(step_runs / (self.processes if spread else 1)) * max(seconds)
        return max(1, math.ceil((longest + searched) / 60))

    def parts(self, seconds: Sequence[float], spread: bool) -> list[range]:
        """The runs of `seconds` in as few consecutive parts as keep every part's job within the cap, their
        sizes as even as they can be (the first parts one run more); raises InputError where one run alone
        is over the cap."""
        for count in range(1, len(seconds) + 1):
            split = even_parts(len(seconds), count)
            if all(self.minutes(seconds[part.start : part.stop], spread) <= self.cap for part in split):
                return split
        raise InputError(
            f"a run asks for {self.minutes([max(seconds)], spread)} min, over resources.max_runtime {self.cap} min, "
            "the longest job: raise max_runtime to your partition's MaxTime, or shorten the run"
        )


def job_budget(resources: dict[str, Any], table: dict[tuple[str, str], MeasuredCost] | None = None) -> JobBudget:
    """The budget of `resources:` and, where `resources.cost.device` names a device kind, its rows of the
    cost table (`run_cost.read_cost_table`)."""
    train, cost = resources["train"], resources.get("cost", {})
    device = cost.get("device")
    costs = {model: row for (kind, model), row in (table or {}).items() if kind == device}
    cap = resources.get("max_runtime", MAX_RUNTIME)
    budget = JobBudget(train["runtime"], train.get("processes", 1), cap, costs, cost.get("safety", 1.0))
    if budget.runtime > budget.cap:
        raise InputError(
            f"resources.train.runtime is {budget.runtime} min for one run, over resources.max_runtime "
            f"{budget.cap} min, the longest job: no job can train a run; raise max_runtime to your partition's "
            "MaxTime or lower runtime"
        )
    return budget


def attempt_minutes(minutes: int, attempt: int, cap: int) -> int:
    """What a job of `minutes` asks for on its `attempt`-th try: twice as much after each time limit
    (the profile's `retries`; training resumes from its checkpoint), never over the cap."""
    return min(cap, minutes * 2 ** (attempt - 1))


def attempt_runtime(minutes: int, cap: int) -> Callable[[Any, int], int]:
    """A workflow job's runtime resource: `minutes` on its first attempt, doubled on each retry, within the cap."""
    return lambda wildcards, attempt: attempt_minutes(minutes, attempt, cap)


def spread(command: str, processes: int) -> str:
    """A sweep job's `command` with its runs spread over `processes` processes (as is for one)."""
    return command.replace(" --threads", f" --processes {processes} --threads", 1) if processes > 1 else command


def even_parts(runs: int, parts: int) -> list[range]:
    """`runs` in order in `parts` consecutive ranges, their sizes as even as they can be (the first parts
    one run more)."""
    size, extra = divmod(runs, parts)
    bounds = [0]
    for index in range(parts):
        bounds.append(bounds[-1] + size + (index < extra))
    return [range(start, end) for start, end in itertools.pairwise(bounds)]


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
