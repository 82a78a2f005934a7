"""PORT's server step beside Plato's, on the same arrivals: the largest difference of the global models.

Plato's `examples/async/port/port_server.py` (its `Server.aggregate_deltas` and `cosine_similarity`, at
60d6779a of https://github.com/TL-System/plato, the PORT authors' group; the newer
`servers/strategies/aggregation/port.py` has the same arithmetic) is read from a checkout given as --plato
(never a dependency of asyncfl, never copied here); its base server and `Config` are stood in for (the
settings of its PORT example: similarity weight 1, staleness weight 3, staleness bound 10). As its
`weights_aggregated` does, the global model after aggregation r is written as model_r.pth, read back
two aggregations later; θ₀ is written as model_0.pth too (Plato's server writes models only after an
aggregation, so there its second aggregation takes every similarity as 1). Both servers start from one
model and take the same rounds of K arrivals (a random client model, size and staleness τ ∈ 0..4);
asyncfl's is `PORT.aggregate_with_memory`. In float64.

    .venv/bin/python peers/port_plato.py --plato /path/to/plato
"""

import argparse
import asyncio
import importlib.util
import sys
import tempfile
import types
from pathlib import Path

import torch

from asyncfl.fl.algorithms.port import PORT
from asyncfl.fl.strategy import Update
from asyncfl.settings.config import make_config


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plato", required=True, type=Path, help="a checkout of Plato at 60d6779a")
    parser.add_argument("--buffer", type=int, default=4, help="K, arrivals per aggregation")
    parser.add_argument("--rounds", type=int, default=60, help="aggregations compared")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def plato_server(checkout: Path, model_path: str):
    """Plato's PORT server as its own file defines it, with its example's settings."""
    settings = types.SimpleNamespace(
        server=types.SimpleNamespace(similarity_weight=1, staleness_weight=3, staleness_bound=10),
        params={"model_path": model_path},
    )
    stand_ins = {name: types.ModuleType(name) for name in ("plato", "plato.config", "plato.servers")}
    stand_ins["plato.config"].Config = lambda: settings  # type: ignore[attr-defined]
    stand_ins["plato.servers"].fedavg = types.SimpleNamespace(Server=object)  # type: ignore[attr-defined]
    sys.modules.update(stand_ins)
    path = checkout / "examples/async/port/port_server.py"
    spec = importlib.util.spec_from_file_location("plato_port_server", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Server()


def main() -> None:
    args = arguments()
    torch.manual_seed(args.seed)
    torch.set_default_dtype(torch.float64)
    model = torch.nn.Linear(5, 3)
    strategy = PORT(make_config({"algorithm": "port", "buffer_size": args.buffer}))
    ours = {key: value.clone() for key, value in model.state_dict().items()}
    memory: dict = {}
    worst, similar = 0.0, 0
    with tempfile.TemporaryDirectory() as models:
        peer = plato_server(args.plato, models)
        peer.trainer = types.SimpleNamespace(model=model, zeros=torch.zeros)
        torch.save(model.state_dict(), f"{models}/model_0.pth")
        for round_ in range(1, args.rounds + 1):
            states = [{key: value + torch.randn_like(value) for key, value in ours.items()} for _ in range(args.buffer)]
            sizes = [int(torch.randint(5, 50, ())) for _ in states]
            stale = [int(torch.randint(0, 5, ())) for _ in states]
            similar += sum(tau > 1 for tau in stale) if round_ > 1 else 0
            updates = [
                Update(state, ours, size, 1.0, tau, i)
                for i, (state, size, tau) in enumerate(zip(states, sizes, stale, strict=True))
            ]
            peer.current_round = round_
            reports = [
                types.SimpleNamespace(report=types.SimpleNamespace(num_samples=n), staleness=t)
                for n, t in zip(sizes, stale, strict=True)
            ]
            deltas = [{key: state[key] - value for key, value in model.state_dict().items()} for state in states]
            step = asyncio.run(peer.aggregate_deltas(reports, deltas))
            model.load_state_dict({key: value + step[key] for key, value in model.state_dict().items()})
            torch.save(model.state_dict(), f"{models}/model_{round_}.pth")
            ours, _, memory = strategy.aggregate_with_memory(ours, updates, memory, 8)
            worst = max(worst, *(float((ours[key] - value).abs().max()) for key, value in model.state_dict().items()))
    print(
        f"PORT, asyncfl against Plato: {args.rounds} rounds of K = {args.buffer} ({similar} updates weighted by "
        f"their similarity): max |θ_asyncfl − θ_Plato| = {worst:.3g}"
    )


if __name__ == "__main__":
    main()
