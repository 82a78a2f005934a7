"""Configs and output readers shared by the workflow's test files (test_workflow.py, test_workflow_training.py)."""

import re

import yaml

from conftest import QUICK_CONFIG


def job_counts(output: str) -> dict[str, int]:
    table = output.split("Job stats:")[1].split("total")[0]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.MULTILINE)}


def tiny_config(**changes) -> dict:
    """The quick config cut to one small experiment: AFL and sync, one seed, two rounds."""
    config = yaml.safe_load((QUICK_CONFIG).read_text())
    tiny = {**config["experiments"]["digits_mlp"], "rounds": 2, "participation": [5], "seeds": [0]}
    tiny.update(algorithms=["afl", "sync"], budget={"updates": 10})
    tiny.pop("pack_runs", None)  # one job per run: the `train` rule
    config["experiments"] = {"tiny": tiny}
    config.update(changes)
    return config
