"""`asyncfl bench --costs`: this device's measured rows, written into the cost table the workflow reads,
another device kind's rows kept, and a table that cannot be read refused before any measuring."""

import math
import subprocess
import sys

import pytest
import torch

from asyncfl.bench.costs import device_kind, measure_costs, write_costs
from asyncfl.planning.run_cost import COLUMNS, read_cost_table
from conftest import ENV, REPO

OTHER = "cuda-h100-80gb-hbm3,mlp,64,0.0003,4e-06,60,by hand"


def test_a_measured_row_replaces_its_kinds_and_keeps_the_others(tmp_path):
    table = tmp_path / "costs.csv"
    kind = device_kind(torch.device("cpu"))
    table.write_text(f"{','.join(COLUMNS)}\n{OTHER}\n{kind},mlp,64,9,9,9,stale\n")
    (row,) = measure_costs(torch.device("cpu"), quick=True, models=("mlp",))
    assert row.device == kind and row.model == "mlp" and row.batch_size == 64
    assert all(
        math.isfinite(value) and value > 0 for value in (row.step_seconds, row.scored_sample_seconds, row.start_seconds)
    )
    assert "(--quick)" in row.measured and torch.__version__ in row.measured
    write_costs(table, [row])
    read = read_cost_table(table)  # what the workflow reads: the file is checked as it reads it
    assert set(read) == {("cuda-h100-80gb-hbm3", "mlp"), (kind, "mlp")}
    assert read[kind, "mlp"].step_seconds == pytest.approx(row.step_seconds, rel=1e-3)
    assert read["cuda-h100-80gb-hbm3", "mlp"].measured == "by hand"


def test_a_cpu_kind_names_its_kernels_and_threads():
    kind = device_kind(torch.device("cpu"))
    assert kind.startswith("cpu-") and kind.endswith(f"-{torch.get_num_threads()}threads")
    assert torch.backends.cpu.get_cpu_capability().lower().replace("-", "") in kind


@pytest.mark.parametrize("content", [b"device,model\n", b"\xff\xfe garbage"])
def test_a_table_that_cannot_be_read_is_refused_before_measuring(tmp_path, content):
    table = tmp_path / "costs.csv"
    table.write_bytes(content)
    result = subprocess.run(
        [sys.executable, "-m", "asyncfl", "bench", "--costs", str(table), "--quick"],
        capture_output=True, text=True, env=ENV, cwd=REPO, timeout=300,
    )  # fmt: skip
    assert result.returncode != 0 and f"cost table {table}" in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and table.read_bytes() == content  # nothing lost
