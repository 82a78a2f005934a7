"""FedASMU beside the public transcription asyncfl follows, on the same arrivals and requests: the largest
difference of the global models, of the server's weights α and of the devices' merged models.

The transcription (wangpengyu2004/AFVLM_CM, `code/afl_vlm/methods/fedasmu.py`, commit 24c2b011; no
authors' code is public) is read from a checkout given as --afvlm (the folder holding `code/`; never a
dependency of asyncfl, never copied here) and runs as written: its `prepare_upload` and `on_arrival` for
each arrival, its `local_step` at each device's request. What it imports from the rest of that project is
given here as the smallest stand-ins its calls need: `Method` keeps its params, `register_method` returns
the class, `MethodCapabilities`, `ServerMutation` and `ServerContext` hold what they are given, and the
state helpers are what their names say (`add_scaled(a, b, s)` = a + s·b, `subtract(a, b)` = a − b, over a
dict of tensors).

A sequence of asynchronous arrivals: M of N clients in flight, each with a drawn duration; partway
through, a client asks for the global model (where it moved on, both sides merge it into the client's
model: theirs by `local_step`, asyncfl's by `merge_weight` and `merge_into`); at its arrival, its model
(its start or merged model moved by a drawn step) and a drawn training loss reach the server (theirs by
`prepare_upload` then `on_arrival`, asyncfl's by `aggregate_with_memory`). In float64.

    .venv/bin/python peers/fedasmu_afvlm.py --afvlm /path/to/AFVLM_CM
"""

import argparse
import heapq
import importlib.util
import json
import sys
import types
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from asyncfl.fl.algorithms.fedasmu import FedASMU
from asyncfl.fl.strategy import Update
from asyncfl.settings.config import make_config
from asyncfl.training.interface import Merge, merge_into

FILE = Path("code/afl_vlm/methods/fedasmu.py")


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--afvlm", required=True, help="the AFVLM_CM checkout (the folder holding code/)")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--arrivals", type=int, default=200)
    parser.add_argument("--parameters", type=int, default=20, help="entries of the model")
    parser.add_argument("--steps", type=int, default=7, help="a dispatch's local steps S")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--our-meta-lr", type=float, default=0.01, help="asyncfl's η (another: the check bites)")
    return parser.parse_args()


def stand_ins() -> None:
    """The modules the transcription imports from its own project, as the smallest stand-ins."""

    class Method:
        def __init__(self, params=None) -> None:
            self.params = dict(params or {})

    def module(name: str, **members) -> None:
        sys.modules[name] = types.SimpleNamespace(**members)  # type: ignore[assignment]

    def holder(*args, **kwargs) -> SimpleNamespace:
        return SimpleNamespace(args=args, **kwargs)

    module("afl_vlm")
    module("afl_vlm.federation")
    module("afl_vlm.methods")
    module("afl_vlm.models")
    module("afl_vlm.federation.types", MethodCapabilities=holder, ServerContext=holder, ServerMutation=holder,
           Update=SimpleNamespace)  # fmt: skip
    module("afl_vlm.methods.base", Method=Method)
    module("afl_vlm.methods.registry", register_method=lambda name: lambda cls: cls)
    module("afl_vlm.models.base", add_scaled=lambda a, b, s: {k: a[k] + s * b[k] for k in a},
           subtract=lambda a, b: {k: a[k] - b[k] for k in a},
           clone_state=lambda a: {k: v.clone() for k, v in a.items()})  # fmt: skip


def their_class(checkout: Path) -> type:
    path = checkout / FILE
    if not path.is_file():
        raise SystemExit(f"--afvlm {checkout}: no {FILE} there; give the AFVLM_CM checkout")
    stand_ins()
    spec = importlib.util.spec_from_file_location("afvlm_fedasmu", path)
    assert spec is not None and spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded.FedASMU


class Model:
    """The transcription's view of a device's model: its trainable state, read and replaced."""

    def __init__(self, state: dict[str, torch.Tensor]) -> None:
        self.state = state

    def snapshot_trainable(self) -> dict[str, torch.Tensor]:
        return {k: v.clone() for k, v in self.state.items()}

    def load_trainable(self, state: dict[str, torch.Tensor]) -> None:
        self.state = state


def largest(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    return max(float((a[k] - b[k]).abs().max()) for k in a)


def main() -> None:
    args = arguments()
    theirs = their_class(Path(args.afvlm))({})  # its defaults, as asyncfl's
    ours = FedASMU(make_config({"algorithm": "fedasmu", "fedasmu_meta_lr": args.our_meta_lr}))
    rng = np.random.default_rng(args.seed)

    def drawn(scale: float) -> dict[str, torch.Tensor]:
        return {"w": torch.from_numpy(rng.normal(0, scale, args.parameters))}

    global_ours = drawn(1.0)
    global_theirs = {k: v.clone() for k, v in global_ours.items()}
    history = {0: {k: v.clone() for k, v in global_ours.items()}}  # the global model of each version
    memory: dict = {}
    version, now, order = 0, 0.0, 0
    events: list[tuple[float, int, str, dict]] = []
    differences = {"theta": 0.0, "alpha": 0.0, "merged": 0.0, "beta": 0.0}
    merges = 0

    def dispatch(client: int) -> None:
        nonlocal order
        duration = float(rng.lognormal(0.0, 0.8))
        job = {"client": client, "version": version, "local": {k: v.clone() for k, v in history[version].items()}}
        for when, kind in ((now + duration * rng.uniform(0.1, 0.9), "request"), (now + duration, "arrival")):
            heapq.heappush(events, (when, order, kind, job))
            order += 1

    for client in rng.choice(args.clients, args.concurrency, replace=False):
        dispatch(int(client))
    arrivals = 0
    while arrivals < args.arrivals:
        now, _, kind, job = heapq.heappop(events)
        client = job["client"]
        if kind == "request":
            if version == job["version"]:
                continue  # nothing newer: both sides merge nothing
            context = SimpleNamespace(client_id=client, fresh_global_state=history[version],
                                      fresh_global_version=version, base_version=job["version"])  # fmt: skip
            model = Model({k: v.clone() for k, v in job["local"].items()})
            target = ours.merge_after(args.steps)
            done = theirs.local_step(model, target, args.steps, {"client": context})
            beta = ours.merge_weight(client, job["version"], version, memory)
            merge_into(job["local"], Merge(target, history[version], beta))
            differences["beta"] = max(differences["beta"], abs(done["beta"] - beta))
            differences["merged"] = max(differences["merged"], largest(model.state, job["local"]))
            merges += 1
            continue
        trained = {k: v + torch.from_numpy(rng.normal(0, 0.1, args.parameters)) for k, v in job["local"].items()}
        loss = float(rng.uniform(0.2, 2.5))
        update = SimpleNamespace(update_id=str(order), client_id=client, base_version=job["version"],
                                 local_state=trained, losses=[loss], metadata={})  # fmt: skip
        theirs.prepare_upload(update, None)
        (mutation,) = theirs.on_arrival(update, SimpleNamespace(version=version, global_state=global_theirs))
        global_theirs, their_alpha = mutation.args[0], mutation.args[1]
        start = history[job["version"]]
        arrived = Update(trained, start, 1, 1.0, version - job["version"], client, (), {}, 0.0, loss, job["version"])
        global_ours, (alpha,), memory = ours.aggregate_with_memory(global_ours, [arrived], memory, args.clients)
        differences["alpha"] = max(differences["alpha"], abs(their_alpha - alpha))
        differences["theta"] = max(differences["theta"], largest(global_theirs, global_ours))
        version += 1
        history[version] = {k: v.clone() for k, v in global_ours.items()}
        arrivals += 1
        in_flight = {entry[3]["client"] for entry in events}
        dispatch(int(rng.choice([c for c in range(args.clients) if c not in in_flight])))
    print(json.dumps({"arrivals": arrivals, "merges": merges, **{f"max_abs_{k}": v for k, v in differences.items()}}))


if __name__ == "__main__":
    main()
