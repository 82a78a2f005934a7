"""The benchmark's parts on tiny shapes: every trainer timed on the same work, the engine's own cost."""

import pytest
import torch

from asyncfl.bench import Case, bench_case, engine_overhead, format_table


def test_every_trainer_is_timed_on_the_same_round():
    case = Case("tiny", "cnn", (1, 8, 8), clients=4, per_round=2, samples=30, batch_size=8)
    rows = bench_case(case, torch.device("cpu"), repeats=1)
    assert [r["trainer"] for r in rows] == ["reference loop", "plain", "vectorised"]
    assert rows[0]["speedup"] == 1.0
    for row in rows:
        assert row["seconds_per_round"] > 0
        assert row["samples_per_second"] == pytest.approx(2 * 30 / row["seconds_per_round"], rel=0.02)
    assert "samples_per_second" in format_table(rows)


def test_engine_overhead_runs_rounds_with_a_null_trainer(tmp_path):
    result = engine_overhead(clients=200, per_round=20, rounds=3, out=tmp_path)
    assert result["rounds"] == 3 and result["arrivals_per_second"] > 0
    assert (tmp_path / "metrics.csv").read_text().count("\n") == 4  # header and three rounds
