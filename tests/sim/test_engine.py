"""The simulation: bookkeeping on a hand-built schedule, determinism, resume after SIGKILL, bad input, learning."""

import csv
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from asyncfl.data.loading import load_dataset
from asyncfl.data.partition import DirichletSplit, partition_stats, save_partition
from asyncfl.models import build_model
from asyncfl.settings.config import make_config
from asyncfl.settings.random_streams import client_init_seed
from asyncfl.sim.ending import TrainingDiverged
from asyncfl.sim.engine import Simulation
from conftest import started, wait_for
from engine_cases import contiguous_partition, fixed_clients, read_csv, recorded_simulation, tiny_dataset

FIXED_CLIENTS = fixed_clients(latency=0.0, seconds_per_sample=0.25)


def run(tmp_path: Path, sizes=(4, 8, 12), name="run", **settings) -> tuple[list[dict], list[dict], dict]:
    config = make_config({"batch_size": 4, **settings})
    out = tmp_path / name
    summary = Simulation(config, tiny_dataset(sum(sizes)), contiguous_partition(list(sizes)), out).run()
    return read_csv(out / "metrics.csv"), read_csv(out / "events.csv"), summary


def test_hand_built_three_client_schedule(tmp_path):
    """afl, C = 3 clients all in flight (M = 3), K = J = 2; durations 1, 2, 3 (n = 4, 8, 12 at 0.25 s/sample).

    With every client in flight, the only idle client after an arrival is the one that just
    arrived, so the schedule is fixed: fast client 0 returns every second and is re-dispatched
    with the newest model; slow clients arrive stale. Ties in time go to the lower client id.
    """
    metrics, events, summary = run(
        tmp_path,
        algorithm="afl",
        clients_per_round=2,
        concurrency=3,
        rounds=4,
        staleness="polynomial",
        staleness_a=0.5,
        **FIXED_CLIENTS,
    )
    table = [
        (
            int(e["round"]),
            int(e["client"]),
            int(e["dispatch_version"]),
            float(e["dispatch_time"]),
            float(e["arrival_time"]),
            int(e["staleness"]),
        )
        for e in events
    ]
    assert table == [
        # round, client, dispatch version, dispatch time, arrival time, staleness
        (1, 0, 0, 0.0, 1.0, 0),
        (1, 0, 0, 1.0, 2.0, 0),
        (2, 1, 0, 0.0, 2.0, 1),
        (2, 0, 1, 2.0, 3.0, 0),
        (3, 2, 0, 0.0, 3.0, 2),
        (3, 0, 2, 3.0, 4.0, 0),
        (4, 1, 1, 2.0, 4.0, 2),
        (4, 0, 3, 4.0, 5.0, 0),
    ]
    # weights n_c·s(τ) normalised: round 2 is 8/√2 against 4, round 3 is 12/√3 against 4
    w = [float(e["coefficient"]) for e in events]
    assert w[2] == pytest.approx((8 / 2**0.5) / (8 / 2**0.5 + 4)) and w[3] == pytest.approx(4 / (8 / 2**0.5 + 4))
    assert w[4] == pytest.approx((12 / 3**0.5) / (12 / 3**0.5 + 4))
    assert [float(m["virtual_time"]) for m in metrics] == [2.0, 3.0, 4.0, 5.0]
    assert [float(m["mean_staleness"]) for m in metrics] == [0.0, 0.5, 1.0, 1.0]
    assert [int(m["max_staleness"]) for m in metrics] == [0, 1, 2, 2]
    # γ = γ0 / (√(t+1)·(1 + α·d)) with t = the version at dispatch and d = the client's own duration
    assert float(events[3]["lr"]) == pytest.approx(1e-3 / (2**0.5 * (1 + 0.01 * 1.0)))
    assert float(events[2]["lr"]) == pytest.approx(1e-3 / (1 + 0.01 * 2.0))
    assert summary["rounds_completed"] == 4 and summary["stop_reason"] == "rounds"


def test_sync_rounds_wait_for_the_slowest_client(tmp_path):
    metrics, events, _ = run(tmp_path, algorithm="sync", clients_per_round=2, rounds=5, **FIXED_CLIENTS)
    durations = {0: 1.0, 1: 2.0, 2: 3.0}
    clock = 0.0
    for round_ in range(1, 6):
        members = [e for e in events if int(e["round"]) == round_]
        assert len(members) == 2 and len({e["client"] for e in members}) == 2  # without replacement
        assert all(int(e["staleness"]) == 0 and float(e["dispatch_time"]) == clock for e in members)
        clock += max(durations[int(e["client"])] for e in members)
        assert float(metrics[round_ - 1]["virtual_time"]) == clock
    for round_ in range(1, 6):
        assert_size_weighted([e for e in events if int(e["round"]) == round_])


def assert_size_weighted(members: list[dict]) -> None:
    """FedAvg's weights: n_c / Σ n over the round's updates, one term per update."""
    total = sum(int(e["n_samples"]) for e in members)
    assert [float(e["coefficient"]) for e in members] == pytest.approx([int(e["n_samples"]) / total for e in members])


def test_sampling_with_replacement_counts_repeated_clients(tmp_path):
    _, events, _ = run(tmp_path, algorithm="sync", clients_per_round=6, rounds=3, replacement=True, **FIXED_CLIENTS)
    assert len(events) == 18
    for round_ in "123":  # 6 draws among 3 clients: repeats, each trained and weighted on its own
        members = [e for e in events if e["round"] == round_]
        assert len(members) == 6 and len({e["client"] for e in members}) < len(members)
        assert_size_weighted(members)


def test_fedasync_aggregates_every_arrival_with_fresh_alpha(tmp_path):
    metrics, events, _ = run(
        tmp_path,
        algorithm="fedasync",
        clients_per_round=2,
        concurrency=3,
        rounds=6,
        fedasync_alpha=0.6,
        staleness="inverse",
        staleness_a=1.0,
        **FIXED_CLIENTS,
    )
    assert [int(e["round"]) for e in events] == [1, 2, 3, 4, 5, 6]
    for e in events:
        assert float(e["coefficient"]) == pytest.approx(0.6 / (1 + int(e["staleness"])))


def test_fedbuff_buffers_k_arrivals(tmp_path):
    _, events, _ = run(
        tmp_path,
        algorithm="fedbuff",
        clients_per_round=2,
        concurrency=3,
        buffer_size=3,
        rounds=3,
        server_lr=1.5,
        **FIXED_CLIENTS,
    )
    assert [int(e["round"]) for e in events] == [1, 1, 1, 2, 2, 2, 3, 3, 3]
    for e in events:  # η_g·s(τ)/K with the default s = 1/√(1+τ)
        assert float(e["coefficient"]) == pytest.approx(1.5 / (1 + int(e["staleness"])) ** 0.5 / 3)


def test_kappa_and_max_virtual_time_stop_the_run(tmp_path):
    metrics, _, summary = run(
        tmp_path, name="kappa", algorithm="afl", clients_per_round=2, rounds=50, kappa=1e6, **FIXED_CLIENTS
    )
    assert len(metrics) == 1 and summary["stop_reason"] == "kappa"
    metrics, _, summary = run(
        tmp_path, name="time", algorithm="sync", clients_per_round=2, rounds=50, max_virtual_time=7.0, **FIXED_CLIENTS
    )
    assert summary["stop_reason"] == "max_virtual_time" and float(metrics[-1]["virtual_time"]) >= 7.0
    assert float(metrics[-2]["virtual_time"]) < 7.0


@pytest.mark.parametrize("algorithm", ["afl", "sync", "fedasync", "fedbuff"])
def test_an_update_budget_stops_every_algorithm_at_the_same_count(tmp_path, algorithm):
    """Equal budget: 12 client updates are 6 rounds of J = 2 for afl, sync and fedbuff, 12 for fedasync."""
    metrics, events, summary = run(
        tmp_path, algorithm=algorithm, clients_per_round=2, rounds=1000, max_updates=12, **FIXED_CLIENTS
    )
    assert summary["stop_reason"] == "max_updates" and len(events) == 12
    assert len(metrics) == (12 if algorithm == "fedasync" else 6)


@pytest.mark.parametrize("algorithm", ["afl", "sync", "fedasync", "fedbuff"])
def test_a_time_budget_stops_every_algorithm_at_its_first_aggregation_past_it(tmp_path, algorithm):
    metrics, events, summary = run(
        tmp_path, algorithm=algorithm, clients_per_round=2, rounds=1000, max_virtual_time=9.0, **FIXED_CLIENTS
    )
    times = [float(m["virtual_time"]) for m in metrics]
    assert summary["stop_reason"] == "max_virtual_time" and times[-1] >= 9.0 > times[-2]


def test_test_metrics_every_eval_every_rounds_and_at_the_end(tmp_path):
    metrics, _, _ = run(tmp_path, algorithm="afl", clients_per_round=2, rounds=7, eval_every=3, **FIXED_CLIENTS)
    evaluated = [m["round"] for m in metrics if m["test_accuracy"]]
    assert evaluated == ["3", "6", "7"]


def test_same_seed_same_bytes_other_seed_differs(tmp_path):
    settings = dict(algorithm="afl", clients_per_round=2, rounds=6, local_epochs=2, jitter_sigma=0.3)
    run(tmp_path, name="a", seed=1, **settings)
    run(tmp_path, name="b", seed=1, **settings)
    run(tmp_path, name="c", seed=2, **settings)
    for name in ("metrics.csv", "events.csv", "model.pt"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
        assert (tmp_path / "a" / name).read_bytes() != (tmp_path / "c" / name).read_bytes(), name


def test_speed_knobs_are_deterministic_and_change_the_numbers(tmp_path):
    settings = dict(algorithm="afl", clients_per_round=2, rounds=4, local_epochs=2, seed=1)
    knobs = dict(precision="bf16", channels_last=True)
    run(tmp_path, name="a", **settings, **knobs)
    run(tmp_path, name="b", **settings, **knobs)
    run(tmp_path, name="fp32", **settings)
    for name in ("metrics.csv", "model.pt"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
        assert (tmp_path / "a" / name).read_bytes() != (tmp_path / "fp32" / name).read_bytes(), name


def test_afl_and_sync_of_one_seed_share_client_delays(tmp_path):
    _, afl, _ = run(tmp_path, name="afl", algorithm="afl", clients_per_round=2, rounds=3, seed=5)
    _, sync, _ = run(tmp_path, name="sync", algorithm="sync", clients_per_round=2, rounds=3, seed=5)
    durations = {}
    for e in afl + sync:  # no jitter: a client's duration is the same in both runs
        duration = float(e["arrival_time"]) - float(e["dispatch_time"])
        assert durations.setdefault(e["client"], duration) == pytest.approx(duration)


def test_nan_loss_stops_with_round_and_client_and_keeps_rows(tmp_path):
    dataset = tiny_dataset(24)
    dataset.train_images[8:16] = 255  # client 1's images are normalised to a constant
    config = make_config(
        {
            "algorithm": "sync",
            "clients_per_round": 3,
            "rounds": 5,
            "batch_size": 4,
            "optimizer": "sgd",
            "gamma0": 1e12,
            **FIXED_CLIENTS,
        }
    )
    with pytest.raises(TrainingDiverged, match=r"round \d+, client \d: training loss is (nan|inf)"):
        Simulation(config, dataset, contiguous_partition([8, 8, 8]), tmp_path / "nan").run()
    assert (tmp_path / "nan" / "metrics.csv").read_text().startswith("round,virtual_time")


@pytest.mark.subprocess
@pytest.mark.parametrize(
    "line,message",
    [
        ("algorithm: fedprox", "algorithm must be one of afl, sync, fedasync, fedbuff"),
        ("gamma0: 0", "gamma0 must be a finite number > 0"),
        ("server_lr: -1", "server_lr must be a finite number > 0"),
        ("local_epoch: 3", "unknown key 'local_epoch'"),
        ("rounds: ten", "rounds must be int"),
        ("precision: fp16", "precision must be one of fp32, tf32, bf16"),
    ],
)
def test_bad_config_is_one_line(tmp_path, line, message):
    config = tmp_path / "bad.yaml"
    config.write_text(line + "\n")
    partition = tmp_path / "p.npz"
    result = subprocess.run(train_command(partition, tmp_path / "out", config), capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and message in result.stderr and "Traceback" not in result.stderr


@pytest.fixture(scope="module")
def digits_partition(tmp_path_factory) -> Path:
    labels = load_dataset("digits").train_labels.numpy()
    path = tmp_path_factory.mktemp("partition") / "digits.npz"
    split = DirichletSplit(10, 0.5, 0)
    partition, _ = split.partition(labels, "digits")
    save_partition(path, partition, partition_stats(partition, labels, 10, split))
    return path


def train_command(partition: Path, out: Path, config: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "asyncfl", "train", "--dataset", "digits", "--partition", str(partition),
        "--config", str(config), "--out", str(out), *extra,
    ]  # fmt: skip


# The clients' world on (links, availability with losses, failures and Poisson check-ins) and a server
# optimizer (its moments in the checkpoint): every state a checkpoint carries beyond the plain run's
WORLD = (
    "bandwidth_median: 5.0\navailability: lognormal\nonline_mean: 3.0\noffline_mean: 1.0\n"
    "failure_probability: 0.1\narrivals: poisson\ncheckin_rate: 4.0\nconcurrency: 5\n"
    "server_optimizer: adam\nserver_optimizer_lr: 0.01\n"
)
# Long enough that a kill after a checkpoint and 6 rounds finds the run going on; short for the suite's time
KILL_ROUNDS = 20


@pytest.mark.subprocess
# The paper's CNN once; the other trainer and the world on the MLP, whose steps cost a fraction of the
# CNN's on a CPU: what a checkpoint carries does not depend on the model's layers
@pytest.mark.parametrize(
    ("trainer", "world", "model"), [("plain", "", "cnn"), ("vectorised", "", "mlp"), ("plain", WORLD, "mlp")]
)
def test_resume_after_sigkill_is_byte_identical(tmp_path, digits_partition, trainer, world, model):
    config = tmp_path / "config.yaml"
    config.write_text(
        f"algorithm: afl\nclients_per_round: 5\nrounds: {KILL_ROUNDS}\nlocal_epochs: 1\ncheckpoint_every: 3\n"
        f"gamma0: 0.01\njitter_sigma: 0.2\ntrainer: {trainer}\nmodel: {model}\n{world}"
    )
    straight = subprocess.run(
        train_command(digits_partition, tmp_path / "straight", config), capture_output=True, text=True
    )
    assert straight.returncode == 0, straight.stderr
    killed_out = tmp_path / "killed"
    command = train_command(digits_partition, killed_out, config)
    with started(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as process:
        wait_for(
            lambda: (killed_out / "checkpoint.pt").exists() and len(read_csv(killed_out / "metrics.csv")) >= 6,
            process,
            "a checkpoint and 6 rounds",
        )
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    rows_at_kill = len(read_csv(killed_out / "metrics.csv"))
    assert 6 <= rows_at_kill < KILL_ROUNDS and not (killed_out / "model.pt").exists()
    (killed_out / "events.csv").unlink()  # Snakemake deletes the declared outputs of a failed job
    resumed = subprocess.run(train_command(digits_partition, killed_out, config), capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming" in resumed.stdout
    for name in ("metrics.csv", "events.csv", "model.pt"):
        assert (killed_out / name).read_bytes() == (tmp_path / "straight" / name).read_bytes(), name
    assert not (killed_out / "checkpoint.pt").exists()
    if world == WORLD:  # the world was really on: dispatches were lost, and logged
        assert any(row["lost"] for row in read_csv(killed_out / "events.csv"))


@pytest.mark.subprocess
def test_progress_lines_when_not_a_terminal(tmp_path, digits_partition):
    config = tmp_path / "config.yaml"
    config.write_text("rounds: 4\nlocal_epochs: 1\nclients_per_round: 3\n")
    result = subprocess.run(train_command(digits_partition, tmp_path / "out", config), capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "round 4/4  virtual time" in result.stdout and "test accuracy 0." in result.stdout


@pytest.mark.parametrize("algorithm", ["afl", "sync"])
def test_it_learns_digits(tmp_path, digits_partition, algorithm):
    """C = 10, α = 0.5, J = 5, on the MLP (an eighth of the CNN's CPU time here): from near chance
    (10 classes) after one round to ≥ 80% test accuracy in 60 (0.85 AFL, 0.91 sync)."""
    from asyncfl.data.partition import load_partition

    config = make_config(
        {
            "algorithm": algorithm,
            "clients_per_round": 5,
            "rounds": 60,
            "local_epochs": 1,
            "gamma0": 0.001,
            "eval_every": 1,
            "model": "mlp",
        }
    )
    Simulation(config, load_dataset("digits"), load_partition(digits_partition), tmp_path / algorithm).run()
    accuracy = [float(m["test_accuracy"]) for m in read_csv(tmp_path / algorithm / "metrics.csv") if m["test_accuracy"]]
    assert accuracy[0] < 0.7 and accuracy[-1] >= 0.8, accuracy


def test_graphed_run_is_byte_identical_to_plain_on_the_cpu(tmp_path, digits_partition):
    """On the CPU the graphed trainer's step runs uncaptured: the whole run gives the plain run's bytes."""
    from asyncfl.data.partition import load_partition

    for trainer in ("plain", "graphed"):
        config = make_config(
            {"algorithm": "afl", "clients_per_round": 5, "rounds": 6, "local_epochs": 2, "trainer": trainer}
        )
        Simulation(config, load_dataset("digits"), load_partition(digits_partition), tmp_path / trainer).run()
    for name in ("metrics.csv", "events.csv", "model.pt"):
        assert (tmp_path / "plain" / name).read_bytes() == (tmp_path / "graphed" / name).read_bytes(), name


def test_vectorised_and_plain_runs_agree(tmp_path, digits_partition):
    from asyncfl.data.partition import load_partition

    metrics = {}
    for trainer in ("plain", "vectorised"):
        config = make_config(
            {
                "algorithm": "afl",
                "clients_per_round": 5,
                "rounds": 8,
                "local_epochs": 2,
                "gamma0": 0.01,
                "trainer": trainer,
                "optimizer": "sgd",
            }
        )
        Simulation(config, load_dataset("digits"), load_partition(digits_partition), tmp_path / trainer).run()
        metrics[trainer] = read_csv(tmp_path / trainer / "metrics.csv")
    for plain, vectorised in zip(metrics["plain"], metrics["vectorised"], strict=True):
        assert (
            plain["virtual_time"] == vectorised["virtual_time"]
            and plain["max_staleness"] == vectorised["max_staleness"]
        )
        assert float(vectorised["train_loss"]) == pytest.approx(float(plain["train_loss"]), rel=1e-4)
        assert float(vectorised["test_accuracy"]) == pytest.approx(float(plain["test_accuracy"]), abs=0.01)


AS_CODED = dict(FIXED_CLIENTS, algorithm="afl_as_coded", clients_per_round=2, rounds=6, batch_size=4, local_epochs=2)


@pytest.mark.parametrize("algorithm", ["afl_as_coded", "sync_as_coded"])
def test_as_coded_clients_start_from_their_own_seeded_models_and_never_load_the_global_one(tmp_path, algorithm):
    """The reference code initialises every client's model and the server's separately, and its clients
    never load the global model: each dispatch starts from that client's own last trained model, the first
    from its own seeded initial model (distinct from the server's and from every other client's)."""
    sizes = [4, 8, 12, 8]
    simulation, recording = recorded_simulation(tmp_path / "run", sizes, **{**AS_CODED, "algorithm": algorithm})
    server = {k: v.clone() for k, v in simulation.state.global_model.items()}
    simulation.run()
    last: dict[int, dict] = {}
    trained = [pair for call in recording.calls for pair in call]
    assert len(trained) == 12  # 6 rounds of J = 2
    for task, result in trained:
        client = int(np.searchsorted(np.cumsum(sizes), int(task.indices[0]), side="right"))
        if client not in last:
            seeded = build_model("cnn", tiny_dataset(1).info, client_init_seed(0, client)).state_dict()
            assert all(torch.equal(task.start_model[k], seeded[k]) for k in seeded), client
            assert not torch.equal(task.start_model["head.weight"], server["head.weight"])
        else:
            assert all(torch.equal(task.start_model[k], last[client][k]) for k in last[client]), client
        assert task.optimizer_per_epoch == (algorithm == "afl_as_coded")
        last[client] = result.state
    final = torch.load(tmp_path / "run" / "model.pt", weights_only=True)
    assert not any(torch.equal(final["head.weight"], task.start_model["head.weight"]) for task, _ in trained)


def test_as_coded_server_loss_is_the_unweighted_mean_of_each_clients_mean_epoch_loss(tmp_path):
    """metrics.csv's train_loss_as_coded is what the reference code logged: the plain mean over the round's
    clients of each one's mean over its epochs; train_loss beside it stays asyncfl's size-weighted
    last-epoch proxy. Algorithms as described do not have the column."""
    sizes = [4, 8, 12, 8]
    simulation, recording = recorded_simulation(tmp_path / "run", sizes, **{**AS_CODED, "local_epochs": 3})
    simulation.run()
    by_round = {}
    rows = list(csv.DictReader((tmp_path / "run" / "events.csv").read_text().splitlines()))
    trained = [(task, result) for call in recording.calls for task, result in call]
    jobs = {}
    for task, result in trained:
        client = int(np.searchsorted(np.cumsum(sizes), int(task.indices[0]), side="right"))
        jobs.setdefault(client, []).append(result)
    for row in rows:  # events in the order they were aggregated: each client's dispatches in order
        by_round.setdefault(int(row["round"]), []).append(jobs[int(row["client"])].pop(0))
    metrics = list(csv.DictReader((tmp_path / "run" / "metrics.csv").read_text().splitlines()))
    for row in metrics:
        results = by_round[int(row["round"])]
        for result in results:
            assert result.epochs_run == 3 and result.mean_epoch_loss != result.train_loss
        assert float(row["train_loss_as_coded"]) == sum(r.mean_epoch_loss for r in results) / len(results)
    plain, _ = recorded_simulation(tmp_path / "afl", sizes, **FIXED_CLIENTS, clients_per_round=2, rounds=2)
    plain.run()
    assert "train_loss_as_coded" not in (tmp_path / "afl" / "metrics.csv").read_text().splitlines()[0]


def test_afl_as_coded_resumes_its_clients_models_to_the_same_bytes(tmp_path):
    sizes = [4, 8, 12, 8]
    simulation, _ = recorded_simulation(tmp_path / "whole", sizes, **AS_CODED, checkpoint_every=2)
    simulation.run()
    crashed, _ = recorded_simulation(tmp_path / "resumed", sizes, fail_on_call=5, **AS_CODED, checkpoint_every=2)
    with pytest.raises(RuntimeError, match="injected crash"):
        crashed.run()
    assert (tmp_path / "resumed" / "checkpoint.pt").exists()
    resumed, recording = recorded_simulation(tmp_path / "resumed", sizes, **AS_CODED, checkpoint_every=2)
    resumed.run()
    assert len(recording.calls) < 6  # it did resume, not start over
    for name in ("metrics.csv", "events.csv", "model.pt"):
        assert (tmp_path / "resumed" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes(), name


def test_equivalent_rounds_give_every_algorithm_the_same_learning_rates_at_an_equal_budget(tmp_path):
    """At 150 client updates (the quick config's budget), the mean learning rate per update of AFL, sync,
    FedAsync and FedBuff (K = 3) is within 10 % under `equivalent_round` (what remains is staleness: a stale
    update was dispatched at an earlier t); under `round`, FedAsync's t runs J times faster."""
    sizes = (6, 8, 10, 12, 6, 8, 10, 12, 6, 8)
    means = {}
    runs = [("equivalent_round", a) for a in ("afl", "sync", "fedasync", "fedbuff")] + [("round", "fedasync")]
    for clock, algorithm in runs:
        settings = dict(algorithm=algorithm, clients_per_round=5, max_updates=150, rounds=150, eval_every=150)
        extra = {"buffer_size": 3} if algorithm == "fedbuff" else {}
        _, events, _ = run(tmp_path, sizes, f"{clock}-{algorithm}", lr_time=clock, local_epochs=1, **settings, **extra)
        assert len(events) == 150
        means[clock, algorithm] = np.mean([float(e["lr"]) for e in events])
    fair = [means["equivalent_round", a] for a in ("afl", "sync", "fedasync", "fedbuff")]
    assert max(fair) / min(fair) < 1.10, fair
    assert means["round", "fedasync"] < 0.75 * means["equivalent_round", "afl"]


def evaluated_update_counts(folder: Path) -> list[int]:
    """Client updates aggregated at each round that evaluated the global model."""
    metrics = list(csv.DictReader((folder / "metrics.csv").read_text().splitlines()))
    events = list(csv.DictReader((folder / "events.csv").read_text().splitlines()))
    per_round = np.bincount([int(row["round"]) for row in events])
    counts = np.cumsum(per_round)
    return [int(counts[int(row["round"])]) for row in metrics if row["test_accuracy"]]


def test_algorithms_at_an_equal_budget_are_evaluated_at_the_same_update_counts(tmp_path):
    """`eval_every` counts rounds, and a FedAsync round is one update where an AFL round is J: at
    eval_every 2 FedAsync was evaluated every 2 updates, AFL every 6. `eval_every_updates` evaluates
    both at the same counts (every 6 updates here, and at the end)."""
    sizes = [4, 8, 12, 8]
    counts = {}
    for algorithm in ("afl", "fedasync", "sync"):
        settings = {**FIXED_CLIENTS, "algorithm": algorithm, "clients_per_round": 3, "rounds": 24, "max_updates": 24}
        Simulation(
            make_config({**settings, "eval_every_updates": 6}),
            tiny_dataset(32),
            contiguous_partition(sizes),
            tmp_path / algorithm,
        ).run()
        counts[algorithm] = evaluated_update_counts(tmp_path / algorithm)
    assert counts["afl"] == counts["fedasync"] == counts["sync"] == [6, 12, 18, 24]
    by_rounds = tmp_path / "by_rounds"
    settings = {**FIXED_CLIENTS, "algorithm": "fedasync", "clients_per_round": 3, "rounds": 24, "eval_every": 2}
    Simulation(make_config(settings), tiny_dataset(32), contiguous_partition(sizes), by_rounds).run()
    assert evaluated_update_counts(by_rounds) == list(range(2, 25, 2))  # what a round cadence gave FedAsync
