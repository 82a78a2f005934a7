"""The benchmark's parts on tiny shapes: every trainer timed on the same work, the engine's own cost."""

import json
import subprocess
import sys

import pytest
import torch

from asyncfl.bench import Case, bench_case, engine_overhead, fast_numerics, format_table
from asyncfl.data import DatasetInfo
from asyncfl.models import build_model
from asyncfl.numerics import Numerics


def test_every_trainer_is_timed_on_the_same_round():
    case = Case("tiny", "cnn", (1, 8, 8), clients=4, per_round=2, samples=30, batch_size=8)
    rows = bench_case(case, torch.device("cpu"), repeats=1)
    assert [r["trainer"] for r in rows] == ["reference loop", "plain", "vectorised", "plain bf16 nhwc"]
    assert rows[0]["speedup"] == 1.0
    for row in rows:
        assert row["seconds_per_round"] > 0 and row["tflops"] > 0
        assert row["samples_per_second"] == pytest.approx(2 * 30 / row["seconds_per_round"], rel=0.02)
        assert row["speedup"] == pytest.approx(rows[0]["seconds_per_round"] / row["seconds_per_round"], rel=0.02)
    assert "samples_per_second" in format_table(rows)
    assert torch.backends.cudnn.conv.fp32_precision == "ieee"  # the knobs' row left no global switch behind


def test_fast_numerics_per_device():
    cnn, resnet = (
        build_model(name, DatasetInfo("t", tuple("0123456789"), 3, (8, 8), (0.0,) * 3, (1.0,) * 3, 255.0))
        for name in ("cnn", "resnet20")
    )
    assert fast_numerics(cnn, torch.device("cpu")) == ("plain", Numerics("bf16", channels_last=True))
    assert fast_numerics(cnn, torch.device("cuda")) == ("vectorised", Numerics("bf16"))
    assert fast_numerics(resnet, torch.device("cuda")) == ("vectorised", Numerics("tf32"))  # BatchNorm: no bf16 vmap


def test_quick_bench_command_writes_json(tmp_path):
    """The CI-sized run of `asyncfl bench`: every case, every trainer, the engine, in one JSON file."""
    out = tmp_path / "bench.json"
    command = [sys.executable, "-m", "asyncfl", "bench", "--quick", "--device", "cpu", "--json", str(out)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    report = json.loads(out.read_text())
    assert report["quick"] and report["device"] == "cpu" and report["matmul_fp32_tflops"] > 0
    assert {(r["case"], r["trainer"]) for r in report["trainers"]} == {
        (case, trainer)
        for case in ("cnn-28x28", "resnet20-32x32", "cnn-many-small")
        for trainer in ("reference loop", "plain", "vectorised", "plain bf16 nhwc")
    }
    assert report["engine"]["clients"] == 1000 and report["engine"]["share_of_cnn_round"] > 0
    assert "cnn-many-small" in result.stdout and "arrivals/s" in result.stdout


def test_engine_overhead_runs_rounds_with_a_null_trainer(tmp_path):
    result = engine_overhead(clients=200, per_round=20, rounds=3, out=tmp_path)
    assert result["rounds"] == 3 and result["arrivals_per_second"] > 0
    assert (tmp_path / "metrics.csv").read_text().count("\n") == 4  # header and three rounds
