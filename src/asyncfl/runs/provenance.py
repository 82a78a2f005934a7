"""Where and with what results were made: one source for run.json and the archive's provenance.json."""

import importlib.metadata
import os
import platform
import subprocess

import numpy as np

import asyncfl

PACKAGES = ("asyncfl", "torch", "torchvision", "numpy", "pandas", "seaborn", "matplotlib", "snakemake", "scikit-learn")


def run_environment(device: str, torch_version: str) -> dict:
    """What run.json records of the process that trained: versions, device, host (torch's version is
    the trainer's to give: the archive reads this module without importing torch)."""
    return {
        "asyncfl_version": asyncfl.__version__,
        "versions": {"python": platform.python_version(), "torch": torch_version, "numpy": np.__version__},
        "device": device,
        "hostname": platform.node(),
    }


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for package in PACKAGES:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    return versions


def machine() -> dict:
    return {"machine": platform.machine(), "processor": processor_name(), "cpus": os.cpu_count()}


def processor_name(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The CPU's model name: Linux's `platform.processor()` is empty, /proc/cpuinfo names it (elsewhere,
    whatever `platform` says)."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git(*args: str) -> str | None:
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
