"""The benchmark's parts on tiny shapes: every trainer timed on the same work, the engine's own cost."""

import json
import math
import subprocess
import sys

import pytest
import torch
import yaml

from asyncfl.bench.measure import Case, bench_case, cpu_precision, fast_numerics, format_table
from asyncfl.bench.paper_round import PAPER_SHAPES, QUICK_MEASURED_ROUNDS, load_sweep, round_walls, sweep_updates
from asyncfl.bench.synthetic import engine_overhead, synthetic_data, synthetic_run
from asyncfl.models import build_model
from asyncfl.training.numerics import Numerics
from conftest import QUICK_CONFIG, REPO

# the knobs' row on this CPU: bf16 only where torch runs AVX-512 kernels (bench.cpu_precision)
KNOBS_ROW = f"plain {cpu_precision(torch.backends.cpu.get_cpu_capability())} nhwc"


def test_every_trainer_is_timed_on_the_same_round():
    case = Case("tiny", "cnn", (1, 8, 8), clients=4, per_round=2, samples=30, batch_size=8)
    rows = bench_case(case, torch.device("cpu"), repeats=1)
    assert [r["trainer"] for r in rows] == ["reference loop", "plain", "vectorised", KNOBS_ROW]
    assert rows[0]["speedup"] == 1.0
    for row in rows:
        assert row["seconds_per_round"] > 0 and row["tflops"] > 0
        assert row["samples_per_second"] == pytest.approx(2 * 30 / row["seconds_per_round"], rel=0.02)
        speedup = rows[0]["seconds_per_round"] / row["seconds_per_round"]
        assert row["speedup"] == pytest.approx(speedup, rel=0.02, abs=0.006)  # rounded to 2 decimals (0.09 of 0.0933)
    assert "samples_per_second" in format_table(rows)
    assert torch.backends.cudnn.conv.fp32_precision == "ieee"  # the knobs' row left no global switch behind


def test_fast_numerics_per_device():
    """The knobs' row: the CPU's layout and precision by its instruction set; CUDA's graphed step in bf16."""
    assert fast_numerics(torch.device("cpu"), "AVX512") == ("plain", Numerics("bf16", channels_last=True))
    assert fast_numerics(torch.device("cpu"), "AVX2") == ("plain", Numerics("fp32", channels_last=True))
    assert fast_numerics(torch.device("cuda")) == ("graphed", Numerics("bf16"))


def bench(tmp_path, *arguments: str) -> tuple[dict, subprocess.CompletedProcess]:
    """`asyncfl bench ARGUMENTS --json FILE`, passed: its JSON report and the process."""
    out = tmp_path / "bench.json"
    command = [sys.executable, "-m", "asyncfl", "bench", *arguments, "--json", str(out)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=1800, cwd=REPO)
    assert result.returncode == 0, result.stderr
    return json.loads(out.read_text()), result


@pytest.mark.subprocess
def test_quick_bench_command_writes_json(tmp_path):
    """The CI-sized run of `asyncfl bench`: every case, every trainer, the engine, in one JSON file."""
    report, result = bench(tmp_path, "--quick", "--device", "cpu")
    assert report["quick"] and report["device"] == "cpu" and report["matmul_fp32_tflops"] > 0
    assert {(r["case"], r["trainer"]) for r in report["trainers"]} == {
        (case, trainer)
        for case in ("cnn-28x28", "resnet20-32x32", "cnn-many-small")
        for trainer in ("reference loop", "plain", "vectorised", KNOBS_ROW)
    }
    assert report["engine"]["clients"] == 1000 and report["engine"]["share_of_cnn_round"] > 0
    assert report["engine_world"]["world"] and report["engine_world"]["share_of_cnn_round"] > 0
    assert "cnn-many-small" in result.stdout and "arrivals/s" in result.stdout
    paper = report["paper_round"]
    assert {(r["model"], r["trainer"]) for r in paper["rounds"]} == {
        (m, t) for m in ("cnn", "resnet20", "mlp") for t in ("plain", "vectorised")
    }
    assert all(r["extrapolated"] and r["paper_seconds_per_round"] > r["seconds_per_round"] > 0 for r in paper["rounds"])
    assert paper["sweep_device_hours"]["total"] > 0 and "device-hours" in result.stdout
    assert [(row["clients"], row["world"]) for row in report["engine_scale"]] == [
        (1000, False),
        (1000, True),
        (10_000, False),
        (10_000, True),
    ]
    for row in report["engine_scale"]:  # each from a process of its own
        assert row["rounds"] == 10 and row["seconds_per_round"] > 0 and row["first_round_seconds"] > 0
        assert row["peak_memory_mib"] > 0 and row["bytes_per_client"] > 0
    assert "bytes_per_client" in result.stdout


def test_sweep_counts_client_updates_under_budgets():
    """config.yaml by hand: MNIST, per seed, AFL J = 3, 4, 6, 7, 8 at 1,000 rounds (28,000) + J = 5 at
    its 5,000-update budget, sync, FedAsync, FedBuff, AFL and sync as coded 5,000 each = 58,000; the
    staleness and FedProx variants 15,000 each, the clients' world one 20,000; × 3 seeds = 324,000.
    CIFAR-10: 200 rounds: 5,600 + 4 × 1,000 = 9,600, variant 3,000; × 3 = 37,800. The straggler sweeps,
    3 seeds × 5 severities of 7 runs at M or J = 5 and 3 asynchronous ones at M = 7, each run ⌈M × T /
    one dispatch⌉, a client's samples less its 10 % validation split: MNIST one dispatch 10 × 5,400 ×
    0.001 + 1 = 55 s, ⌈5 × 12,000 / 55⌉ = 1,091 and ⌈7 × 12,000 / 55⌉ = 1,528; CIFAR-10 10 × 4,500 ×
    0.001 + 1 = 46 s, ⌈5 × 10,000 / 46⌉ = 1,087 and ⌈7 × 10,000 / 46⌉ = 1,522."""
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    assert sweep_updates(config) == {
        "runs": {"cnn": 324_000 + 15 * (7 * 1_091 + 3 * 1_528), "resnet20": 37_800 + 15 * (7 * 1_087 + 3 * 1_522)},
        "tuning": {},  # the paper-scale sweeps choose no setting
    }


def test_the_sweep_projection_counts_the_tuning_runs():
    """The quick config's straggler sweep tunes γ0 at 2 points × 8 run names × 1 tuning seed, at its
    first severity, each run estimated as its final runs are (⌈M × T / one dispatch⌉ of a client of
    average size, the digits' 1,437 training samples less the validation split over 10 clients: 1 epoch ×
    114.96 samples × 0.01 s + 1 s = 2.1496 s, T = 30 s): 7 names at M or J = 5, ⌈69.78⌉ = 70, and AFL at
    M = 7, ⌈97.69⌉ = 98."""
    updates = sweep_updates(yaml.safe_load(QUICK_CONFIG.read_text()))
    assert updates["tuning"] == {"mlp": 2 * (7 * 70 + 1 * 98)}
    assert updates["runs"]["mlp"] > updates["tuning"]["mlp"]


def test_paper_round_runs_the_real_engine(tmp_path):
    """The paper round is a real AFL run of the paper's shape (its rounds logged, its model trained), and
    its seconds per round are read from that run's own timings.csv (how long depends on the load)."""
    shape = PAPER_SHAPES[0]
    dataset, partition = synthetic_data("paper-round", shape.shape, 10, 16)
    settings = {"model": shape.model, "clients_per_round": 5, "rounds": 3, "local_epochs": 1, "trainer": "plain"}
    wall = synthetic_run(dataset, partition, settings, tmp_path).rounds
    assert len(wall) == 3 and wall == sorted(wall)  # one timing per round, cumulative
    metrics = (tmp_path / "metrics.csv").read_text().splitlines()
    assert len(metrics) == 4 and metrics[-1].split(",")[4]  # three rounds; the last one evaluated
    initial = build_model(shape.model, dataset.info, 0).state_dict()
    final = torch.load(tmp_path / "model.pt", weights_only=True)
    assert not torch.equal(final["head.weight"], initial["head.weight"])  # clients trained, the server aggregated
    walls = round_walls(shape, "plain", torch.device("cpu"), quick=True)
    assert len(walls) == QUICK_MEASURED_ROUNDS and all(math.isfinite(wall) and wall > 0 for wall in walls)


@pytest.mark.parametrize("world", [False, True])
def test_engine_overhead_runs_rounds_with_a_null_trainer(tmp_path, world):
    """Timed between the first round and the last (the run's evaluation); with the world on, dispatches
    are lost and logged."""
    result = engine_overhead(clients=200, per_round=20, rounds=4, out=tmp_path, world=world)
    assert result["rounds"] == 2 and result["arrivals_per_second"] > 0 and result["world"] == world
    assert result["first_round_seconds"] > 0
    assert (tmp_path / "metrics.csv").read_text().count("\n") == 5  # header and four rounds
    assert ("upload_seconds" in (tmp_path / "events.csv").read_text()) == world


def test_the_sweep_projection_reads_the_projects_own_configs():
    """`--sweep .test/config/quick.yaml` failed to unpack the MLP's (missing) paper shape: every model a
    sweep can train now has one, and every experiment, severities included, is counted."""
    quick = load_sweep(QUICK_CONFIG)["runs"]
    assert set(quick) == {"resnet20", "mlp"} and all(count > 0 for count in quick.values())  # no CNN since 2026-11-27
    assert set(load_sweep(REPO / "config/config.yaml")["runs"]) >= {"cnn", "resnet20"}


@pytest.mark.subprocess
def test_the_engine_rows_at_the_scales_asked_for(tmp_path):
    """`--engine --scales`: the engine's table alone, its rows at those C, world off and on; past 10^7
    the clients hold sizes only."""
    from asyncfl.bench.synthetic import MOST_CLIENTS_WITH_DATA, engine_data

    report = bench(tmp_path, "--engine", "--scales", "300")[0]
    assert "trainers" not in report and "paper_round" not in report
    rows = report["engine_scale"]
    assert [(row["clients"], row["world"], row["data"]) for row in rows] == [
        (300, False, "images"),
        (300, True, "images"),
    ]
    assert engine_data(MOST_CLIENTS_WITH_DATA + 1)[1].sizes_only and not engine_data(300)[1].sizes_only
    command = [sys.executable, "-m", "asyncfl", "bench", "--engine", "--scales", "0"]
    refused = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
    assert refused.returncode == 2 and "--scales: must be an integer ≥ 1" in refused.stderr
