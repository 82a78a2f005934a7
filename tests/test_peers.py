"""peers/compare.py refuses bad arguments before any run, in one line, and never reports success for a
comparison whose runs failed."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, skip_unless


def compare(*argv: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPO / "peers" / "compare.py"), *argv], cwd=cwd, capture_output=True, text=True
    )


@pytest.mark.subprocess
@pytest.mark.parametrize(
    "argv,fragment",
    [
        (["--dataset", "nosuch"], "--dataset must be one of"),
        (["--clients", "0"], "--clients must be at least 1"),
        (["--subset-fraction", "2"], "--subset-fraction must be in (0, 1]"),
        (["--threads", "0"], "--threads must be at least 1"),
        (["--repeats", "0"], "--repeats must be at least 1"),
        (["--clients", "3", "--clients-per-round", "5"], "--clients-per-round 5 exceeds --clients 3"),
        (["--lr", "nan"], "--lr and --alpha must be finite numbers > 0"),
        (["--rounds", "1000000000"], "--rounds must be 4…10000"),
    ],
)
def test_a_bad_argument_is_one_line_before_any_run(tmp_path, argv, fragment):
    result = compare(*argv, "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert fragment in result.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "out").exists()


@pytest.mark.subprocess
def test_an_existing_file_as_out_is_refused(tmp_path):
    (tmp_path / "taken").write_text("keep")
    result = compare("--out", str(tmp_path / "taken"), cwd=tmp_path)
    assert result.returncode == 2 and "--out" in result.stderr and (tmp_path / "taken").read_text() == "keep"


@pytest.mark.subprocess
def test_a_partition_that_cannot_be_made_is_one_line_and_exit_1(tmp_path):
    """Here asyncfl's own check fails (no Fashion-MNIST under this root): its line, never a traceback."""
    result = compare("--root", str(tmp_path / "nowhere"), "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip().startswith("compare.py: the partition could not be made:")


@pytest.mark.subprocess
def test_a_comparison_whose_runs_fail_exits_non_zero(tmp_path):
    """Every run failing once printed an empty table and exited 0; here asyncfl's run fails (CUDA asked
    for on a machine without it, or any other failure): the exit status says so."""
    import torch

    fashion = Path("/usr/share/datasets/fashion-mnist")
    skip_unless(fashion.is_dir(), "Debian's dataset-fashion-mnist is not installed")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA, so the run would not fail")
    result = compare(
        "--device", "cuda", "--repeats", "1", "--rounds", "4", "--out", str(tmp_path / "out"), cwd=tmp_path
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "runs failed; their logs are in" in result.stderr


def test_nvflares_loop_re_expressed_gives_the_five_published_counts_at_its_seed():
    """NVFlare's FedRevive numbers are one seed (10) of its scheduler: re-expressed draw for draw
    (peers/nvflare_fedrevive_clock.py), the loop must give exactly them, or it is not NVFlare's."""
    import yaml

    sys.path.insert(0, str(REPO / "peers"))
    from fedrevive import nvflare_runs

    setup = yaml.safe_load((REPO / "config" / "fedrevive.yaml").read_text())
    counts = nvflare_runs(setup, list(setup["presets"]), 1, 1.0)
    assert {name: runs[0][2] for name, runs in counts.items()} == {
        name: preset["published"] for name, preset in setup["presets"].items()
    }


@pytest.mark.subprocess
def test_the_fedrevive_table_sets_asyncfl_beside_nvflare_over_seeds(tmp_path):
    """Two presets, three seeds, a tenth of the budget: asyncfl's counts within NVFlare's spread."""
    done = subprocess.run(
        [sys.executable, str(REPO / "peers" / "fedrevive.py"), "--seeds", "3", "--budget-fraction", "0.05",
         "--presets", "fedavg", "fedbuff_shifted", "--out", str(tmp_path)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    counts = json.loads((tmp_path / "counts.json").read_text())
    for name in ("fedavg", "fedbuff_shifted"):
        ours, theirs = [run[0] for run in counts["asyncfl"][name]], [run[0] for run in counts["nvflare"][name]]
        assert len(ours) == len(theirs) == 3
        width = max(theirs) - min(theirs) + 0.02 * max(theirs) + 1
        assert min(theirs) - width <= sum(ours) / 3 <= max(theirs) + width
    assert "| fedbuff_shifted | 100, 2, 1 | 5 |" in (tmp_path / "table.md").read_text()
