"""FedAC's steps beside AFL-Lib's, on the same dispatches and arrivals: the largest difference of the
global models, and of the servers' control variates relative to their size (they grow).

AFL-Lib's `alg/fedac.py` (its `Client.run`, which corrects the trained model by the control variates and
renews the client's, and its `Server.aggregate`, the agreement-weighted Adam-like step every K arrivals;
commit b6dab18 of https://github.com/boyi-liu/AFL-Lib) is read from a checkout given as --afl-lib (never a
dependency of asyncfl, never copied here). AFL-Lib trains a client when it is sent, so here each dispatch
runs its `Client.run` (without the decorator that times it), whose `train` loads the client model this
script draws (the start plus a random update), and asyncfl is handed the same client model, learning
rate and the C its version was sent with (`FedAC.dispatch_snapshot`) when the update arrives. M clients
in flight, a random one of them arrives each time; every K arrivals both servers step. AFL-Lib's round
counter is started past K, so that its first buffer too compares updates with the global model's move
(its first K arrivals otherwise take the model itself: fl/algorithms/fedac.py). In float64. The control
variates feed back into every later correction, so the two sides' rounding grows with the arrivals (at
the defaults: 2e-16 after 15, 4e-15 after 60, 6e-13 after 150): compare short runs.

    .venv/bin/python peers/fedac_afllib.py --afl-lib /path/to/AFL-Lib
"""

import argparse
import random
import sys

import torch

from asyncfl.fl.algorithms.fedac import FedAC
from asyncfl.fl.strategy import Update
from asyncfl.settings.config import make_config


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--afl-lib", required=True, help="a checkout of AFL-Lib (the folder holding alg/)")
    parser.add_argument("--clients", type=int, default=8, help="N, the clients")
    parser.add_argument("--concurrency", type=int, default=4, help="M, clients in flight")
    parser.add_argument("--buffer", type=int, default=3, help="K, arrivals per aggregation")
    parser.add_argument("--arrivals", type=int, default=60)
    parser.add_argument("--parameters", type=int, default=20, help="entries of the model")
    parser.add_argument("--epochs", type=int, default=2, help="E, the clients' local epochs")
    parser.add_argument("--lr", type=float, default=0.05, help="γ, the clients' learning rate")
    parser.add_argument("--server-lr", type=float, default=0.01, help="η, both servers' step")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


class Held:
    """A model that is one vector, with AFL-Lib's flattening of it."""

    def __init__(self, values: torch.Tensor):
        self.values = values.clone()

    def model2tensor(self) -> torch.Tensor:
        return self.values.clone()

    def tensor2model(self, tensor: torch.Tensor) -> None:
        self.values = tensor.clone()


def afl_lib_client(client_class: type, server, args: argparse.Namespace, size: int):
    """AFL-Lib's FedAC client as its __init__ sets it (C = 0), its model a `Held` vector, its `train` loading
    `client.trained`."""
    client = client_class.__new__(client_class)
    held = Held(torch.zeros(args.parameters))
    client.model2tensor, client.tensor2model = held.model2tensor, held.tensor2model
    client.C, client.lr, client.epoch, client.server = torch.zeros(args.parameters), args.lr, args.epochs, server
    client.train = lambda: held.tensor2model(client.trained)
    return client


def main() -> None:
    args = arguments()
    sys.path.insert(0, args.afl_lib)
    from alg.fedac import Client, Server  # AFL-Lib's FedAC

    torch.set_default_dtype(torch.float64)
    generator, draw = torch.Generator().manual_seed(args.seed), random.Random(args.seed)
    server = Server.__new__(Server)  # the server's state as its __init__ sets it, without clients
    held = Held(torch.randn(args.parameters, generator=generator))
    server.model2tensor, server.tensor2model = held.model2tensor, held.tensor2model
    server.C, server.m, server.v = (torch.zeros(args.parameters) for _ in range(3))
    server.beta1, server.beta2, server.eta_g, server.buffer_size, server.epsilon = (
        0.6,
        0.9,
        args.server_lr,
        args.buffer,
        1e-8,
    )
    server.dW_buffer, server.dC_buffer, server.prev_model_buffer, server.round = [], [], [], args.buffer + 1
    clients = [afl_lib_client(Client, server, args, 10) for _ in range(args.clients)]
    settings = {
        "algorithm": "fedac",
        "buffer_size": args.buffer,
        "local_epochs": args.epochs,
        "fedac_lr": args.server_lr,
    }
    strategy = FedAC(make_config(settings))
    ours, memory, buffer, in_flight = {"w": held.model2tensor()}, {}, [], {}

    def dispatch(client: int) -> None:
        start = ours["w"].clone()
        peer = clients[client]
        peer.tensor2model(start)  # AFL-Lib's downlink, then its training at once
        peer.trained = start + torch.randn(args.parameters, generator=generator)
        Client.run.__wrapped__(peer)  # its rule without the decorator that times it (from files of its own)
        in_flight[client] = (start, peer.trained, strategy.dispatch_snapshot(memory))

    for client in draw.sample(range(args.clients), args.concurrency):
        dispatch(client)
    worst = worst_control = 0.0
    for _ in range(args.arrivals):
        client = draw.choice(sorted(in_flight))
        start, trained, sent = in_flight.pop(client)
        server.cur_client = clients[client]
        server.aggregate()
        server.round += 1
        if len(server.dW_buffer) >= server.buffer_size:  # AFL-Lib's update_status empties its buffers
            server.dW_buffer, server.dC_buffer, server.prev_model_buffer = [], [], []
        buffer.append(Update({"w": trained}, {"w": start}, 10, 1.0, 0, client, (args.lr,), sent))
        if len(buffer) == args.buffer:
            ours, _, memory = strategy.aggregate_with_memory(ours, buffer, memory, args.clients)
            buffer = []
            worst = max(worst, float((ours["w"] - held.model2tensor()).abs().max()))
            gap = (memory["control"]["w"] - server.C).abs().max() / server.C.abs().max().clamp(min=1e-300)
            worst_control = max(worst_control, float(gap))
        dispatch(draw.choice([other for other in range(args.clients) if other not in in_flight]))
    print(
        f"FedAC, asyncfl against AFL-Lib: {args.arrivals} arrivals of M = {args.concurrency} over N = {args.clients}, "
        f"K = {args.buffer}, E = {args.epochs}, γ = {args.lr}, η = {args.server_lr}: max |θ_asyncfl − θ_AFL-Lib| = "
        f"{worst:.3g}, max |C_asyncfl − C_AFL-Lib| / max |C_AFL-Lib| = {worst_control:.3g}"
    )


if __name__ == "__main__":
    main()
