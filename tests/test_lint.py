"""The Python tree (the package, its tests and the peer comparison) is clean under ruff's linter and formatter
(settings in pyproject.toml); mypy checks the package."""

import json
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


def torch_modules_imported_by(modules: list[str]) -> list[str]:
    """The torch modules a fresh interpreter holds after importing `modules`."""
    loaded = "sorted(m for m in sys.modules if m.split('.')[0] == 'torch')"
    probe = f"import json, sys; import {', '.join(modules)}; print(json.dumps({loaded}))"
    result = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_modules_the_workflow_imports_while_it_plans_stay_torch_free():
    """`snakemake -n` imports these on a login node: importing torch there would cost seconds per plan
    (and a CUDA torch may not load at all without a GPU)."""
    common = (REPO / "workflow/rules/common.smk").read_text()
    modules = sorted(set(re.findall(r"^from (asyncfl[.\w]*) import", common, re.MULTILINE)))
    assert modules, "common.smk imports no asyncfl module: the test would check nothing"
    assert torch_modules_imported_by(modules) == [], f"{modules} import torch"


def test_each_algorithms_file_imports_torch_only_where_it_computes():
    """The config reads every algorithm's file while the workflow plans (its declared settings): a file
    that imports torch at its top would load torch into every plan. Imported one by one, the first that
    loads torch is named."""
    from asyncfl.settings.algorithms import CATALOGUE

    files = sorted({algorithm.strategy.partition(":")[0] for algorithm in CATALOGUE})
    probe = (
        "import importlib, sys\n"
        f"for name in {files!r}:\n"
        "    importlib.import_module('asyncfl.fl.algorithms.' + name)\n"
        "    if 'torch' in sys.modules:\n"
        "        sys.exit(f'fl/algorithms/{name}.py imports torch at its top')\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


LIGHT_CONSUMERS = [
    "asyncfl.analysis.figures",
    "asyncfl.runs.archive",
    "asyncfl.runs.record",
    "asyncfl.runs.folder",
    "asyncfl.runs.logs",
    "asyncfl.runs.provenance",
]


def test_light_consumers_of_run_folders_do_not_import_torch():
    """Figures, the archive and the run-folder checks read CSVs and JSON: they start in a fraction of
    the time torch takes to import, and run where no torch loads (docs/development.md "Code map")."""
    assert torch_modules_imported_by(LIGHT_CONSUMERS) == []
    assert "torch" in torch_modules_imported_by(["asyncfl.runs.checkpoint"])  # the probe sees torch when it is there


def test_partitioning_digits_and_idx_datasets_never_imports_torch(tmp_path):
    """`asyncfl partition` reads only labels: a partition job of the digits or an IDX dataset starts in a
    fraction of a second instead of the seconds torch's import takes (eleven such jobs in the quick
    pipeline)."""
    probe = (
        "import json, sys; from pathlib import Path; from asyncfl.cli import main; "
        f"main(['partition', '--dataset', 'digits', '--clients', '4', '--alpha', '0.5', '--seed', '0', "
        f"'--validation-fraction', '0.2', '--out', {str(tmp_path / 'p.npz')!r}]); "
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'torch')))"
    )
    result = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0 and (tmp_path / "p.npz").is_file(), result.stderr
    assert json.loads(result.stdout.splitlines()[-1]) == []
