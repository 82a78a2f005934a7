"""FedCompass in the engine (`sim/compass_round.py`): the dispatches' steps its scheduler gives, groups
aggregated with each update's coefficient α·s(τ)/M, the same bytes run twice and after a crash resumed
from a checkpoint that holds a group's waiting updates."""

import math

import pytest
import torch

from asyncfl.planning.layout import CHECKPOINT
from asyncfl.runs.checkpoint import load_checkpoint
from engine_cases import read_csv, recorded_simulation

SIZES = [12, 20, 28, 16, 24, 36, 12, 20]  # 8 clients, batch 4: whole dispatches of 3 to 9 steps
SETTINGS = dict(
    algorithm="fedcompass",
    clients_per_round=4,
    batch_size=4,
    local_epochs=1,
    rounds=60,
    gamma0=0.05,
    speed_sigma=1.0,  # clients' speeds apart, so that groups and steps differ
    latency_median=0.05,
    compass_min_steps=0.3,
    checkpoint_every=3,
    eval_every=100,
)


def test_dispatches_train_the_steps_the_scheduler_gives_and_groups_step_alpha_s_over_m(tmp_path):
    simulation, recording = recorded_simulation(tmp_path, SIZES, **SETTINGS)
    simulation.run()
    tasks = [task for call in recording.calls for task, _ in call]
    for task in tasks:  # Q_min = ⌈0.3 Q_max⌉ ≤ Q ≤ Q_max, a client's whole epoch of batches of 4
        whole = math.ceil(len(task.indices) / 4)
        steps = math.ceil((task.samples or len(task.indices)) / 4)
        assert math.ceil(0.3 * whole) <= steps <= whole
    assert sum(task.samples is not None for task in tasks) > len(tasks) / 4  # the scheduler cut dispatches short
    events = read_csv(tmp_path / "events.csv")
    per_round: dict[str, list[dict]] = {}
    for row in events:
        per_round.setdefault(row["round"], []).append(row)
    assert max(len(rows) for rows in per_round.values()) > 1  # a group (or late updates) aggregated together
    assert len(per_round["1"]) == 1  # the first arrival: a client not heard from, aggregated alone
    for row in events:  # the steps trained, recorded: within the bounds of its client's whole epoch
        whole = math.ceil(int(row["n_samples"]) / 4)
        assert math.ceil(0.3 * whole) <= math.ceil(int(row["samples_trained"]) / 4) <= whole
    for row in events:  # α·s(τ)/M, s the default (1 + τ)^-0.5
        expected = 0.9 * (1 + int(row["staleness"])) ** -0.5 / 4
        assert float(row["coefficient"]) == pytest.approx(expected, rel=1e-12)
    metrics = read_csv(tmp_path / "metrics.csv")
    assert len(metrics) == 60


def test_a_run_resumed_after_a_crash_equals_the_uninterrupted_one(tmp_path):
    """The crash at the 28th training call leaves the checkpoint of version 44, taken while a group held
    two arrivals waiting for its last member: they are resumed from it, not trained again."""
    settings = {**SETTINGS, "checkpoint_every": 1}
    whole, _ = recorded_simulation(tmp_path / "whole", SIZES, **settings)
    whole.run()
    again, _ = recorded_simulation(tmp_path / "again", SIZES, **settings)
    again.run()
    crashed, _ = recorded_simulation(tmp_path / "resumed", SIZES, fail_on_call=28, **settings)
    with pytest.raises(RuntimeError, match="injected crash"):
        crashed.run()
    checkpoint = load_checkpoint(tmp_path / "resumed" / CHECKPOINT, crashed.context.identity, torch.device("cpu"))
    assert checkpoint is not None and len(checkpoint["waiting_updates"]) == 2
    resumed, recording = recorded_simulation(tmp_path / "resumed", SIZES, **settings)
    resumed.run()
    assert len(recording.calls) < 28  # it did resume, not start over
    for name in ("metrics.csv", "events.csv", "model.pt"):
        assert (tmp_path / "again" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes(), name
        assert (tmp_path / "resumed" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes(), name


def test_clients_that_check_in_by_themselves_are_scheduled_into_groups_too(tmp_path):
    """Open loop (`arrivals: poisson`): no slot is refilled by the server; each client that checks in is
    still given its steps and group, and groups are aggregated together."""
    settings = {**SETTINGS, "arrivals": "poisson", "checkin_rate": 3.0, "concurrency": 4, "rounds": 30}
    simulation, recording = recorded_simulation(tmp_path, SIZES, **settings)
    simulation.run()
    assert len(read_csv(tmp_path / "metrics.csv")) == 30
    sizes: dict[str, int] = {}
    for row in read_csv(tmp_path / "events.csv"):
        sizes[row["round"]] = sizes.get(row["round"], 0) + 1
    assert max(sizes.values()) > 1
    assert any(task.samples is not None for call in recording.calls for task, _ in call)
