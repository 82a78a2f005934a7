"""The Python tree is clean under ruff's linter and formatter (settings in pyproject.toml)."""

import subprocess
import sys

import pytest

from conftest import REPO

pytestmark = pytest.mark.subprocess


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]], ids=["lint", "format"])
def test_ruff_is_clean(command):
    result = subprocess.run(
        [sys.executable, "-m", "ruff", *command, "src", "tests"], cwd=REPO, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
