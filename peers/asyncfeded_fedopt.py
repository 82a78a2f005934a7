"""AsyncFedED's server step beside FedOpt's, on the same arrivals: the largest difference of the global
models.

FedOpt's `FedOpt/src/Federation/AsyncFedED/AsyncFedED.py` (its `AsyncFedED.apply`, the only public
AsyncFedED: https://github.com/hugo94140/FedOpt; no authors' code is public) is read from a checkout given
as --fedopt (never a dependency of asyncfl, never copied here); the modules that file imports for its
datasets, timers and messages are stood in for (a message's state dicts are passed as they are). Both
servers start from one model and take the same arrivals, each an update Δ from a start model some
versions behind (τ drawn, the start the global model of then); asyncfl's is `AsyncFedED.aggregate`.
Run in float64 on both sides; each arrival starts both from the same model, since with steps η > 1 a
difference of rounding grows from one arrival to the next.

    .venv/bin/python peers/asyncfeded_fedopt.py --fedopt /path/to/FedOpt
"""

import argparse
import importlib.util
import logging
import sys
import types
from pathlib import Path

import torch

from asyncfl.fl.algorithms.asyncfeded import AsyncFedED
from asyncfl.fl.strategy import Update
from asyncfl.settings.config import make_config


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fedopt", required=True, type=Path, help="a checkout of FedOpt (the folder of FedOpt/)")
    parser.add_argument("--arrivals", type=int, default=200, help="arrivals compared, each a round")
    parser.add_argument("--lambda", dest="lam", type=float, default=0.1, help="λ (FedOpt's default)")
    parser.add_argument("--epsilon", type=float, default=1.0, help="ε (FedOpt's default)")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def fedopt_server(checkout: Path, lam: float, epsilon: float, model: torch.nn.Module):
    """FedOpt's AsyncFedED server as its own file defines it, on `model`, its imports stood in for."""
    stand_ins = {
        name: types.ModuleType(name)
        for name in ("FedOpt", "FedOpt.src", "FedOpt.src.Federation", "FedOpt.src.Federation.dataset",
                     "FedOpt.src.Federation.abstract", "FedOpt.src.Utils", "FedOpt.src.Utils.Decorators",
                     "FedOpt.src.Utils.Decorators.timer", "FedOpt.src.Communication",
                     "FedOpt.src.Communication.communication")
    }  # fmt: skip
    stand_ins["FedOpt.src.Federation.dataset"].MedMNIST = type("MedMNIST", (), {})  # type: ignore[attr-defined]
    abstract = stand_ins["FedOpt.src.Federation.abstract"]
    abstract.AbstractAggregation = abstract.AbstractModel = object  # type: ignore[attr-defined]
    stand_ins["FedOpt.src.Utils.Decorators.timer"].normal_timer = lambda f: f  # type: ignore[attr-defined]
    messages = stand_ins["FedOpt.src.Communication.communication"]
    messages.json_to_state_dict = lambda payload, device: payload  # type: ignore[attr-defined]
    for name in ("json_to_tensor_list", "state_dict_to_json", "tensor_list_to_json"):
        setattr(messages, name, lambda payload, *_: payload)
    sys.modules.update(stand_ins)
    path = checkout / "FedOpt/src/Federation/AsyncFedED/AsyncFedED.py"
    spec = importlib.util.spec_from_file_location("fedopt_asyncfeded", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    server = module.AsyncFedED.__new__(module.AsyncFedED)  # its state as __init__ sets it, without a dataset
    server.device, server.server_model = "cpu", types.SimpleNamespace(model=model)
    server.lambda_param, server.epsilon_param, server.gamma_bar_param, server.k_param = lam, epsilon, 5.0, 0.05
    server.global_epoch, server.new_rounds_dict = 0, {}
    return server


def main() -> None:
    args = arguments()
    torch.manual_seed(args.seed)
    torch.set_default_dtype(torch.float64)
    model = torch.nn.Linear(5, 3)
    peer = fedopt_server(args.fedopt, args.lam, args.epsilon, model)
    logging.disable(logging.INFO)  # FedOpt's line per aggregation
    config = make_config({"algorithm": "asyncfeded", "asyncfeded_lambda": args.lam, "asyncfeded_epsilon": args.epsilon})
    strategy = AsyncFedED(config)
    ours = {key: value.clone() for key, value in model.state_dict().items()}
    history, worst, steps = [ours], 0.0, []
    for arrival in range(args.arrivals):
        staleness = int(torch.randint(min(arrival, 8) + 1, ()))
        start = history[-1 - staleness]
        delta = {key: torch.randn_like(value) * float(torch.rand(())) for key, value in start.items()}
        update = Update({k: start[k] + delta[k] for k in start}, start, size=1, staleness_weight=1.0,
                        staleness=staleness, client=arrival % 7)  # fmt: skip
        ours, (step,) = strategy.aggregate(ours, [update])
        message = {"client_id": arrival % 7, "rounds": 5, "delta_model": delta, "old_model": start}
        peer.apply({"client": message})
        theirs = model.state_dict()
        worst = max(worst, *(float((ours[key] - theirs[key]).abs().max()) for key in ours))
        model.load_state_dict(ours)  # each arrival from the same model: a step of η > 1 amplifies rounding
        history.append(ours)
        steps.append(step)
    print(
        f"AsyncFedED, asyncfl against FedOpt: {args.arrivals} arrivals, τ up to 8, λ = {args.lam}, ε = {args.epsilon} "
        f"(steps η from {min(steps):.3g} to {max(steps):.3g}): max |θ_asyncfl − θ_FedOpt| = {worst:.3g}"
    )


if __name__ == "__main__":
    main()
