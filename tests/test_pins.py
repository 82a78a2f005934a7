"""Every fact once: the torch and torchvision pins live in pyproject.toml; the Makefile and
peers/setup.sh read them from there, and the workflow's conda environments must say the same."""

import re
import subprocess

from conftest import REPO

PINS = dict(re.findall(r'"(torch|torchvision)==([0-9.]+)"', (REPO / "pyproject.toml").read_text()))


def test_pyproject_pins_torch_and_torchvision():
    assert set(PINS) == {"torch", "torchvision"}


def test_the_conda_environments_pin_what_pyproject_pins():
    for env in ("torch-cpu.yaml", "torch-cuda.yaml"):
        text = (REPO / "workflow" / "envs" / env).read_text()
        assert re.search(rf"pytorch={re.escape(PINS['torch'])}=", text), env
        assert re.search(rf"torchvision={re.escape(PINS['torchvision'])}\b", text), env


def test_make_installs_the_pinned_versions():
    dry = subprocess.run(["make", "-n", "-B", ".venv/.installed"], cwd=REPO, capture_output=True, text=True)
    assert f"torch=={PINS['torch']} torchvision=={PINS['torchvision']}" in dry.stdout, dry.stdout + dry.stderr
