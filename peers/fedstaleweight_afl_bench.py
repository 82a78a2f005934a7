"""FedStaleWeight's server step beside its authors' test bench's, on the same arrivals: the largest
difference of the global models.

The authors' `afl_bench/experiments/expected_staleness.py` (its `aggregation_func` and its
`StalenessTracker`, https://github.com/18jeffreyma/afl-bench) is read from a checkout given as
--afl-bench (never a dependency of asyncfl, never copied here); the modules that file imports only to
run an experiment (its command line, wandb, the datasets) are stood in for, as its aggregation never
calls them. Both servers start from one model and take the same rounds of K arrivals (a random client,
a random staleness τ, a random update Δ); asyncfl's is `FedStaleWeight.aggregate_with_memory`. Run in
float64 on both sides, so that a difference is the rule's, not rounding's.

Twice: with a window longer than any client's history (where the two rules are one), then with the
authors' window of 5, where their tracker drops a client's newest τ and asyncfl's its oldest
(fl/algorithms/fedstaleweight.py): the rounds where the two part are counted.

    .venv/bin/python peers/fedstaleweight_afl_bench.py --afl-bench /path/to/afl-bench
"""

import argparse
import importlib.util
import logging
import sys
import types
from pathlib import Path

import torch

from asyncfl.fl.algorithms.fedstaleweight import FedStaleWeight
from asyncfl.fl.strategy import Update
from asyncfl.settings.config import make_config

ModelState = dict[str, torch.Tensor]


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--afl-bench", required=True, type=Path, help="a checkout of afl-bench (the folder of afl_bench/)"
    )
    parser.add_argument("--clients", type=int, default=6, help="N, the clients")
    parser.add_argument("--buffer", type=int, default=3, help="K, arrivals per aggregation")
    parser.add_argument("--rounds", type=int, default=40, help="aggregations compared")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def authors_module(checkout: Path, clients: int, buffer: int) -> types.ModuleType:
    """expected_staleness.py as its own file, its experiment-running imports stood in for."""
    sys.path.insert(0, str(checkout))
    agents = types.ModuleType("afl_bench.agents")
    agents.Strategy = lambda **fields: types.SimpleNamespace(**fields)  # type: ignore[attr-defined]
    utils = types.ModuleType("afl_bench.experiments.utils")
    settings = {"client_runtimes": [0.0] * clients, "buffer_size": buffer, "wait_for_full": True, "ms_to_wait": 0}
    utils.get_cmd_line_parser = lambda: {**settings, "model_info": None}  # type: ignore[attr-defined]
    utils.run_experiment = lambda **_: None  # type: ignore[attr-defined]
    sys.modules.update({"afl_bench.agents": agents, "afl_bench.experiments.utils": utils})
    path = checkout / "afl_bench/experiments/expected_staleness.py"
    spec = importlib.util.spec_from_file_location("expected_staleness", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    logging.disable(logging.INFO)  # its per-round lines
    return module


def compare(authors: types.ModuleType, args: argparse.Namespace, window: int) -> tuple[float, int]:
    """The largest |θ_asyncfl − θ_authors| over the rounds, and the rounds whose models differ by more
    than 1e-12, with both windows at `window`."""
    authors.staleness_tracker = authors.StalenessTracker(window_size=window)
    config = make_config({"algorithm": "fedstaleweight", "buffer_size": args.buffer, "staleness_window": window})
    strategy = FedStaleWeight(config)
    generator = torch.Generator().manual_seed(args.seed)
    names = ("layer.weight", "layer.bias")
    ours: ModelState = {name: torch.randn(3, 5, generator=generator, dtype=torch.float64) for name in names}
    theirs = [(name, value.clone()) for name, value in ours.items()]
    memory: dict = {}
    worst, parted = 0.0, 0
    for version in range(args.rounds):
        updates, arrivals = [], []
        for _ in range(args.buffer):
            client = int(torch.randint(args.clients, (), generator=generator))
            staleness = int(torch.randint(min(version, 6) + 1, (), generator=generator))
            start = {name: torch.randn(3, 5, generator=generator, dtype=torch.float64) for name in names}
            state = {name: start[name] + torch.randn(3, 5, generator=generator, dtype=torch.float64) for name in names}
            updates.append(Update(state, start, size=1, staleness_weight=1.0, staleness=staleness, client=client))
            arrivals.append((client, list(start.items()), list(state.items()), version - staleness))
        ours, _, memory = strategy.aggregate_with_memory(ours, updates, memory, args.clients)
        theirs = authors.aggregation_func((theirs, version), arrivals)
        gap = max(float((ours[name] - value).abs().max()) for name, value in theirs)
        worst, parted = max(worst, gap), parted + (gap > 1e-12)
        theirs = [(name, ours[name].clone()) for name, _ in theirs]  # each round from the same model
    return worst, parted


def main() -> None:
    args = arguments()
    authors = authors_module(args.afl_bench, args.clients, args.buffer)
    for window in (args.rounds * args.buffer, 5):
        worst, parted = compare(authors, args, window)
        print(
            f"FedStaleWeight, asyncfl against the authors' afl-bench: {args.rounds} rounds of K = {args.buffer} "
            f"over N = {args.clients} clients, window W = {window}: max |θ_asyncfl − θ_authors| = {worst:.3g} "
            f"({parted} rounds apart by more than 1e-12)"
        )


if __name__ == "__main__":
    main()
