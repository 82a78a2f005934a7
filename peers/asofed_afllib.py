"""ASO-Fed's steps beside AFL-Lib's, on the same arrivals: the largest difference of the global models.

AFL-Lib's `alg/asofed.py` (its `Client.train`, which computes the upload ζ from the client's progress,
and its `Server.aggregate`; commit b6dab18 of https://github.com/boyi-liu/AFL-Lib) is read from a
checkout given as --afl-lib (never a dependency of asyncfl, never copied here). Its clients train one
batch whose optimizer step sets the model to the trained weights this script draws (the progress is what
ASO-Fed's rule reads; AFL-Lib's proximal term is taken on detached weights, so it moves no gradient and
plays no part). M clients are in flight; at each arrival, a random one of them, its client's model is
the model it was sent plus a random update; both servers step (asyncfl: `ASOFed.aggregate_with_memory`,
AFL-Lib: its client's ζ, then its server's step by n_c/n), and the client is sent the new global model.
Clients have different sample counts. In float64.

    .venv/bin/python peers/asofed_afllib.py --afl-lib /path/to/AFL-Lib
"""

import argparse
import random
import sys
from types import SimpleNamespace

import numpy as np
import torch

from asyncfl.fl.algorithms.asofed import ASOFed
from asyncfl.fl.strategy import Update
from asyncfl.settings.config import make_config


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--afl-lib", required=True, help="a checkout of AFL-Lib (the folder holding alg/)")
    parser.add_argument("--clients", type=int, default=6, help="N, the clients")
    parser.add_argument("--concurrency", type=int, default=3, help="M, clients in flight")
    parser.add_argument("--arrivals", type=int, default=200, help="arrivals compared (each an aggregation)")
    parser.add_argument("--parameters", type=int, default=20, help="entries of the model")
    parser.add_argument("--beta", type=float, default=0.5, help="β, both sides' (AFL-Lib's default)")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


class Vector(torch.nn.Module):
    """A model that is one parameter vector."""

    def __init__(self, values: torch.Tensor):
        super().__init__()
        self.w = torch.nn.Parameter(values.clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * self.w).sum()


def afl_lib_client(client_class: type, beta: float, samples: int):
    """AFL-Lib's client as its __init__ sets it (no data, no args), its model a `Vector`, one batch a
    round whose optimizer step loads `client.trained`."""
    client = client_class.__new__(client_class)
    client.prev_s_grad, client.h, client.lam, client.beta, client.epoch, client.metric = None, None, 0.01, beta, 1, {}
    client.model = Vector(torch.zeros(1))
    client.dataset_train = range(samples)
    client.loader_train = [(torch.zeros(1), torch.zeros(1))]
    client.preprocess = lambda data: data
    client.loss_func = lambda predictions, _: predictions * 0.0
    client.model2tensor = lambda: client.model.w.detach().clone()
    client.tensor2model = lambda tensor: client.model.w.data.copy_(tensor)
    client.optim = SimpleNamespace(zero_grad=lambda: None, step=lambda: client.tensor2model(client.trained))
    return client


def main() -> None:
    args = arguments()
    sys.path.insert(0, args.afl_lib)
    from alg.asofed import Client, Server  # AFL-Lib's ASO-Fed

    torch.set_default_dtype(torch.float64)
    generator = torch.Generator().manual_seed(args.seed)
    draw = random.Random(args.seed)
    sizes = [10 + 7 * client for client in range(args.clients)]
    clients = [afl_lib_client(Client, args.beta, size) for size in sizes]
    server = Server.__new__(Server)
    server.clients, server.held = clients, torch.randn(args.parameters, generator=generator)
    server.model2tensor = lambda: server.held.clone()
    server.tensor2model = lambda tensor: setattr(server, "held", tensor.clone())
    strategy = ASOFed(make_config({"algorithm": "asofed", "asofed_beta": args.beta}))
    memory = strategy.initial_memory(np.array(sizes))
    ours = {"w": server.held.clone()}
    in_flight = {client: ours["w"].clone() for client in draw.sample(range(args.clients), args.concurrency)}
    worst = 0.0
    for _ in range(args.arrivals):
        client = draw.choice(sorted(in_flight))
        start = in_flight.pop(client)
        trained = start + torch.randn(args.parameters, generator=generator)
        peer = clients[client]
        peer.model.w = torch.nn.Parameter(start.clone())  # AFL-Lib's downlink: the model it was sent
        peer.trained = trained
        peer.train()
        server.cur_client = peer
        server.aggregate()
        update = Update({"w": trained}, {"w": start}, sizes[client], 1.0, 0, client)
        ours, _, memory = strategy.aggregate_with_memory(ours, [update], memory, args.clients)
        worst = max(worst, float((ours["w"] - server.held).abs().max()))
        idle = [other for other in range(args.clients) if other not in in_flight]
        in_flight[draw.choice(idle)] = ours["w"].clone()
    print(
        f"ASO-Fed, asyncfl against AFL-Lib: {args.arrivals} arrivals of M = {args.concurrency} in flight over "
        f"N = {args.clients} clients, β = {args.beta}: max |θ_asyncfl − θ_AFL-Lib| = {worst:.3g}"
    )


if __name__ == "__main__":
    main()
