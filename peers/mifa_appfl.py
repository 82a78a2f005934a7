"""MIFA's server step beside APPFL's, on the same arrivals: the largest difference of the global models.

APPFL's `src/appfl/algorithm/aggregator/mifa_aggregator.py` (its `MIFAAggregator.aggregate`; at commit
4914bb79 of https://github.com/APPFL/APPFL, not in APPFL's releases) is read from a checkout given as
--appfl (never a dependency of asyncfl, never copied here); its imports of APPFL's base aggregator and of
omegaconf are stood in for. APPFL keeps each client's latest update on the client, which uploads the
difference G_new − G_old of its pseudo-gradients G = θ_start − θ_c: that upload is made here, from a memory
that starts at 0 as MIFA's does (APPFL's `MIFATrainer` starts it at the model's weights, a bug: see
fl/algorithms/mifa.py). Both servers start from one model and take the same arrivals (a random client, a
random update Δ); every K arrivals each aggregates (asyncfl: `MIFA.aggregate_with_memory`). In float64.

    .venv/bin/python peers/mifa_appfl.py --appfl /path/to/APPFL
"""

import argparse
import importlib.util
import sys
import types
from pathlib import Path

import torch

from asyncfl.fl.algorithms.mifa import MIFA
from asyncfl.fl.strategy import Update
from asyncfl.settings.config import make_config


class Settings(dict):
    """omegaconf's DictConfig as the aggregator reads it: keys, and attributes."""

    __getattr__ = dict.__getitem__


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appfl", required=True, type=Path, help="a checkout of APPFL at 4914bb79")
    parser.add_argument("--clients", type=int, default=8, help="N, the clients")
    parser.add_argument("--buffer", type=int, default=3, help="K, arrivals per aggregation")
    parser.add_argument("--rounds", type=int, default=50, help="aggregations compared")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def appfl_aggregator(checkout: Path, model: torch.nn.Module, clients: int, buffer: int):
    """APPFL's MIFAAggregator as its own file defines it, on `model`."""
    omegaconf = types.ModuleType("omegaconf")
    omegaconf.DictConfig = Settings  # type: ignore[attr-defined]
    base = types.ModuleType("appfl.algorithm.aggregator")
    base.FedAsyncAggregator = object  # type: ignore[attr-defined]
    stand_ins = {"appfl": types.ModuleType("appfl"), "appfl.algorithm": types.ModuleType("appfl.algorithm")}
    sys.modules.update({**stand_ins, "omegaconf": omegaconf, "appfl.algorithm.aggregator": base})
    path = checkout / "src/appfl/algorithm/aggregator/mifa_aggregator.py"
    spec = importlib.util.spec_from_file_location("appfl_mifa", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.MIFAAggregator(model, Settings(K=buffer, num_clients=clients))


def main() -> None:
    args = arguments()
    torch.manual_seed(args.seed)
    torch.set_default_dtype(torch.float64)
    model = torch.nn.Linear(5, 3)
    peer = appfl_aggregator(args.appfl, model, args.clients, args.buffer)
    strategy = MIFA(make_config({"algorithm": "mifa", "buffer_size": args.buffer}))
    ours = {key: value.clone() for key, value in model.state_dict().items()}
    memory: dict = {}
    sent = {client: {key: torch.zeros_like(value) for key, value in ours.items()} for client in range(args.clients)}
    worst, repeated = 0.0, 0
    for _ in range(args.rounds):
        updates: list[Update] = []
        for _ in range(args.buffer):
            client = int(torch.randint(args.clients, ()))
            repeated += any(update.client == client for update in updates)
            start = {key: torch.randn_like(value) for key, value in ours.items()}
            delta = {key: torch.randn_like(value) for key, value in ours.items()}
            updates.append(Update({k: start[k] + delta[k] for k in start}, start, 1, 1.0, 0, client))
            pseudo_gradient = {key: -value for key, value in delta.items()}
            theirs = peer.aggregate(client, {key: pseudo_gradient[key] - sent[client][key] for key in delta})
            sent[client] = pseudo_gradient
        ours, _, memory = strategy.aggregate_with_memory(ours, updates, memory, args.clients)
        worst = max(worst, *(float((ours[key] - theirs[key]).abs().max()) for key in ours))
    print(
        f"MIFA, asyncfl against APPFL: {args.rounds} rounds of K = {args.buffer} over N = {args.clients} clients "
        f"({repeated} arrivals from a client already in its round): max |θ_asyncfl − θ_APPFL| = {worst:.3g}"
    )


if __name__ == "__main__":
    main()
