"""Shared test helpers."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# Rules call `python -m asyncfl`: this interpreter's environment first, as `make` arranges.
ENV = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}

# CI sets this so that a test which cannot run here fails instead of skipping quietly.
REQUIRE_ALL = os.environ.get("ASYNCFL_REQUIRE_ALL") == "1"


def skip_unless(condition: bool, reason: str) -> None:
    """Skip when `condition` is false, or fail under ASYNCFL_REQUIRE_ALL=1 (CI)."""
    if condition:
        return
    if REQUIRE_ALL:
        pytest.fail(f"ASYNCFL_REQUIRE_ALL=1 but {reason}")
    pytest.skip(reason)


def snakemake(*args: str, workdir: Path | None = None, env=None, timeout: int = 1800) -> subprocess.CompletedProcess:
    """Real snakemake on the repository's workflow, in `workdir` if given."""
    where = ["--directory", str(workdir)] if workdir else []
    command = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), *where, *args]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, env=env or ENV, timeout=timeout)


@pytest.fixture(scope="session")
def quick_local_run(tmp_path_factory) -> Path:
    """The quick config run locally through snakemake, once per test session."""
    workdir = tmp_path_factory.mktemp("quick-local")
    result = snakemake("--cores", "2", "--configfile", str(REPO / "config/quick.yaml"), workdir=workdir)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    return workdir
