"""The argument types and groups that several commands share: bounded numbers, JSON objects, the
dataset options, the thread count."""

import argparse
import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeAlias

from asyncfl.settings.names import DATASETS
from asyncfl.settings.numbers import parse_number

# What each group of commands registers its parsers with: the top-level parser's subcommands
Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def json_mapping(text: str) -> dict:
    """argparse type: a JSON object, each key once at every level (a repeated key would silently keep the last)."""

    def once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [key for key, _ in pairs]
        repeated = next((key for key in keys if keys.count(key) > 1), None)
        if repeated is not None:
            raise argparse.ArgumentTypeError(f"gives {repeated[:80]!r} twice; give each key once")
        return dict(pairs)

    try:
        value = json.loads(text, object_pairs_hook=once)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"not JSON: {error}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("expected a JSON object")
    return value


def at_least(minimum: int, maximum: int | None = None, why: str = "") -> Callable[[str], int]:
    """argparse type: an integer ≥ `minimum` (and ≤ `maximum`, which `why` explains)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(f"must be an integer ≥ {minimum}, got {text!r}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"must be ≤ {maximum}{why}, got {text!r}")
        return value

    return parse


def bounded(rule: str, holds: Callable[[float], bool]) -> Callable[[str], float]:
    """argparse type: a number for which `holds` is true, `rule` saying which in the error."""

    def parse(text: str) -> float:
        value = parse_number(text)  # as every reader reads numbers (settings/numbers.py)
        if value is None or not holds(value):
            raise argparse.ArgumentTypeError(f"must be {rule}, got {text!r}")
        return value

    return parse


FRACTION = bounded("a number in (0, 1]", lambda value: 0 < value <= 1)
POSITIVE = bounded("a finite number > 0", lambda value: math.isfinite(value) and value > 0)
POWER = bounded("a power in [0.5, 1)", lambda value: 0.5 <= value < 1)


def machine_cpus() -> int:
    """The CPUs this process may run on: more torch threads than these only contend for them. Under
    SLURM, also at most the job's CPUs (`SLURM_CPUS_PER_TASK`), which a site without CPU binding does not
    enforce: a run asking for more fails with the number instead of training other bytes on fewer."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    allotted = os.environ.get("SLURM_CPUS_PER_TASK", "")
    return min(cpus, int(allotted)) if allotted.isdigit() and int(allotted) > 0 else cpus


THREADS = at_least(1, machine_cpus(), ", the CPUs this process may use")
PROCESSES = THREADS  # training processes: more than the CPUs only contend for them


def add_at_once(parser: argparse.ArgumentParser) -> None:
    """--at-once, the cap on runs a training process steps together (`sim.lockstep.Lockstep.at_once`)."""
    parser.add_argument(
        "--at-once",
        type=at_least(1),
        metavar="N",
        help="the most runs each training process keeps going at once, the next starting as one ends: each "
        "holds its model and clients in flight in memory until it ends (default: all; bytes the same)",
    )


def add_dataset_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", required=True, choices=DATASETS)
    parser.add_argument("--root", type=Path, help="dataset folder (default: resources/data/DATASET)")
