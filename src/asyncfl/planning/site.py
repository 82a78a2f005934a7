"""The SLURM site a workflow submits to, as `sinfo` and `scontrol` describe it, and the config's `resources:`
checked against it before anything is submitted (docs/cluster.md "Your cluster").

A strict site refuses at submission what it cannot schedule (`EnforcePartLimits`): a time over the
partition's MaxTime, a GPU type its nodes lack, `--gpus` where its SelectType is select/cons_res. sbatch
then names its own error, not the config key, once per retry. Asked on the login node, the site answers
in a second: each refusal becomes one line at `snakemake -n` naming the key to edit. Retries ask for up
to `resources.max_runtime` (planning/cluster.py `attempt_minutes`), so the cap itself, not only the longest
first attempt, must fit the partition.
"""

import math
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any

from asyncfl.planning.cluster import gpu_job_resources, training_kind
from asyncfl.settings.errors import InputError

# sinfo's columns: partition, MaxTime, GRES of a group of its nodes (one line per group)
SINFO = ["sinfo", "-h", "-o", "%R|%l|%G"]
SCONTROL = ["scontrol", "show", "config"]
SELECT_TYPE = re.compile(r"^SelectType\s*=\s*(\S+)", re.MULTILINE)
# select/cons_res, SLURM's older resource selection, refuses --gpus ("Requested GRES option unsupported")
GPUS_REFUSED = "select/cons_res"


@dataclass(frozen=True)
class Partition:
    """A partition: its MaxTime in minutes and, by GPU type (None: untyped), the most GPUs one node has."""

    minutes: float
    gpus: dict[str | None, int]


@dataclass(frozen=True)
class Site:
    partitions: dict[str, Partition]
    select_type: str


def ask_site(resources: dict[str, Any]) -> Site | None:
    """The site, where it can be asked and the config names partitions: on a login node (`sinfo`
    answers), not inside a job (its workflow was checked when it was submitted); None elsewhere."""
    if not any(resources.get("partitions", {}).values()) or shutil.which("sinfo") is None:
        return None
    if "SLURM_JOB_ID" in os.environ:
        return None
    try:
        listed = subprocess.run(SINFO, capture_output=True, text=True, timeout=60)
        shown = subprocess.run(SCONTROL, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if listed.returncode != 0:
        return None
    return read_site(listed.stdout, shown.stdout if shown.returncode == 0 else "")


def read_site(sinfo: str, config: str) -> Site:
    """The site from `sinfo -h -o "%R|%l|%G"` and `scontrol show config`."""
    limits: dict[str, float] = {}
    gpus: dict[str, dict[str | None, int]] = {}
    for line in sinfo.splitlines():
        if line.count("|") != 2:
            continue
        name, limit, gres = line.split("|")
        limits[name] = slurm_minutes(limit)
        per_type = gpus.setdefault(name, {})
        for kind, count in node_gpus(gres).items():
            per_type[kind] = max(per_type.get(kind, 0), count)
    select = SELECT_TYPE.search(config)
    partitions = {name: Partition(limits[name], gpus[name]) for name in limits}
    return Site(partitions, select.group(1) if select else "")


def node_gpus(gres: str) -> dict[str | None, int]:
    """A node group's GPUs by type from sinfo's %G ("gpu:2", "gpu:a100:4(S:0-1),mps:100", "(null)")."""
    found: dict[str | None, int] = {}
    for item in re.sub(r"\([^)]*\)", "", gres).split(","):
        fields = item.strip().split(":")
        if fields[0] != "gpu" or len(fields) not in (2, 3) or not fields[-1].isdigit():
            continue
        kind = fields[1] if len(fields) == 3 else None
        found[kind] = found.get(kind, 0) + int(fields[-1])
    return found


def check_site(resources: dict[str, Any], longest: int, site: Site) -> None:
    """The config's partitions exist, the one that trains allows every attempt of its jobs (`longest`: the
    longest first attempt in minutes; a retry asks up to `max_runtime`), and its GPU request is one the
    site can schedule; raises InputError naming the key."""
    for kind, name in resources.get("partitions", {}).items():
        if name is not None and name not in site.partitions:
            raise InputError(
                f"resources.partitions.{kind} is {name!r}, which this cluster does not have; "
                f"its partitions: {', '.join(sorted(site.partitions))}"
            )
    kind = training_kind(resources)
    name = resources.get("partitions", {}).get(kind)
    if name is None:
        return
    partition = site.partitions[name]
    check_time(resources, kind, name, partition, longest)
    if kind == "gpu":
        check_gpus(resources["train"], name, partition, site.select_type)


def check_time(resources: dict[str, Any], kind: str, name: str, partition: Partition, longest: int) -> None:
    cap = resources.get("max_runtime")
    allowed = partition.minutes
    if longest > allowed:
        raise InputError(
            f"a {kind} job asks for {longest} min, over partition {name}'s MaxTime of {allowed:g} min: "
            f"set resources.max_runtime: {math.floor(allowed)} or less"
        )
    if cap is not None and cap > allowed:
        raise InputError(
            f"resources.max_runtime is {cap} min, over partition {name}'s MaxTime of {allowed:g} min, and a job "
            f"retried after its time limit asks for up to max_runtime: set resources.max_runtime: "
            f"{math.floor(allowed)} or less"
        )


def check_gpus(train: dict[str, Any], name: str, partition: Partition, select_type: str) -> None:
    """The GPU request of a job that trains, as the profile's plugin spells it (`--gpus=[MODEL:]N` from
    gpu/gpu_model, `--gres=gpu[:MODEL]:N` from gres), against the partition's nodes, then its SelectType
    (so that the gres spelling a select/cons_res site is told to write asks for what its nodes have)."""
    asked = gpu_job_resources({"train": train})
    if "gres" in asked:
        key, fields = "resources.train.gres", asked["gres"].split(":")
        model, count = (fields[1] if len(fields) == 3 else None), int(fields[-1])
    else:
        key, model, count = "resources.train.gpu", asked.get("gpu_model"), int(asked["gpu"])
    if not partition.gpus:
        raise InputError(
            f'resources.partitions.gpu is {name!r}, whose nodes have no GPUs (`sinfo -o "%P %G"`): name the '
            "partition with GPUs, or train on CPUs with resources.train.gpu: 0"
        )
    if model is not None and model not in partition.gpus:
        key = "resources.train.gpu_model" if key.endswith("gpu") else key
        typed = sorted(kind for kind in partition.gpus if kind is not None)
        untyped = "remove gpu_model" if key.endswith("gpu_model") else "ask for gpu:N without a model"
        fix = f"its types: {', '.join(typed)}" if typed else f"they are untyped: {untyped}"
        raise InputError(f"{key} asks for GPU type {model!r}, which partition {name}'s nodes lack; {fix}")
    most = partition.gpus[model] if model is not None else sum(partition.gpus.values())
    if count > most:
        raise InputError(f"{key} asks for {count} GPUs, more than a node of partition {name} has ({most})")
    if key != "resources.train.gres" and select_type == GPUS_REFUSED:  # last: the gres it suggests is one that fits
        raise InputError(
            f"resources.train.gpu asks for --gpus, which this site's SelectType {select_type} refuses: "
            f'write resources.train.gres: "gpu:{model + ":" if model else ""}{count}" instead of gpu'
            + (" and gpu_model" if model else "")
        )


def slurm_minutes(limit: str) -> float:
    """A SLURM time limit (`sinfo %l`: [D-]HH:MM:SS, MM:SS, or infinite) in minutes."""
    if limit in {"infinite", "UNLIMITED"}:
        return math.inf
    days, _, clock = limit.rpartition("-")
    fields = [int(part) for part in clock.split(":")]
    hours, minutes, seconds = ([0] * (3 - len(fields)) + fields)[-3:]
    return (int(days or 0) * 24 + hours) * 60 + minutes + seconds / 60
