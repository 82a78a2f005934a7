"""DAAFL's steps beside AFL-Lib's, on the same arrivals: the largest difference of the global models.

AFL-Lib's `alg/daafl.py` (its `Server.aggregate`; commit b6dab18 of https://github.com/boyi-liu/AFL-Lib) is
read from a checkout given as --afl-lib (never a dependency of asyncfl, never copied here). Its server is
made as its __init__ makes it (v = 0, every client's weight sum 0, the clients' shares of the samples),
its model one parameter vector. M clients are in flight; at each arrival, a random one of them, its
client's model is the model it was sent plus a random update; both servers step (asyncfl:
`DAAFL.aggregate_with_memory`, AFL-Lib: its `aggregate` on that client), and the client is sent the new
global model. Clients have different sample counts. In float64.

    .venv/bin/python peers/daafl_afllib.py --afl-lib /path/to/AFL-Lib
"""

import argparse
import random
import sys
from types import SimpleNamespace

import numpy as np
import torch

from asyncfl.fl.algorithms.daafl import DAAFL
from asyncfl.fl.strategy import Update
from asyncfl.settings.config import make_config


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--afl-lib", required=True, help="a checkout of AFL-Lib (the folder holding alg/)")
    parser.add_argument("--clients", type=int, default=6, help="N, the clients")
    parser.add_argument("--concurrency", type=int, default=3, help="M, clients in flight")
    parser.add_argument("--arrivals", type=int, default=200, help="arrivals compared (each an aggregation)")
    parser.add_argument("--parameters", type=int, default=20, help="entries of the model")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def main() -> None:
    args = arguments()
    sys.path.insert(0, args.afl_lib)
    from alg.daafl import Server  # AFL-Lib's DAAFL

    torch.set_default_dtype(torch.float64)
    generator = torch.Generator().manual_seed(args.seed)
    draw = random.Random(args.seed)
    sizes = [10 + 7 * client for client in range(args.clients)]
    clients = [SimpleNamespace(id=client, data_volume=size) for client, size in enumerate(sizes)]
    server = Server.__new__(Server)  # its __init__'s own state, without the rest of AFL-Lib's server
    server.clients, server.v, server.alpha_sum = clients, 0, [0 for _ in clients]
    server.data_ratios = [c.data_volume / sum(c.data_volume for c in clients) for c in clients]
    server.held = torch.randn(args.parameters, generator=generator)
    server.model2tensor = lambda: server.held.clone()
    server.tensor2model = lambda tensor: setattr(server, "held", tensor.clone())
    strategy = DAAFL(make_config({"algorithm": "daafl"}))
    memory = strategy.initial_memory(np.array(sizes))
    ours = {"w": server.held.clone()}
    in_flight = {client: ours["w"].clone() for client in draw.sample(range(args.clients), args.concurrency)}
    worst, weights = 0.0, []
    for _ in range(args.arrivals):
        client = draw.choice(sorted(in_flight))
        start = in_flight.pop(client)
        trained = start + torch.randn(args.parameters, generator=generator)
        clients[client].model2tensor = lambda trained=trained: trained.clone()
        server.cur_client = clients[client]
        server.aggregate()
        update = Update({"w": trained}, {"w": start}, sizes[client], 1.0, 0, client)
        ours, coefficients, memory = strategy.aggregate_with_memory(ours, [update], memory, args.clients)
        weights += coefficients
        worst = max(worst, float((ours["w"] - server.held).abs().max()))
        idle = [other for other in range(args.clients) if other not in in_flight]
        in_flight[draw.choice(idle)] = ours["w"].clone()
    print(
        f"DAAFL, asyncfl against AFL-Lib: {args.arrivals} arrivals of M = {args.concurrency} in flight over "
        f"N = {args.clients} clients: max |θ_asyncfl − θ_AFL-Lib| = {worst:.3g}; weights α in "
        f"[{min(weights):.3g}, {max(weights):.3g}], the sums A_c equal to {max_gap(memory, server):.3g}"
    )


def max_gap(memory: dict, server: object) -> float:
    """The largest difference between the two servers' weight sums A_c."""
    ours = memory["weights"]
    return max(abs(ours.get(client, 0.0) - theirs) for client, theirs in enumerate(server.alpha_sum))  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
