"""ACE's server step beside AsyncFlower's, on the same arrivals: the largest difference of the global models.

AsyncFlower's `src/asyncflower/strategy/fedstaleasync.py` (its `FedStaleAsync.aggregate_fit`, which its
`ACE` calls with every weight 1, a buffer of one and a participation probability of 1:
https://github.com/anon8281714-boop/FedStaleAsync at 70890fc; no authors' code is public) is read from a
checkout given as --asyncflower (never a dependency of asyncfl, never copied here) with its
`utils/prob_estimator.py`; its imports of Flower and of its scheduler are stood in for (Flower's
parameters are the arrays themselves). Its memory starts with a zero update from every client, as its
`full_participation_memory_initialization` leaves it after a first round at θ₀ whose updates are 0: it
then divides by N, as ACE's paper and asyncfl do (without it, by the clients heard from so far). Both
servers start from one model and take the same arrivals (a random client, a random update Δ, as
AsyncFlower's clients send it: θ_start − θ_c); asyncfl's is `ACE.aggregate_with_memory`. In float64.

    .venv/bin/python peers/ace_asyncflower.py --asyncflower /path/to/FedStaleAsync
"""

import argparse
import contextlib
import importlib.util
import io
import sys
import types
from pathlib import Path

import numpy as np
import torch

from asyncfl.fl.algorithms.ace import ACE
from asyncfl.fl.strategy import Update
from asyncfl.settings.config import make_config


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--asyncflower", required=True, type=Path, help="a checkout of FedStaleAsync at 70890fc")
    parser.add_argument("--clients", type=int, default=8, help="N, the clients")
    parser.add_argument("--arrivals", type=int, default=200, help="arrivals compared, each a round")
    parser.add_argument("--lr", type=float, default=0.7, help="η, the server's step")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def load(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def asyncflower_strategy(checkout: Path, lr: float):
    """AsyncFlower's FedStaleAsync as its `ACE` configures it, on its own file."""
    stand_ins = {name: types.ModuleType(name) for name in (
        "flwr", "flwr.common", "flwr.common.typing", "flwr.server", "flwr.server.client_manager",
        "flwr.server.client_proxy", "asyncflower", "asyncflower.strategy", "asyncflower.strategy.async_strategy",
        "asyncflower.utils", "asyncflower.utils.criterions")}  # fmt: skip
    typing = stand_ins["flwr.common.typing"]
    for name in ("Scalar", "Parameters", "FitIns", "FitRes", "EvaluateIns", "EvaluateRes", "NDArrays"):
        setattr(typing, name, object)
    stand_ins["flwr.common"].parameters_to_ndarrays = lambda arrays: arrays  # type: ignore[attr-defined]
    stand_ins["flwr.common"].ndarrays_to_parameters = lambda arrays: arrays  # type: ignore[attr-defined]
    stand_ins["flwr.server.client_manager"].ClientManager = object  # type: ignore[attr-defined]
    stand_ins["flwr.server.client_proxy"].ClientProxy = object  # type: ignore[attr-defined]
    stand_ins["asyncflower.strategy.async_strategy"].AsyncStrategy = object  # type: ignore[attr-defined]
    stand_ins["asyncflower.utils.criterions"].AvailableClientsCriterion = object  # type: ignore[attr-defined]
    sys.modules.update(stand_ins)
    estimators = load("asyncflower.utils.prob_estimator", checkout / "src/asyncflower/utils/prob_estimator.py")
    module = load("asyncflower_fedstaleasync", checkout / "src/asyncflower/strategy/fedstaleasync.py")
    return module.FedStaleAsync(  # the arguments ACE.__init__ passes (strategy/ace.py)
        concurrency=1, learning_rate=lr, alpha_staleness_weighting_fn=lambda staleness, cid: 1,
        beta_staleness_weighting_fn=lambda staleness, cid: 1, use_relative_data_size_weights=False,
        aggregation_value=1, aggregation_scheme="buffer_size",
        participation_prob_estimator=estimators.MaximumParticipationProbabilityEstimator(),
    )  # fmt: skip


def result(client: int, arrays: list[np.ndarray], round_: int) -> tuple[types.SimpleNamespace, types.SimpleNamespace]:
    """A client's proxy and FitRes as AsyncFlower's server reads them: its arrays, examples, round metrics."""
    metrics = {"cid": client, "server_round_start": round_, "server_round_end": round_}
    return types.SimpleNamespace(cid=client), types.SimpleNamespace(parameters=arrays, num_examples=10, metrics=metrics)


def main() -> None:
    args = arguments()
    torch.manual_seed(args.seed)
    torch.set_default_dtype(torch.float64)
    model = torch.nn.Linear(5, 3)
    keys = list(model.state_dict())
    ours = {key: value.clone() for key, value in model.state_dict().items()}
    theirs = [value.numpy().copy() for value in ours.values()]
    peer = asyncflower_strategy(args.asyncflower, args.lr)
    peer._busy_clients = set(range(args.clients))  # every client was dispatched once
    zeros = [np.zeros_like(array) for array in theirs]
    chatter = io.StringIO()  # its aggregate_fit prints its metrics and estimator on every call
    with contextlib.redirect_stdout(chatter):
        theirs, _ = peer.aggregate_fit(0, [result(c, zeros, 0) for c in range(args.clients)], [], theirs)
    strategy = ACE(make_config({"algorithm": "ace", "server_lr": args.lr}))
    memory: dict = {}
    worst = 0.0
    for round_ in range(1, args.arrivals + 1):
        client = int(torch.randint(args.clients, ()))
        start = {key: torch.randn_like(value) for key, value in ours.items()}
        delta = {key: torch.randn_like(value) for key, value in ours.items()}
        update = Update({key: start[key] + delta[key] for key in keys}, start, 10, 1.0, 0, client)
        ours, _, memory = strategy.aggregate_with_memory(ours, [update], memory, args.clients)
        peer._busy_clients.add(client)
        pseudo_gradient = [(-delta[key]).numpy() for key in keys]
        with contextlib.redirect_stdout(chatter):
            theirs, _ = peer.aggregate_fit(round_, [result(client, pseudo_gradient, round_)], [], theirs)
        worst = max(worst, *(float(np.abs(ours[key].numpy() - theirs[i]).max()) for i, key in enumerate(keys)))
    print(
        f"ACE, asyncfl against AsyncFlower: {args.arrivals} arrivals over N = {args.clients} clients, "
        f"η = {args.lr}: max |θ_asyncfl − θ_AsyncFlower| = {worst:.3g}"
    )


if __name__ == "__main__":
    main()
