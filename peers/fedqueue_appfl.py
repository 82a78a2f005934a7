"""FedQueue's rounds beside APPFL's example, on the same clients and delays: the largest difference of
the global models, and of every round's local steps and step sizes.

APPFL's `examples/QFL` (its `QueueAsyncFL.run`, `utils/`; commit b9fdb2c of https://github.com/APPFL/APPFL)
is read from a checkout given as --qfl (the folder holding algorithms/ and utils/; never a dependency of
asyncfl, never copied here). It runs as written, with what it needs around it: a server and clients
whose `train()` moves their model by −η·E·g (g a fixed random direction per client and round, E and η
the steps and step size the example set), a clock that the warm-up's `train()` advances by its steps over
the client's rate (so the example measures c_k exactly) and that its sleeps leave alone, the delays from
a file (its `per_round_file` queue), equal client weights and no slowdown (its defaults). Its
`builders.appfl_builders` builds APPFL agents and is not needed: its `ensure_client_ready` is given as a
function that accepts the ready clients; `omegaconf`, imported and unused by `run`, likewise.

asyncfl's `FedQueue` gets the same rates (`dispatch_work`), steps its clients the same way from the
same global model, and aggregates with each update's delay (`aggregate_with_memory`). In float64.

    .venv/bin/python peers/fedqueue_appfl.py --qfl /path/to/APPFL/examples/QFL
"""

import argparse
import json
import sys
import tempfile
import types
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from asyncfl.fl.algorithms.fedqueue import FedQueue
from asyncfl.fl.strategy import Update
from asyncfl.settings.config import make_config


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--qfl", required=True, help="APPFL's examples/QFL folder")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--parameters", type=int, default=20, help="entries of the model")
    parser.add_argument("--delay-sigma", type=float, default=0.8, help="σ of the lognormal delays (wider: more late)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--our-slack", type=float, default=0.2, help="asyncfl's α (another than 0.2: the check bites)")
    return parser.parse_args()


class Clock:
    """The example's `time`: the warm-up's training advances it; its sleeps and the rounds' training not
    (they run in threads; only the warm-up's times are read)."""

    def __init__(self) -> None:
        self.now = 0.0

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        return None


class Client:
    """A client of the example: its model θ ← θ − η·E·g at each `train()`, g its direction of the call."""

    def __init__(self, index: int, rate: float, directions: torch.Tensor, clock: Clock):
        self.index, self.rate, self.directions, self.clock = index, rate, directions, clock
        self.trainer = SimpleNamespace(train_configs=SimpleNamespace(mode="step", num_local_steps=0, lr=None))
        self.calls, self.model = 0, None

    def load_parameters(self, state: dict) -> None:
        self.model = {key: value.clone() for key, value in state.items()}

    def train(self) -> None:
        steps, lr = self.trainer.train_configs.num_local_steps, self.trainer.train_configs.lr
        if self.calls == 0:  # the warm-up: its time is its steps at the client's rate
            self.clock.now += steps / self.rate
        else:
            self.model = {"w": self.model["w"] - lr * steps * self.directions[self.calls - 1]}
        self.calls += 1

    def get_parameters(self) -> dict:
        return self.model


class Server:
    def __init__(self, state: dict):
        self.state = state

    def get_parameters(self, serial_run: bool = False) -> dict:
        return self.state

    def set_parameters(self, state: dict) -> None:
        self.state = state


def appfl_run(args: argparse.Namespace, rates: list[float], directions: torch.Tensor, delays: np.ndarray,
              start: torch.Tensor, folder: Path) -> torch.Tensor:  # fmt: skip
    """The example's run on these clients and delays; its final global model."""
    sys.path.insert(0, args.qfl)
    sys.modules.setdefault("omegaconf", types.SimpleNamespace(OmegaConf=None))  # type: ignore[arg-type]
    sys.modules["builders"] = types.ModuleType("builders")
    builders = types.ModuleType("builders.appfl_builders")
    builders.ensure_client_ready = lambda client: None  # type: ignore[attr-defined]
    sys.modules["builders.appfl_builders"] = builders
    import algorithms.queue_async as queue_async  # APPFL's example

    clock = Clock()
    queue_async.time = clock  # type: ignore[assignment]
    names = [f"C{index}" for index in range(args.clients)]
    table = {str(r + 1): [float(q) for q in delays[r]] for r in range(args.rounds)}
    (folder / "queue.json").write_text(json.dumps(table))
    cfg = SimpleNamespace(
        system=SimpleNamespace(num_rounds=args.rounds, seed=args.seed),
        logging=SimpleNamespace(output_dir=str(folder / "out")),
        algo=SimpleNamespace(broadcast_when="next_round", validate_on_client_id="none"),
        case2=SimpleNamespace(Tsync=10.0, q_init=0.0, alpha=0.2, theta=2.0, beta=0.5, warmup_steps=10),
        queue=SimpleNamespace(
            sim_queue="per_round_file", queue_file=str(folder / "queue.json"), slowdown=",".join(["1.0"] * args.clients)
        ),  # fmt: skip
        aggregation=SimpleNamespace(staleness_mode="harmonic", staleness_gamma=0.5, client_weight_mode="equal"),
        optim=SimpleNamespace(lr_base=0.003, lr_clip_lo=0.25, lr_clip_hi=4.0),
    )
    clients = {name: Client(index, rates[index], directions[index], clock) for index, name in enumerate(names)}
    server = Server({"w": start.clone()})
    queue_async.QueueAsyncFL(cfg, server, clients, names).run()
    return server.state["w"]


def asyncfl_run(args: argparse.Namespace, rates: list[float], directions: torch.Tensor, delays: np.ndarray,
                start: torch.Tensor) -> torch.Tensor:  # fmt: skip
    """asyncfl's FedQueue on the same clients and delays (the example's settings); its final model."""
    config = make_config(
        {"algorithm": "fedqueue", "clients_per_round": args.clients, "gamma0": 0.003, "fedqueue_slack": args.our_slack}
    )
    strategy = FedQueue(config)
    memory = strategy.initial_memory(np.ones(args.clients))
    model = {"w": start.clone()}
    clients = list(range(args.clients))
    warm = [10 / (10 / rate) for rate in rates]  # the example's c_k: its warm-up's steps over their time
    for r in range(args.rounds):
        work = strategy.dispatch_work(clients, memory, warm, [10**9] * args.clients)
        updates = []
        for client, (steps, factor) in enumerate(work):
            lr = 0.003 * factor
            state = {"w": model["w"] - lr * steps * directions[client][r]}
            updates.append(Update(state, model, 1, 1.0, 0, client, (lr,), {}, float(delays[r][client])))
        model, _, memory = strategy.aggregate_with_memory(model, updates, memory, args.clients)
    return model["w"]


def main() -> None:
    args = arguments()
    torch.set_default_dtype(torch.float64)
    generator = torch.Generator().manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    rates = [float(rate) for rate in rng.uniform(2.0, 40.0, args.clients)]  # steps a second
    directions = torch.randn(args.clients, args.rounds, args.parameters, generator=generator)
    delays = rng.lognormal(np.log(rng.uniform(0.3, 4.0, args.clients)), args.delay_sigma, (args.rounds, args.clients))
    start = torch.randn(args.parameters, generator=generator)
    with tempfile.TemporaryDirectory() as folder:
        theirs = appfl_run(args, rates, directions, delays, start, Path(folder))
        late = sum(1 for line in (Path(folder) / "out/logs/round_metrics.csv").read_text().splitlines()
                   if line.split(",")[2:3] == ["0"])  # fmt: skip
    ours = asyncfl_run(args, rates, directions, delays, start)
    moved = float((theirs - start).abs().max())
    print(f"{args.rounds} rounds of {args.clients} clients, {late} updates deferred: "
          f"max |θ − θ_APPFL| = {float((ours - theirs).abs().max()):.3g} (the model moved {moved:.3g})")  # fmt: skip


if __name__ == "__main__":
    main()
