"""Pisces beside its authors' client manager, on the same arrivals: at every step, the clients each side
starts, whether each aggregates, and the largest difference of the global models.

The authors' code (SamuelGong/Pisces, commit 4ba4db87) is read from a checkout given as --pisces (never a
dependency of asyncfl, never copied here): its `plato/client_managers/base.py` and `sirius.py` run as
written, driven as its server's step loop (`plato/servers/base.py`'s `async_training_coro`) drives them:
a report records its training's end and the client's utility (`update_utilities_using_loss`) and is
buffered; at each step `whether_to_aggregate` (which chooses the clients to start) and, where it says so,
`record_aggregation` and the aggregation of `plato/servers/fedavg.py` (its factors from
`get_async_client_lag` and `staleness_factor_calculator`), then the chosen start (`record_training_start`).
What they import from the rest of Plato is given the smallest stand-ins: a `Config` holding the example
configs' values, and an Oort selector never used. The clock is the virtual one (their `start_time` 0).

asyncfl's `Pisces` steps with the same buffered, running and idle clients (`step`) and aggregates the same
reports (`aggregate_with_memory`): each client has a drawn duration of at least 2 s (theirs counts a
response time under 1 s as never heard from), each report a drawn loss ℓ (theirs is given √ℓ as its
`loss_norm`) and a model moved from the one it started from. In float64.

    .venv/bin/python peers/pisces_authors.py --pisces /path/to/Pisces
"""

import argparse
import heapq
import importlib.util
import json
import sys
import types
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from asyncfl.fl.algorithms.pisces import Pisces
from asyncfl.fl.strategy import ServerClients, Update
from asyncfl.settings.config import make_config


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pisces", required=True, help="the authors' checkout (the folder holding plato/)")
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=5)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--step", type=float, default=5.0, help="seconds per step")
    parser.add_argument("--parameters", type=int, default=20, help="entries of the model")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--our-exponent", type=float, default=0.5, help="asyncfl's e (another: the check bites)")
    return parser.parse_args()


def their_manager(checkout: Path, args: argparse.Namespace):
    """The authors' Sirius client manager, its imports given stand-ins, its config the examples' values."""
    sirius = SimpleNamespace(explore_factor=0.9, exploration_decaying_factor=0.98, min_explore_factor=0.3,
                             staleness_penalty_factor=0.5, seed=args.seed, version=2,
                             statistical_only=True)  # fmt: skip
    config = SimpleNamespace(
        clients=SimpleNamespace(per_round=args.concurrency, total_clients=args.clients),
        server=SimpleNamespace(asynchronous=SimpleNamespace(seconds_per_step=args.step, sirius=sirius)),
        data=SimpleNamespace(),
    )
    for name in ("plato", "plato.client_managers"):
        sys.modules[name] = types.ModuleType(name)
    sys.modules["plato.config"] = types.SimpleNamespace(Config=lambda: config)  # type: ignore[assignment]
    sys.modules["plato.client_managers.oort"] = types.SimpleNamespace(create_training_selector=None)  # type: ignore[assignment]
    sys.modules.setdefault("requests", types.ModuleType("requests"))
    for name in ("base", "sirius"):
        path = checkout / "plato" / "client_managers" / f"{name}.py"
        if not path.is_file():
            raise SystemExit(f"--pisces {checkout}: no {path.relative_to(checkout)} there; give the Pisces checkout")
        spec = importlib.util.spec_from_file_location(f"plato.client_managers.{name}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        setattr(sys.modules["plato.client_managers"], name, module)
        spec.loader.exec_module(module)
    manager = sys.modules["plato.client_managers.sirius"].ClientManager()
    manager.start_time = 0.0  # the virtual clock
    return manager


def main() -> None:
    args = arguments()
    rng = np.random.default_rng(args.seed + 1000)
    sizes = [int(n) for n in rng.integers(10, 200, args.clients)]
    durations = [2.0 + float(d) for d in rng.lognormal(1.5, 0.8, args.clients)]
    theirs = their_manager(Path(args.pisces), args)
    theirs.trainset_sizes = {client + 1: n for client, n in enumerate(sizes)}
    config = {"algorithm": "pisces", "concurrency": args.concurrency, "clients_per_round": args.concurrency,
              "pisces_step": args.step, "seed": args.seed, "pisces_staleness_exponent": args.our_exponent}  # fmt: skip
    ours = Pisces(make_config(config))
    memory = ours.initial_memory(np.array(sizes))
    theta_ours = {"w": torch.from_numpy(rng.normal(0, 1, args.parameters))}
    theta_theirs = {"w": theta_ours["w"].clone()}
    version, arrivals = 0, []  # arrivals: (time, client, start version, start model)
    running: dict[int, tuple] = {}
    buffer: list[tuple] = []  # (client, start version, model, loss, duration)
    differences = {"theta": 0.0, "started": 0, "aggregated": 0, "steps_apart": 0}
    for index in range(args.steps):
        now = index * args.step
        while arrivals and arrivals[0][0] <= now:
            when, client, started, start = heapq.heappop(arrivals)
            del running[client]
            model = {"w": start["w"] + torch.from_numpy(rng.normal(0, 0.1, args.parameters))}
            loss = float(rng.uniform(0.1, 2.5))
            theirs.record_training_end(client + 1, when)
            theirs.update_utilities_using_loss(client + 1, float(np.sqrt(loss)))
            buffer.append((client, started, model, loss, durations[client]))
        buffered = sorted(client for client, *_ in buffer)
        idle = [c for c in range(args.clients) if c not in running and c not in buffered]
        clients = ServerClients(buffered, sorted(running), idle, args.clients)
        chosen, aggregates, memory = ours.step(now, clients, memory)
        their_choice: list[int] = []
        their_aggregates = False
        free = args.concurrency - len(running)
        available = [c + 1 for c in idle]
        if buffer:
            their_aggregates = theirs.whether_to_aggregate(available, free, {c + 1 for c in running},
                                                           [c + 1 for c, *_ in buffer], now, version)  # fmt: skip
        if their_aggregates:
            theirs.record_aggregation([c + 1 for c, *_ in buffer], now, version)
            total = sum(sizes[c] for c, *_ in buffer)
            delta = torch.zeros_like(theta_theirs["w"])
            for client, *_ in buffer:
                lag = theirs.get_async_client_lag(client_id=client + 1)
                factor = theirs.staleness_factor_calculator(lag=lag, agg_version=version)
                model = next(m for c, _, m, *_ in buffer if c == client)
                delta += (model["w"] - theta_theirs["w"]) * (sizes[client] / total) * factor
            theta_theirs = {"w": theta_theirs["w"] + delta}
        if aggregates:
            updates = [Update(model, model, sizes[c], 1.0, version - started, c, (), {}, 0.0, loss, started, duration)
                       for c, started, model, loss, duration in buffer]  # fmt: skip
            theta_ours, _, memory = ours.aggregate_with_memory(theta_ours, updates, memory, args.clients)
        if their_aggregates or aggregates:
            buffer.clear()
            version += 1
        their_choice = [c - 1 for c in theirs.choose_clients(available, free, use_cache=True)]
        if sorted(their_choice) != sorted(chosen) or their_aggregates != aggregates:
            differences["steps_apart"] += 1
            print("apart", index, chosen, their_choice, aggregates, their_aggregates, file=sys.stderr)
        differences["aggregated"] += aggregates
        differences["theta"] = max(differences["theta"], float((theta_ours["w"] - theta_theirs["w"]).abs().max()))
        for client in chosen:
            theirs.record_training_start(client + 1, now, version)
            running[client] = (version, {"w": theta_ours["w"].clone()})
            heapq.heappush(arrivals, (now + durations[client], client, version, running[client][1]))
            differences["started"] += 1
    print(json.dumps({"steps": args.steps, **{f"{k}": v for k, v in differences.items()}}))


if __name__ == "__main__":
    main()
