"""The real clock (`clock: real`): the same engine paced by the wall clock. Each event is served no earlier
than its wall time, in the virtual clock's order; a run makes the virtual run's outputs; a machine that
falls behind is counted, never reordered. Lower bounds only: load can make a paced run later, never earlier.
"""

import asyncio
import csv
import itertools
import math
import threading
import time
from pathlib import Path

import pytest

from asyncfl.planning.layout import RUN_OUTPUTS
from asyncfl.runs.record import verify_run_files
from asyncfl.settings.config import make_config
from asyncfl.settings.errors import InputError
from asyncfl.sim.clients import ClientFailed
from asyncfl.sim.engine import Simulation
from asyncfl.sim.events import LATE_AFTER, Event, EventQueue, PacedQueue
from asyncfl.sim.state import Job
from asyncfl.training.interface import LocalResult, LocalTask
from asyncfl.training.plain import PlainTrainer
from engine_cases import contiguous_partition, tiny_dataset

SIZES = [40, 56, 72, 48, 64, 80]
DATASET, PARTITION = tiny_dataset(sum(SIZES)), contiguous_partition(SIZES)
BASE = {"clients_per_round": 3, "rounds": 4, "local_epochs": 1, "eval_every": 2, "checkpoint_every": 2}
# Each family of the engine: a closed loop, a synchronous round with a deadline that abandons and cuts
# work, a buffer, and FedCompass's arrival groups
FAMILIES = {
    "afl": {**BASE, "algorithm": "afl"},
    "sync-deadline": {
        **BASE,
        "algorithm": "sync",
        "round_deadline": 3.0,
        "min_report_fraction": 0.6,
        "partial_work": True,
        "speed_sigma": 1.0,
    },  # fmt: skip
    "fedbuff": {**BASE, "algorithm": "fedbuff", "buffer_size": 2, "concurrency": 4},
    "fedcompass": {**BASE, "algorithm": "fedcompass", "speed_sigma": 1.0},
    "fedasmu": {**BASE, "algorithm": "fedasmu", "rounds": 8, "speed_sigma": 1.0},  # clients start at their request
    "pisces": {**BASE, "algorithm": "pisces", "concurrency": 3, "pisces_step": 1.0, "pisces_unknown_latency": 5.0},
}
# 1 virtual second is 5 ms of wall time: a run of ~60 virtual s is paced over ~0.3 s
SCALE = 0.005


def scheduled(queue: EventQueue, times: list[float]) -> None:
    for index, at in enumerate(times):
        queue.at(Event.arrival(Job(index, 0, 0, 0.0, at, (0.1,))))


def paced(queue: PacedQueue, count: int, handler_seconds: float = 0.0) -> list[tuple[Event, float]]:
    """The first `count` events the queue serves on an asyncio loop, each with its wall time after the
    queue began; `handler_seconds`: how long each event's handler holds the loop."""

    async def serve() -> list[tuple[Event, float]]:
        served = []
        for _ in range(count):
            event = await queue.paced_next()
            served.append((event, time.monotonic() - queue.began[0]))
            time.sleep(handler_seconds)
        return served

    return asyncio.run(serve())


def test_each_batch_is_served_no_earlier_than_its_wall_time_in_the_virtual_order():
    times = [0.04, 0.0, 0.1, 0.04, 0.07]
    virtual, queue = EventQueue(0.0), PacedQueue(0.0, time_scale=0.5)
    scheduled(virtual, times)
    scheduled(queue, times)
    served = paced(queue, len(times))
    assert [event for event, _ in served] == [virtual.next() for _ in times]
    for event, after in served:
        assert after >= event.time * 0.5, (event, after)


def test_a_resumed_queue_paces_from_where_it_resumes():
    queue = PacedQueue(100.0, time_scale=0.5)  # a resume at virtual 100 s: 100.1 s is 0.05 s of wall time away
    scheduled(queue, [100.1])
    ((_, after),) = paced(queue, 1)
    assert after >= 0.05
    assert queue.record() == {"time_scale": 0.5, "late_batches": 0, "most_behind_seconds": 0.0}


def test_a_machine_that_falls_behind_is_counted_and_the_order_kept():
    queue = PacedQueue(0.0, time_scale=1e-3)  # every batch 1 ms apart
    scheduled(queue, [0.0, 1.0, 2.0, 3.0])
    # a handler slower than the gaps: each next batch is already late
    order = [event.time for event, _ in paced(queue, 4, handler_seconds=3 * LATE_AFTER)]
    assert order == [0.0, 1.0, 2.0, 3.0]
    assert queue.late == 3 and queue.most_behind >= 2 * LATE_AFTER


def outputs(out: Path) -> dict[str, bytes]:
    return {name: (out / name).read_bytes() for name in RUN_OUTPUTS}


@pytest.mark.parametrize("family", FAMILIES)
def test_a_paced_run_makes_the_virtual_runs_outputs(tmp_path, family):
    settings = FAMILIES[family]
    virtual = Simulation(make_config(settings), DATASET, PARTITION, tmp_path / "virtual").run()
    began = time.monotonic()
    paced_config = make_config({**settings, "clock": "real", "time_scale": SCALE})
    paced = Simulation(paced_config, DATASET, PARTITION, tmp_path / "paced").run()
    assert time.monotonic() - began >= virtual["virtual_time"] * SCALE  # it was paced, not jumped
    assert outputs(tmp_path / "paced") == outputs(tmp_path / "virtual")
    assert paced["virtual_time"] == virtual["virtual_time"] and "clock" not in virtual
    assert paced["clock"]["time_scale"] == SCALE and paced["clock"]["late_batches"] >= 0


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"time_scale": 0.5}, "time_scale applies only with clock: real"),
        ({"clock": "real", "time_scale": 0.0}, "time_scale must be"),
        ({"clock": "real", "time_scale": -1.0}, "time_scale must be"),
        ({"clock": "real", "time_scale": math.nan}, "time_scale"),
        ({"clock": "real", "time_scale": math.inf}, "time_scale"),
        ({"clock": "real", "time_scale": 1e9}, "time_scale must be ≤ 1000"),
        ({"clock": "real", "time_scale": 1e-9}, "time_scale must be ≥ 1e-06"),
        ({"clock": "real", "time_scale": "fast"}, "time_scale must be float"),
        ({"clock": "wall"}, "clock"),
        ({"client_workers": 4}, "client_workers applies only with clock: real"),
        ({"clock": "real", "client_workers": 0}, "client_workers must be"),
        ({"clock": "real", "client_workers": 1.5}, "client_workers must be int"),
        ({"clock": "real", "client_workers": 10**9}, "client_workers must be ≤ 256"),
        ({"clock": "real", "client_workers": "two"}, "client_workers must be int"),
    ],
)
def test_a_clock_setting_that_cannot_work_is_one_line_naming_it(settings, message):
    with pytest.raises(InputError, match=message):
        make_config(settings)


# Long enough a training (10 epochs of up to two minibatches) that two workers given clients at the same
# instant are both still training when the other starts
TRAINING = {**FAMILIES["afl"], "local_epochs": 10, "clock": "real", "time_scale": SCALE, "client_workers": 2}


def wall_rows(out: Path) -> list[dict[str, str]]:
    with (out / "wall.csv").open() as handle:
        return list(csv.DictReader(handle))


def test_clients_train_off_the_event_loop_two_at_once(tmp_path, monkeypatch):
    """Every training runs on a worker thread, never on the loop's (the main thread, which would stall
    the server and every other client); with two workers, two trainings overlap in wall time."""
    threads: list[str] = []
    train_one = PlainTrainer.train_one

    def watched(trainer: PlainTrainer, task: LocalTask) -> LocalResult:
        threads.append(threading.current_thread().name)
        return train_one(trainer, task)

    monkeypatch.setattr(PlainTrainer, "train_one", watched)
    record = Simulation(make_config(TRAINING), DATASET, PARTITION, tmp_path / "paced").run()
    rows = wall_rows(tmp_path / "paced")
    assert threads and all(name.startswith("client-worker") for name in threads), set(threads)
    warm_ups = 2  # each worker trains once before the clock starts (`ClientTasks.warm_up`)
    assert len(rows) + warm_ups == len(threads) and {row["worker"] for row in rows} <= set(threads)
    spans = [(float(row["trained_from"]), float(row["trained_to"]), row["worker"]) for row in rows]
    assert any(a[0] < b[1] and b[0] < a[1] and a[2] != b[2] for a in spans for b in spans), spans
    assert all(float(row["downloaded"]) <= float(row["trained_from"]) for row in rows)
    assert record["clock"]["client_workers"] == 2 and not any(name.startswith("client-worker") for name in live())
    monkeypatch.undo()
    virtual = {**TRAINING, "clock": "virtual"}
    del virtual["time_scale"], virtual["client_workers"]
    Simulation(make_config(virtual), DATASET, PARTITION, tmp_path / "virtual").run()
    assert outputs(tmp_path / "paced") == outputs(tmp_path / "virtual")


def live() -> list[str]:
    return [thread.name for thread in threading.enumerate()]


def test_a_client_that_raises_stops_the_run_naming_it_and_leaves_no_worker(tmp_path, monkeypatch):
    calls = itertools.count()
    train_one = PlainTrainer.train_one

    def failing(trainer: PlainTrainer, task: LocalTask) -> LocalResult:
        if next(calls) == 4:
            raise RuntimeError("CUDA out of memory")
        return train_one(trainer, task)

    monkeypatch.setattr(PlainTrainer, "train_one", failing)
    with pytest.raises(ClientFailed, match=r"^client \d+'s dispatch \d+ .* RuntimeError: CUDA out of memory$"):
        Simulation(make_config(TRAINING), DATASET, PARTITION, tmp_path / "run").run()
    assert not any(name.startswith("client-worker") for name in live())
    assert not (tmp_path / "run" / "run.json").exists()


def test_a_timing_only_run_on_the_real_clock_is_the_virtual_ones_twin(tmp_path):
    settings = {**FAMILIES["fedbuff"], "trainer": "none"}
    Simulation(make_config(settings), DATASET, PARTITION, tmp_path / "virtual").run()
    paced = {**settings, "clock": "real", "time_scale": SCALE}
    record = Simulation(make_config(paced), DATASET, PARTITION, tmp_path / "paced").run()
    assert outputs(tmp_path / "paced") == outputs(tmp_path / "virtual") and "late_dispatches" in record["clock"]


# Measured durations: 1 virtual second is 50 ms of wall time, so a training of a few ms is a fraction of
# the drawn latency (1 s median) and a run of 4 rounds is paced over a few tenths of a second
MEASURED = {"clock": "real", "durations": "measured", "time_scale": 0.05}


def arrivals_by_dispatch(out: Path) -> dict[tuple[int, int], dict[str, float]]:
    """events.csv's arrivals keyed by (client, its dispatch's index among the client's)."""
    with (out / "events.csv").open() as handle:
        rows = sorted(csv.DictReader(handle), key=lambda row: float(row["dispatch_time"]))
    counts: dict[int, int] = {}
    keyed = {}
    for row in rows:
        client = int(row["client"])
        keyed[client, counts.get(client, 0)] = {key: float(row[key]) for key in ("dispatch_time", "arrival_time")}
        counts[client] = counts.get(client, 0) + 1
    return keyed


@pytest.mark.parametrize("family", ["afl", "fedbuff", "sync", "pisces"])  # Pisces: starts at its steps
def test_a_measured_run_times_each_dispatch_by_its_training_and_its_clients_slowness(tmp_path, family):
    """Each arrival comes after its training ended on the wall clock, and its dispatch took at least the
    training × the client's slowness against the fastest: the order is the machine's, not the draws'."""
    settings = {**FAMILIES.get(family, {**BASE, "algorithm": "sync"}), **MEASURED, "speed_sigma": 1.0}
    simulation = Simulation(make_config(settings), DATASET, PARTITION, tmp_path / "measured")
    record = simulation.run()
    speed = simulation.context.system.speed
    arrivals = arrivals_by_dispatch(tmp_path / "measured")
    trained = {(int(row["client"]), int(row["dispatch_index"])): row for row in wall_rows(tmp_path / "measured")}
    assert arrivals and set(arrivals) <= set(trained)
    for key, times in arrivals.items():
        row, scale = trained[key], MEASURED["time_scale"]
        assert times["arrival_time"] >= float(row["trained_to"]) / scale
        training = (float(row["trained_to"]) - float(row["trained_from"])) / scale
        assert times["arrival_time"] - times["dispatch_time"] >= training * speed.max() / speed[key[0]]
        assert float(row["served"]) >= float(row["trained_to"])
    assert record["config"]["durations"] == "measured" and record["clock"]["late_dispatches"] == 0
    drawn = {key: value for key, value in settings.items() if key not in MEASURED}
    Simulation(make_config(drawn), DATASET, PARTITION, tmp_path / "drawn").run()
    assert arrivals_by_dispatch(tmp_path / "drawn") != arrivals  # the drawn compute is not what the machine took


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"durations": "measured"}, "durations applies only with clock: real"),
        ({**MEASURED, "durations": "wall"}, "durations"),
        ({**MEASURED, "trainer": "none"}, "durations: measured does not go with trainer: none"),
        ({**MEASURED, "algorithm": "fedcompass"}, "does not go with algorithm: fedcompass"),
        ({**MEASURED, "algorithm": "fedasmu"}, "does not go with algorithm: fedasmu"),
        ({**MEASURED, "algorithm": "sync", "round_deadline": 2.0, "partial_work": True}, "with partial_work"),
        ({**MEASURED, "bandwidth_median": 100.0, "server_bandwidth": 1e3}, "with server_bandwidth"),
        ({**MEASURED, "client_freed": "after_training"}, "with client_freed: after_training"),
        ({**MEASURED, "availability": "exponential"}, "with availability other than always"),
        ({**MEASURED, "failure_probability": 0.1}, "with failure_probability > 0"),
        ({**MEASURED, "arrivals": "poisson", "checkin_rate": 1.0}, "with arrivals: poisson"),
    ],
)
def test_what_measured_durations_cannot_time_is_refused_naming_the_setting(settings, message):
    with pytest.raises(InputError, match=message):
        make_config(settings)


def test_a_measured_client_that_raises_stops_the_waiting_server_in_one_line(tmp_path, monkeypatch):
    """With measured durations nothing is scheduled while every client trains: the server waits for them,
    so a client's failure must wake it (no hang), and no worker outlives the run."""
    calls = itertools.count()
    train_one = PlainTrainer.train_one

    def failing(trainer: PlainTrainer, task: LocalTask) -> LocalResult:
        if next(calls) == 2:  # the first client's training, after the two workers' warm-ups
            raise RuntimeError("CUDA out of memory")
        return train_one(trainer, task)

    monkeypatch.setattr(PlainTrainer, "train_one", failing)
    with pytest.raises(ClientFailed, match=r"^client \d+'s dispatch 0 .* RuntimeError: CUDA out of memory$"):
        Simulation(make_config({**FAMILIES["afl"], **MEASURED}), DATASET, PARTITION, tmp_path / "run").run()
    assert not any(name.startswith("client-worker") for name in live())


def test_a_measured_run_stopped_after_a_checkpoint_resumes_keeping_what_it_had_logged(tmp_path, monkeypatch):
    """A measured run is a measurement (its resume cannot be a twin of anything), but it checkpoints like
    any run: stopped after its first checkpoint, run again, it resumes there (the clients in flight train
    again) and ends with a full, self-consistent record whose first rows are those it had logged."""
    import asyncfl.sim.engine as engine

    settings = make_config({**FAMILIES["afl"], **MEASURED, "rounds": 6})
    save = engine.save_checkpoint
    logged: dict[str, str] = {}

    def save_then_stop(path: Path, identity: dict, payload: dict) -> None:
        save(path, identity, payload)
        logged.update({name: (path.parent / name).read_text() for name in ("events.csv", "metrics.csv")})
        raise KeyboardInterrupt

    monkeypatch.setattr(engine, "save_checkpoint", save_then_stop)
    with pytest.raises(KeyboardInterrupt):
        Simulation(settings, DATASET, PARTITION, tmp_path / "run").run()
    assert not any(name.startswith("client-worker") for name in live())
    monkeypatch.setattr(engine, "save_checkpoint", save)
    record = Simulation(settings, DATASET, PARTITION, tmp_path / "run").run()
    verify_run_files(tmp_path / "run", ("events.csv", "metrics.csv", "wall.csv"))
    assert record["rounds_completed"] == 6 and record["config"]["durations"] == "measured"
    for name, before in logged.items():
        after = (tmp_path / "run" / name).read_text()
        assert after.startswith(before.rstrip("\n")) and len(after) > len(before), name
