"""The Python tree (the package, its tests and the peer comparison) is clean under ruff's linter and formatter
(settings in pyproject.toml); mypy checks the package."""

import re
import subprocess
import sys

import pytest

from conftest import REPO

pytestmark = pytest.mark.subprocess


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]], ids=["lint", "format"])
def test_ruff_is_clean(command):
    result = subprocess.run(
        [sys.executable, "-m", "ruff", *command, "src", "tests", "peers"], cwd=REPO, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_is_clean():
    """Type hints are checked, in mypy's default mode over src/ (settings in pyproject.toml)."""
    result = subprocess.run([sys.executable, "-m", "mypy"], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_modules_the_workflow_imports_while_it_plans_stay_torch_free():
    """`snakemake -n` imports these on a login node: importing torch there would cost seconds per plan
    (and a CUDA torch may not load at all without a GPU)."""
    common = (REPO / "workflow/rules/common.smk").read_text()
    modules = sorted(set(re.findall(r"^from (asyncfl[.\w]*) import", common, re.MULTILINE)))
    assert modules, "common.smk imports no asyncfl module: the test would check nothing"
    probe = (
        f"import sys; import {', '.join(modules)}; print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch'))"
    )
    result = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]", f"{modules} import torch: {result.stdout[:200]}"
