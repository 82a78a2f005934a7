"""Evaluation on a virtual-time grid (`eval_every_seconds`): the same instants for every algorithm, the
model standing at each, the client work spent by then, and nothing a run trains changed."""

import pytest

from asyncfl.settings.config import make_config
from asyncfl.settings.errors import InputError
from asyncfl.sim.engine import Simulation
from engine_cases import contiguous_partition, fixed_clients, read_csv, recorded_simulation, tiny_dataset

SIZES = [4, 8, 12, 8, 4, 12]
OUTPUTS = ("metrics.csv", "events.csv", "model.pt")
# The clients' world on: links, clients offline, failures, Poisson check-ins
WORLD = {
    "bandwidth_median": 5.0,
    "availability": "lognormal",
    "online_mean": 3.0,
    "offline_mean": 1.0,
    "failure_probability": 0.1,
    "arrivals": "poisson",
    "checkin_rate": 4.0,
    "concurrency": 3,
}


def run(out, **settings) -> Simulation:
    config = make_config({**fixed_clients(1.0, 0.01), "rounds": 8, "clients_per_round": 2, **settings})
    simulation = Simulation(config, tiny_dataset(sum(SIZES)), contiguous_partition(SIZES), out)
    simulation.run()
    return simulation


@pytest.mark.parametrize(
    "settings",
    [
        {"algorithm": "afl"},
        {"algorithm": "fedasync"},
        {"algorithm": "fedbuff", "buffer_size": 3, "concurrency": 3},
        {"algorithm": "sync", "over_selection": 0.5},
        {"algorithm": "sync", "round_deadline": 1.1, "min_report_fraction": 0.5, "failure_probability": 0.3},
        {**WORLD, "algorithm": "afl"},
    ],
    ids=["afl", "fedasync", "fedbuff", "sync-overselect", "sync-deadline-failures", "afl-world"],
)
def test_the_grid_evaluates_the_model_standing_at_each_instant_and_changes_no_training(tmp_path, settings):
    """Every instant Δ, 2Δ, … up to the last aggregation is evaluated once; its round is the last
    aggregation at or before it (an evaluation at t follows every other event at t), and its accuracy is
    that round's own (metrics.csv evaluates every round); metrics.csv, events.csv and model.pt are the
    bytes of the same run without the grid."""
    run(tmp_path / "plain", **settings)
    run(tmp_path / "grid", **settings, eval_every_seconds=0.25)
    for name in OUTPUTS:
        assert (tmp_path / "grid" / name).read_bytes() == (tmp_path / "plain" / name).read_bytes(), name
    metrics = read_csv(tmp_path / "grid" / "metrics.csv")
    grid = read_csv(tmp_path / "grid" / "evaluations.csv")
    end = float(metrics[-1]["virtual_time"])
    assert [float(row["virtual_time"]) for row in grid] == [k * 0.25 for k in range(1, int(end / 0.25) + 1)]
    for row in grid:
        t = float(row["virtual_time"])
        standing = [m for m in metrics if float(m["virtual_time"]) <= t]
        assert int(row["round"]) == (int(standing[-1]["round"]) if standing else 0)
        if standing:
            assert row["test_accuracy"] == standing[-1]["test_accuracy"]
    record = (tmp_path / "grid" / "run.json").read_text()
    assert "evaluations.csv" in record and "evaluations.csv" not in (tmp_path / "plain" / "run.json").read_text()


def test_the_work_counts_every_dispatch_until_it_ends_or_its_round_closes(tmp_path):
    """Sync, J = 2, 50 % over-selection, three clients of 4, 8 and 12 samples: dispatches of 1.04, 1.08
    and 1.12 virtual s. Each round aggregates the first two at 1.08 and discards the third, busy until
    the round closes: 1.04 + 1.08 + 1.08 = 3.20 client-seconds a round; between rounds all three work."""
    config = make_config(
        {
            **fixed_clients(1.0, 0.01),
            "algorithm": "sync",
            "clients_per_round": 2,
            "over_selection": 0.5,
            "rounds": 3,
            "eval_every_seconds": 0.54,
        }  # fmt: skip
    )
    simulation = Simulation(config, tiny_dataset(24), contiguous_partition([4, 8, 12]), tmp_path)
    simulation.run()
    grid = {float(row["virtual_time"]): row for row in read_csv(tmp_path / "evaluations.csv")}
    assert float(grid[0.54]["busy_seconds"]) == pytest.approx(3 * 0.54)
    assert float(grid[1.08]["busy_seconds"]) == pytest.approx(3.20)  # the round closed at 1.08, the next just began
    assert float(grid[1.62]["busy_seconds"]) == pytest.approx(3.20 + 3 * 0.54)
    assert float(grid[3.24]["busy_seconds"]) == pytest.approx(3 * 3.20)
    assert [grid[t]["round"] for t in (0.54, 1.08, 1.62, 3.24)] == ["0", "1", "1", "3"]
    assert [grid[t]["updates"] for t in (0.54, 1.08, 3.24)] == ["0", "2", "6"]
    assert [grid[t]["dispatched"] for t in (0.54, 1.08, 3.24)] == ["3", "6", "9"]
    # a download per dispatch, an upload per update that reached the server (not the discarded ones)
    model_bytes = simulation.context.model_bytes
    assert [int(grid[t]["bytes_moved"]) for t in (0.54, 1.08, 3.24)] == [
        model_bytes * (3 + 0),
        model_bytes * (6 + 2),
        model_bytes * (9 + 6),
    ]


def test_in_a_closed_loop_without_losses_the_work_is_m_clients_busy_all_the_time(tmp_path):
    run(tmp_path, algorithm="afl", concurrency=3, eval_every_seconds=0.3)
    for row in read_csv(tmp_path / "evaluations.csv"):
        assert float(row["busy_seconds"]) == pytest.approx(3 * float(row["virtual_time"]))


def test_a_grid_run_killed_and_resumed_writes_the_same_evaluations(tmp_path):
    settings = dict(**fixed_clients(1.0, 0.01), clients_per_round=2, rounds=8, checkpoint_every=2)
    whole, _ = recorded_simulation(tmp_path / "whole", SIZES, eval_every_seconds=0.25, **settings)
    whole.run()
    crashed, _ = recorded_simulation(tmp_path / "resumed", SIZES, fail_on_call=5, eval_every_seconds=0.25, **settings)
    with pytest.raises(RuntimeError, match="injected crash"):
        crashed.run()
    resumed, recording = recorded_simulation(tmp_path / "resumed", SIZES, eval_every_seconds=0.25, **settings)
    resumed.run()
    assert len(recording.calls) < 6  # it did resume
    for name in (*OUTPUTS, "evaluations.csv"):
        assert (tmp_path / "resumed" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes(), name


@pytest.mark.parametrize("value", [0, -1.0, 1e-4])
def test_a_grid_finer_than_a_millisecond_is_refused_in_one_line(value):
    with pytest.raises(InputError, match="eval_every_seconds must be"):
        make_config({"eval_every_seconds": value})


def test_a_grid_without_a_budget_stops_at_the_grids_row_limit_naming_the_key(tmp_path, monkeypatch):
    """Without max_virtual_time the config cannot bound the grid's rows ahead (a run's end is unknown):
    the run stops at the limit with the key named instead of scoring the model for ever."""
    from asyncfl.sim import grid as grid_module

    monkeypatch.setattr(grid_module, "MAX_GRID_ROWS", 50)  # 8 rounds of ~1 s on a 0.01 s grid: ~800 rows
    with pytest.raises(InputError, match=r"eval_every_seconds = 0.01 has scored the model 50 times .* set max_virt"):
        run(tmp_path, algorithm="afl", eval_every_seconds=0.01)


def test_a_model_unchanged_between_instants_is_scored_once_with_the_same_numbers(tmp_path, monkeypatch):
    """Synchronous rounds of ~1.1 s on a 0.25 s grid: several instants see one model. Each model is
    evaluated once, and evaluations.csv is the bytes of evaluating it at every instant."""
    from asyncfl.sim import grid as grid_module

    calls = []
    real = grid_module.evaluate
    monkeypatch.setattr(grid_module, "evaluate", lambda *args: calls.append(1) or real(*args))
    run(tmp_path / "once", algorithm="sync", eval_every_seconds=0.25)
    rows = read_csv(tmp_path / "once" / "evaluations.csv")
    assert len(calls) == len({row["round"] for row in rows}) < len(rows)
    original = grid_module.EvaluationGrid.scores

    def every_time(self, model):
        self.scored = None  # forget the last model: evaluate at every instant
        return original(self, model)

    monkeypatch.setattr(grid_module.EvaluationGrid, "scores", every_time)
    run(tmp_path / "every", algorithm="sync", eval_every_seconds=0.25)
    assert len(calls) == len({row["round"] for row in rows}) + len(rows)
    assert (tmp_path / "every" / "evaluations.csv").read_bytes() == (tmp_path / "once" / "evaluations.csv").read_bytes()
