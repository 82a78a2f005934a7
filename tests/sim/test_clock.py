"""The real clock (`clock: real`): the same engine paced by the wall clock. Each event is served no earlier
than its wall time, in the virtual clock's order; a run makes the virtual run's outputs; a machine that
falls behind is counted, never reordered. Lower bounds only: load can make a paced run later, never earlier.
"""

import math
import time
from pathlib import Path

import pytest

from asyncfl.planning.layout import RUN_OUTPUTS
from asyncfl.settings.config import make_config
from asyncfl.settings.errors import InputError
from asyncfl.sim.engine import Simulation
from asyncfl.sim.events import LATE_AFTER, Event, EventQueue, PacedQueue
from asyncfl.sim.state import Job
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
}
# 1 virtual second is 5 ms of wall time: a run of ~60 virtual s is paced over ~0.3 s
SCALE = 0.005


def scheduled(queue: EventQueue, times: list[float]) -> None:
    for index, at in enumerate(times):
        queue.at(Event.arrival(Job(index, 0, 0, 0.0, at, (0.1,))))


def test_each_batch_is_served_no_earlier_than_its_wall_time_in_the_virtual_order():
    times = [0.04, 0.0, 0.1, 0.04, 0.07]
    virtual, paced = EventQueue(0.0), PacedQueue(0.0, time_scale=0.5)
    scheduled(virtual, times)
    scheduled(paced, times)
    began = paced.began[0]
    served = []
    for _ in times:
        event = paced.next()
        served.append((event, time.monotonic() - began))
    assert [event for event, _ in served] == [virtual.next() for _ in times]
    for event, after in served:
        assert after >= event.time * 0.5, (event, after)


def test_a_resumed_queue_paces_from_where_it_resumes():
    queue = PacedQueue(100.0, time_scale=0.5)  # a resume at virtual 100 s: 100.1 s is 0.05 s of wall time away
    scheduled(queue, [100.1])
    queue.next()
    assert time.monotonic() - queue.began[0] >= 0.05
    assert queue.record() == {"time_scale": 0.5, "late_batches": 0, "most_behind_seconds": 0.0}


def test_a_machine_that_falls_behind_is_counted_and_the_order_kept():
    queue = PacedQueue(0.0, time_scale=1e-3)  # every batch 1 ms apart
    scheduled(queue, [0.0, 1.0, 2.0, 3.0])
    order = []
    for _ in range(4):
        order.append(queue.next().time)
        time.sleep(3 * LATE_AFTER)  # a handler slower than the gaps: each next batch is already late
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
    ],
)
def test_a_clock_setting_that_cannot_work_is_one_line_naming_it(settings, message):
    with pytest.raises(InputError, match=message):
        make_config(settings)
