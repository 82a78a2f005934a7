"""Partial work at a round deadline (sync's `partial_work`, docs/design.md "Stragglers"): a client that
would miss the deadline trains exactly the whole local steps that fit before it, and those steps are
what training them directly gives."""

import dataclasses
import itertools

import pytest
import torch

from asyncfl.models import build_model
from asyncfl.settings.errors import InputError
from asyncfl.sim.client_system import Phases
from asyncfl.sim.partial_work import samples_after, samples_that_fit
from asyncfl.training.interface import LocalSettings, LocalTask, epoch_permutations, make_optimizer, optimizer_step
from asyncfl.training.numerics import Numerics
from asyncfl.training.plain import PlainTrainer
from asyncfl.training.vectorised import VectorisedTrainer
from engine_cases import fixed_clients, read_csv, recorded_simulation
from training_cases import make_case, model_info

SIZES = [4, 8, 12, 16, 20, 24]
# Hand-computable durations: one epoch of n samples at 0.01 s each, a 1 s latency; minibatches of 4
FIXED = {**fixed_clients(latency=1.0, seconds_per_sample=0.01), "batch_size": 4}
PARTIAL = dict(algorithm="sync", clients_per_round=2, round_deadline=1.09, min_report_fraction=1.0, partial_work=True)


def test_samples_after_counts_each_epochs_smaller_last_minibatch():
    # 10 samples in minibatches of 4: steps of 4, 4, 2 an epoch
    assert [samples_after(steps, 10, 4) for steps in range(7)] == [0, 4, 8, 10, 14, 18, 20]


@pytest.mark.parametrize(
    "deadline,epochs,expected",
    [
        (1.09, 1, 8),  # 0.09 s of compute for 0.01 s a sample: two steps of 4 (a third would take 0.12)
        (1.15, 2, 14),  # two epochs of 10: 4, 4, 2, then 4 (0.14 s); the next step would end at 0.18
        (1.20, 2, None),  # the whole dispatch (20 samples, 1.2 s) arrives by the deadline: nothing cut
        (1.03, 1, 0),  # 0.03 s fits no step of 4
        (0.99, 1, 0),  # not even the latency fits
    ],
)
def test_the_steps_that_fit_are_hand_computed(deadline, epochs, expected):
    phases = Phases(download=0.0, compute=epochs * 10 * 0.01, upload=0.0, latency=1.0)
    assert samples_that_fit(phases, 0.0, deadline, n_samples=10, batch_size=4, epochs=epochs) == expected


def test_late_clients_send_the_steps_that_fit_and_no_round_is_lost(tmp_path):
    """Deadline 1.09 s after the round starts: clients of 4 and 8 samples arrive whole (1.04 s, 1.08 s);
    every larger one trains two steps of 4 (0.08 s) and arrives at 1.08 s, so every round aggregates its
    two clients where, without partial work, 14 of 15 pairs would be abandoned."""
    simulation, recording = recorded_simulation(tmp_path, SIZES, **FIXED, **PARTIAL, rounds=6)
    simulation.run()
    events, metrics = read_csv(tmp_path / "events.csv"), read_csv(tmp_path / "metrics.csv")
    assert len(metrics) == 6 and len(events) == 12 and not any(row["lost"] for row in events)
    for row in events:
        trained = min(int(row["n_samples"]), 8)
        assert int(row["samples_trained"]) == trained  # n_samples stays the client's size
        assert float(row["arrival_time"]) - float(row["dispatch_time"]) == pytest.approx(1.0 + trained * 0.01)
    tasks = [task for call in recording.calls for task, _ in call]
    assert len(tasks) == 12
    assert all(task.samples == (None if len(task.indices) <= 8 else 8) for task in tasks)
    times = [0.0, *(float(row["virtual_time"]) for row in metrics)]
    assert all(0 < later - earlier <= 1.09 for earlier, later in itertools.pairwise(times))  # no round waits longer
    busy = [float(row["arrival_time"]) - float(row["dispatch_time"]) for row in events]
    assert simulation.state.busy_seconds == pytest.approx(sum(busy))  # the client stops at its cut


def test_a_deadline_that_only_one_step_meets_is_refused_without_partial_work_and_runs_with_it(tmp_path):
    """1.05 s: one client's whole dispatch (4 samples, 1.04 s) meets it, and a round needs two reports;
    under partial work every client meets it with one step of 4."""
    settings = {**FIXED, **PARTIAL, "round_deadline": 1.05, "rounds": 3}
    with pytest.raises(InputError, match="round_deadline = 1.05 virtual seconds is shorter"):
        recorded_simulation(tmp_path / "whole", SIZES, **{**settings, "partial_work": False})
    simulation, _ = recorded_simulation(tmp_path / "cut", SIZES, **settings)
    simulation.run()
    events = read_csv(tmp_path / "cut" / "events.csv")
    assert len(events) == 6 and not any(row["lost"] for row in events)
    assert {row["samples_trained"] for row in events} == {"4"}  # one step of 4, whatever the client's size
    assert all(float(row["arrival_time"]) - float(row["dispatch_time"]) == pytest.approx(1.04) for row in events)


def test_the_logged_phases_of_a_partial_dispatch_are_its_cut_ones(tmp_path):
    """With links on, events.csv's download, compute and upload of every dispatch, partial or whole, add
    up with the 1 s latency to its arrival − dispatch (the compute logged is the steps it trained)."""
    settings = {**FIXED, **PARTIAL, "round_deadline": 1.2, "bandwidth_median": 50.0, "rounds": 6}
    simulation, recording = recorded_simulation(tmp_path, SIZES, **settings)
    simulation.run()
    events = read_csv(tmp_path / "events.csv")
    assert any(task.samples is not None for call in recording.calls for task, _ in call)  # some were cut
    for row in events:
        logged = sum(float(row[column]) for column in ("download_seconds", "compute_seconds", "upload_seconds"))
        assert logged + 1.0 == pytest.approx(float(row["arrival_time"]) - float(row["dispatch_time"]))


def direct_steps(model, images, labels, task: LocalTask, steps: int, batch_size: int) -> dict:
    """The first `steps` minibatch steps of the task's one epoch, trained by hand with the trainers' own step."""
    model.load_state_dict(task.start_model)
    optimizer = make_optimizer("adam", model.parameters(), task.lrs[0])
    (order,) = epoch_permutations(dataclasses.replace(task, samples=None))
    for batch in order.split(batch_size)[:steps]:
        optimizer_step(model, optimizer, images[batch], labels[batch], Numerics())
    return {name: value.detach().clone() for name, value in model.state_dict().items()}


@pytest.mark.parametrize("trainer", [PlainTrainer, VectorisedTrainer])
def test_a_cut_task_trains_exactly_those_steps(trainer):
    """A client of 20 samples, minibatches of 8 (steps of 8, 8, 4), one epoch, cut after 16 samples:
    the state is, bit for bit on the plain trainer, that of two steps trained directly."""
    model, images, labels, start = make_case("cnn", 1)
    task = LocalTask(start, torch.arange(20), (0.01,), (0, 1, 2, 3), samples=16)
    result = trainer(model, images, labels, LocalSettings(8, "adam", 10)).train([task])[0]
    expected = direct_steps(build_model("cnn", model_info(1)), images, labels, task, 2, 8)
    assert result.epochs_run == 1
    for name, value in expected.items():
        if trainer is PlainTrainer:
            assert torch.equal(result.state[name], value), name
        else:
            assert torch.allclose(result.state[name], value, rtol=1e-4, atol=1e-6), name
    (whole,) = PlainTrainer(model, images, labels, LocalSettings(8, "adam", 10)).train(
        [dataclasses.replace(task, samples=None)]
    )
    assert any(not torch.equal(whole.state[name], value) for name, value in expected.items())  # the third step counts
