"""FADAS's server step beside AFL-Lib's, on the same buffers: where the two rules agree and where not.

AFL-Lib's `alg/fadas.py` (its `Server._perform_global_update`, run as AFL-Lib's asynchronous server
runs it once its buffer holds M updates) is read from a checkout given as --afl-lib (never a dependency
of asyncfl, never copied here). Both servers start from one model and take the same buffers of client
updates Δ with their staleness; asyncfl steps as a `fadas` run does (`fl.algorithms.fedbuff.fedbuff_update`
with s(τ) = 1 and η_g = 1, then `fl.server_optimizer`'s AMSGrad with the delay-adaptive step), AFL-Lib
as its code does. Three cases, each the largest absolute difference of the two global models:

- agree: updates along one direction, growing every round (so v never falls and v̂ = v), every
  τ ≤ τ_c, τ and ε both 1e-10 (v from τ² beside 0 then differs by 1e-20): the two rules are one, and
  differ only by rounding;
- v falls: the same, shrinking every round, so the paper's √v̂ (asyncfl) and AFL-Lib's √v part;
- stale: a τ_max > τ_c in every buffer, where the paper's box steps min(η, 1/τ_max) and AFL-Lib η/τ_max.

    .venv/bin/python peers/fadas_afllib.py --afl-lib /path/to/AFL-Lib
"""

import argparse
import sys
from types import SimpleNamespace

import torch

from asyncfl.fl.algorithms.fedbuff import fedbuff_update
from asyncfl.fl.server_optimizer import ServerOptimizer
from asyncfl.settings.config import make_config

CASES = {"agree": (1.05, False), "v falls": (0.8, False), "stale": (1.05, True)}  # growth per round, stale


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--afl-lib", required=True, help="a checkout of AFL-Lib (the folder holding alg/)")
    parser.add_argument("--buffer", type=int, default=4, help="M (FADAS's K), updates per aggregation")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--parameters", type=int, default=50, help="entries of the model")
    parser.add_argument("--lr", type=float, default=0.01, help="η, both servers' step (AFL-Lib's default)")
    parser.add_argument("--delay-threshold", type=int, default=5, help="τ_c (AFL-Lib's default)")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def compare(args: argparse.Namespace, server_class: type, growth: float, stale: bool) -> float:
    """The largest |θ_asyncfl − θ_AFL-Lib| over the rounds of one case."""
    generator = torch.Generator().manual_seed(args.seed)
    start = torch.randn(args.parameters, generator=generator, dtype=torch.float64)
    settings = {"algorithm": "fadas", "server_optimizer_lr": args.lr, "server_beta1": 0.9}
    settings |= {"server_beta2": 0.999, "server_tau": 1e-10, "delay_threshold": args.delay_threshold}
    ours = ServerOptimizer.of(make_config(settings), ["w"])
    assert ours is not None
    peer = server_class.__new__(server_class)  # the server's state as its __init__ sets it, without clients
    peer.buffer, peer.buffer_delays, peer.m, peer.v, peer.v_hat, peer.M = [], [], None, None, None, args.buffer
    peer.beta1, peer.beta2, peer.epsilon, peer.eta, peer.tau_c = 0.9, 0.999, 1e-10, args.lr, args.delay_threshold
    held = SimpleNamespace(model=start.clone())
    peer.model2tensor = lambda: held.model.clone()
    peer.tensor2model = lambda tensor: setattr(held, "model", tensor.clone())
    direction = torch.randn(args.parameters, generator=generator, dtype=torch.float64)
    model, moments, worst = {"w": start.clone()}, {}, 0.0
    for round_ in range(args.rounds):
        scales = 1.0 + torch.rand(args.buffer, generator=generator, dtype=torch.float64)
        updates = [growth**round_ * scale * direction for scale in scales]  # |Δ| grows (or falls) every round
        delays = [int(d) for d in torch.randint(0, args.delay_threshold + 1, (args.buffer,), generator=generator)]
        if stale:
            delays[0] = args.delay_threshold + 1 + round_ % 20  # τ_max over τ_c, below 1/η
        peer.buffer, peer.buffer_delays = list(updates), list(delays)
        peer._perform_global_update()
        states = [{"w": model["w"] + update} for update in updates]
        aggregate, _ = fedbuff_update(model, states, [model] * len(states), [1.0] * len(states), 1.0)
        model, moments = ours.step(model, aggregate, moments, max(delays))
        worst = max(worst, float((model["w"] - held.model).abs().max()))
    return worst


def main() -> None:
    args = arguments()
    sys.path.insert(0, args.afl_lib)
    from alg.fadas import Server  # AFL-Lib's FADAS server

    for case, (growth, stale) in CASES.items():
        worst = compare(args, Server, growth, stale)
        print(
            f"FADAS, asyncfl against AFL-Lib, {case}: {args.rounds} rounds of M = {args.buffer}, η = {args.lr}, "
            f"τ_c = {args.delay_threshold}: max |θ_asyncfl − θ_AFL-Lib| = {worst:.3g}"
        )


if __name__ == "__main__":
    main()
