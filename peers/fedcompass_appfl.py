"""FedCompass's scheduler beside APPFL's, on the same clients: every dispatch's steps and every aggregation.

APPFL's `appfl/algorithm/scheduler/compass_scheduler.py` (its `CompassScheduler`, from the appfl wheel
given as --appfl, an unpacked copy of the package; never a dependency of asyncfl, never copied here) runs
on a virtual clock: its `time.time` reads the clock and its `threading.Timer` becomes an event at the
timer's time, so that both schedulers see the same instants. APPFL's scheduler is cross-silo (every
client always in flight, each dispatched again when its group is aggregated), so asyncfl's
`sim.compass.CompassSchedule` is driven the same way here. Each client computes a local step in its own
seconds (a heavy tail: a fifth of them 10× slower) and adds a fixed latency; the script prints how many
dispatches and aggregations each made and whether the two lists are identical.

    .venv/bin/python peers/fedcompass_appfl.py --appfl /path/to/unpacked/appfl-wheel
"""

import argparse
import heapq
import importlib.util
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from asyncfl.sim.compass import CompassSchedule

Dispatches = list[tuple[float, int, int]]  # (time, client, steps)
Aggregations = list[tuple[float, tuple[int, ...]]]  # (time, the clients whose updates it took)


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appfl", required=True, help="an unpacked appfl wheel (the folder holding appfl/)")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--until", type=float, default=2000.0, help="virtual seconds to run")
    parser.add_argument("--steps", type=int, nargs=2, default=[20, 100], help="Q_min, Q_max (APPFL's example)")
    parser.add_argument("--factor", type=float, default=1.5, help="λ (APPFL's example config)")
    parser.add_argument("--momentum", type=float, default=0.9, help="speed momentum (APPFL's example config)")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def client_times(clients: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Each client's seconds per local step (lognormal, a fifth 10× slower) and its fixed latency."""
    rng = np.random.default_rng(seed)
    per_step = 0.05 * rng.lognormal(0.0, 0.5, clients)
    per_step[rng.permutation(clients)[: max(1, clients // 5)]] *= 10
    return per_step, rng.uniform(0.5, 2.0, clients)


def run_asyncfl(args: argparse.Namespace, per_step: np.ndarray, latency: np.ndarray) -> tuple[Dispatches, Aggregations]:
    schedule, events = CompassSchedule(), []
    dispatches: Dispatches = []
    aggregations: Aggregations = []
    steps = (args.steps[0], args.steps[1])

    def dispatch(client: int, now: float) -> None:
        known = set(schedule.groups)
        given = schedule.assign(client, now, steps, args.factor)
        dispatches.append((now, client, given.steps))
        heapq.heappush(events, (now + given.steps * per_step[client] + latency[client], 0, client))
        if given.group is not None and given.group not in known:
            heapq.heappush(events, (schedule.groups[given.group].deadline, 1, given.group))

    def aggregate(number: int, now: float) -> None:
        arrived = list(schedule.groups[number].arrived)  # the late ones were dispatched again as they came
        aggregations.append((now, tuple(sorted(schedule.aggregate(number)))))
        for client in schedule.by_speed(arrived):
            dispatch(client, now)

    for client in range(args.clients):
        dispatch(client, 0.0)
    while events and events[0][0] < args.until:
        now, kind, who = heapq.heappop(events)
        if kind == 1:
            if schedule.due_at_deadline(who):
                aggregate(who, now)
            continue
        outcome, group = schedule.arrive(who, now, args.momentum)
        if outcome == "alone":
            aggregations.append((now, (who,)))
            dispatch(who, now)
        elif outcome == "late":
            dispatch(who, now)
        elif outcome == "complete":
            assert group is not None
            aggregate(group, now)
    return dispatches, aggregations


def appfl_scheduler(folder: str) -> type:
    """APPFL's CompassScheduler class, its module loaded from the wheel with the two imports it needs
    beside the standard library's: its base class (loaded from the wheel too) and a memory helper (a no-op)."""
    root = Path(folder) / "appfl"
    stubs = {name: types.ModuleType(name) for name in ("appfl", "appfl.algorithm", "appfl.misc")}
    aggregator = types.ModuleType("appfl.algorithm.aggregator")
    aggregator.BaseAggregator = object  # type: ignore[attr-defined]
    memory = types.ModuleType("appfl.misc.memory_utils")
    memory.optimize_memory_cleanup = lambda *a, **k: None  # type: ignore[attr-defined]
    sys.modules.update(stubs | {aggregator.__name__: aggregator, memory.__name__: memory})
    base = load(root / "algorithm/scheduler/base_scheduler.py", "appfl.algorithm.scheduler.base_scheduler")
    package = types.ModuleType("appfl.algorithm.scheduler")
    package.BaseScheduler = base.BaseScheduler  # type: ignore[attr-defined]
    sys.modules[package.__name__] = package
    return load(root / "algorithm/scheduler/compass_scheduler.py", "appfl_compass").CompassScheduler


def load(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def run_appfl(args: argparse.Namespace, per_step: np.ndarray, latency: np.ndarray) -> tuple[Dispatches, Aggregations]:
    from omegaconf import DictConfig

    scheduler_class = appfl_scheduler(args.appfl)
    module = sys.modules[scheduler_class.__module__]
    clock, events, dispatches, aggregations = [0.0], [], [], []
    order = iter(range(10**9))

    class Timer:  # threading.Timer on the virtual clock: an event at its time
        def __init__(self, interval: float, function: Callable, args: tuple = (), kwargs: dict | None = None):
            heapq.heappush(events, (clock[0] + interval, 1, next(order), (function, args)))

        def start(self) -> None:
            return

        def cancel(self) -> None:
            return

    class Aggregator:  # records what each aggregation took
        def aggregate(self, client_id=None, local_model=None, local_models=None, **kwargs):  # noqa: ANN001, ANN003, ANN201
            taken = (client_id,) if local_models is None else tuple(sorted(local_models))
            aggregations.append((clock[0], taken))
            return "model"

        def get_parameters(self, **kwargs):  # noqa: ANN003, ANN201
            return "model"

    module.time = types.SimpleNamespace(time=lambda: clock[0])
    module.threading = types.SimpleNamespace(Timer=Timer, Lock=__import__("threading").Lock)
    configs = {"max_local_steps": args.steps[1], "min_local_steps": args.steps[0], "num_clients": args.clients}
    configs |= {"speed_momentum": args.momentum, "latest_time_factor": args.factor, "optimize_memory": False}
    scheduler = scheduler_class(DictConfig(configs), Aggregator(), None)

    def dispatch(client: int, steps: int) -> None:
        dispatches.append((clock[0], client, steps))
        heapq.heappush(events, (clock[0] + steps * per_step[client] + latency[client], 0, client, None))

    def on_result(client: int) -> Callable:
        return lambda future: dispatch(client, future.result()[1]["local_steps"])

    for client in range(args.clients):
        dispatch(client, args.steps[1])
    while events and events[0][0] < args.until:
        now, kind, who, call = heapq.heappop(events)
        clock[0] = now
        if kind == 1:
            call[0](*call[1])
            continue
        answer = scheduler.schedule(who, {"w": 0})
        if isinstance(answer, tuple):
            dispatch(who, answer[1]["local_steps"])
        else:
            answer.add_done_callback(on_result(who))
    return dispatches, aggregations


def main() -> None:
    args = arguments()
    per_step, latency = client_times(args.clients, args.seed)
    ours = run_asyncfl(args, per_step, latency)
    theirs = run_appfl(args, per_step, latency)
    # APPFL holds updates in dicts keyed by client: a client's second held update replaces its first
    distinct = [(time, tuple(sorted(set(taken)))) for time, taken in ours[1]]
    replaced = sum(len(taken) for _, taken in ours[1]) - sum(len(taken) for _, taken in distinct)
    head = f"FedCompass, asyncfl against APPFL, {args.clients} clients over {args.until:g} virtual s:"
    print(f"{head} dispatches {len(ours[0])} and {len(theirs[0])}, {verdict(ours[0], theirs[0])}")
    print(
        f"{head} aggregations {len(ours[1])} and {len(theirs[1])}, their clients {verdict(distinct, theirs[1])}; "
        f"updates asyncfl aggregates and APPFL's buffers replaced: {replaced} of {sum(len(t) for _, t in ours[1])}"
    )


def verdict(mine: list, peer: list) -> str:
    first = next((i for i, (a, b) in enumerate(zip(sorted(mine), sorted(peer), strict=False)) if a != b), None)
    return "identical" if sorted(mine) == sorted(peer) else f"differ from #{first}"


if __name__ == "__main__":
    main()
