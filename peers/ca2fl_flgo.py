"""CA2FL's server step beside FLGo's, on the same arrivals: the largest difference of the global models.

FLGo's `flgo/algorithm/ca2fl.py` (its `Server.package_handler`, the update rule as an asynchronous
FLGo server runs it) is read from a checkout of FLGo given as --flgo (never a dependency of asyncfl,
never copied here). Both servers start from one model and take the same stream of client updates Δ,
one arrival at a time; every K arrivals each aggregates (asyncfl: `fl.algorithms.ca2fl.calibrated_update`
with s(τ) = 1, CA2FL's own), and the script prints the largest absolute difference of the two global
models over every round. Run in float64 on both sides, so that a difference is the rule's, not rounding's.

    .venv/bin/python peers/ca2fl_flgo.py --flgo /path/to/easyFL
"""

import argparse
import sys

import torch

from asyncfl.fl.algorithms.ca2fl import calibrated_update

ModelState = dict[str, torch.Tensor]


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flgo", required=True, help="a checkout of FLGo (the folder holding flgo/)")
    parser.add_argument("--clients", type=int, default=6, help="n, the clients the caches cover")
    parser.add_argument("--buffer", type=int, default=3, help="K, arrivals per aggregation")
    parser.add_argument("--rounds", type=int, default=20, help="aggregations compared")
    parser.add_argument("--server-lr", type=float, default=1.5, help="η, the server's step")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def main() -> None:
    args = arguments()
    sys.path.insert(0, args.flgo)
    from flgo.algorithm.ca2fl import Server  # FLGo's CA2FL server
    from flgo.utils.fmodule import FModule

    class Model(FModule):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(5, 3)

    torch.manual_seed(args.seed)
    torch.set_default_dtype(torch.float64)  # FLGo makes its sums' models afresh, in the default dtype
    peer = Server.__new__(Server)  # the server's state as its `initialize` sets it, without a task
    peer.model = Model()
    peer.buffer, peer.device, peer.num_clients = [], "cpu", args.clients
    peer.hs = [torch.tensor(0.0) for _ in range(args.clients)]
    peer.ht, peer.delta = torch.tensor(0.0), peer.model.zeros_like()
    peer.buffer_ratio, peer.eta = args.buffer / args.clients, args.server_lr
    ours: ModelState = {key: value.clone() for key, value in peer.model.state_dict().items()}
    cache: dict[int, ModelState] = {}
    zeros = {key: torch.zeros_like(value) for key, value in ours.items()}
    worst, repeated = 0.0, 0
    for _ in range(args.rounds):
        arrivals = []
        for _ in range(args.buffer):
            client = int(torch.randint(args.clients, ()))
            update = Model()
            with torch.no_grad():
                for parameter in update.parameters():
                    parameter.normal_()
            repeated += any(client == earlier for earlier, *_ in arrivals)
            arrivals.append((client, {k: v.clone() for k, v in update.state_dict().items()}, zeros, 1.0))
            aggregated = peer.package_handler({"model": [update], "__cid": [client]})
        assert aggregated, "FLGo's server did not aggregate after K arrivals"
        ours, _, cache = calibrated_update(ours, arrivals, cache, args.clients, args.server_lr)
        theirs = peer.model.state_dict()
        worst = max(worst, *(float((ours[key] - theirs[key]).abs().max()) for key in ours))
    print(
        f"CA2FL, asyncfl against FLGo: {args.rounds} rounds of K = {args.buffer} over n = {args.clients} clients "
        f"({repeated} arrivals from a client already in its buffer), η = {args.server_lr}: "
        f"max |θ_asyncfl − θ_FLGo| = {worst:.3g}"
    )


if __name__ == "__main__":
    main()
