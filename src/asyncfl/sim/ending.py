"""How a run ends: the checks that stop a diverged run, the stop conditions, and the finished run's
model.pt and run.json, written through `runs` (docs/outputs.md "Run folders")."""

import hashlib
import math
import sys
from pathlib import Path

import torch

from asyncfl.files import sha256
from asyncfl.models import ModelState
from asyncfl.planning.layout import CHECKPOINT, EVALUATIONS, EVENTS, METRICS, MODEL, PROGRESS, RUN_OUTPUTS, WALL
from asyncfl.runs.checkpoint import save_torch
from asyncfl.runs.provenance import run_environment
from asyncfl.runs.record import utc_now, write_run_record
from asyncfl.settings.config import TrainConfig
from asyncfl.settings.errors import InputError
from asyncfl.sim.context import RunContext
from asyncfl.sim.outcomes import starved_clients
from asyncfl.sim.state import Job, SimulationState
from asyncfl.training.interface import LocalResult


class TrainingDiverged(InputError):
    """A client's training loss, or the global model, became nan or inf."""


def check_finite(result: LocalResult, job: Job, version: int, out: Path) -> None:
    if not math.isfinite(result.train_loss):
        raise TrainingDiverged(
            f"round {version + 1}, client {job.client}: training loss is {result.train_loss}; "
            f"rows up to round {version} are kept in {out}; lower gamma0 or check the data"
        )


def check_finite_model(state: ModelState, version: int, out: Path) -> None:
    """A global model with a nan or inf entry is never logged or saved as a result (one device sync)."""
    floating = [torch.isfinite(tensor).all() for tensor in state.values() if tensor.is_floating_point()]
    if floating and not bool(torch.stack(floating).all()):
        raise TrainingDiverged(
            f"round {version + 1}: the aggregated global model has nan or inf entries; rows up to round {version} "
            f"are kept in {out}; lower server_lr, mixing or gamma0"
        )


def stop_condition(config: TrainConfig, version: int, now: float, norm: float, updates: int, dispatched: int) -> str:
    """Why the run ends after the aggregation that made `version` ("" while it goes on). The budgets
    (`max_virtual_time`, `max_updates` aggregated, `max_dispatches` of work, aggregated or not) let runs of
    different algorithms stop at equal cost."""
    if version >= config.rounds:
        return "rounds"
    if config.kappa > 0 and norm <= config.kappa:
        return "kappa"
    if config.max_virtual_time is not None and now >= config.max_virtual_time:
        return "max_virtual_time"
    if config.max_updates is not None and updates >= config.max_updates:
        return "max_updates"
    if config.max_dispatches is not None and dispatched >= config.max_dispatches:
        return "max_dispatches"
    return ""


def work_done(config: TrainConfig, version: int, now: float, updates: int, dispatched: int) -> float:
    """The share of its work a run has done, by the budget that ends it first (`stop_condition`'s): what
    a job resumed after its time limit asks for the rest of at the pace so far (`planning.progress`)."""
    shares = [version / config.rounds]
    for spent, budget in (
        (now, config.max_virtual_time),
        (updates, config.max_updates),
        (dispatched, config.max_dispatches),
    ):
        if budget is not None:
            shares.append(spent / budget)
    return min(1.0, max(shares))


def warn_of_starved(events_text: str, config: TrainConfig) -> None:
    """A staleness cap that rejects every update of some client starves it: said on stderr, once."""
    starved = starved_clients(events_text)
    if starved:
        print(
            f"warning: client(s) {', '.join(map(str, starved))} had every update rejected as staler than "
            f"max_staleness = {config.max_staleness}: the cap starves them (raise it, or set stale_updates: keep)",
            file=sys.stderr,
            flush=True,
        )


def write_outputs(
    out: Path,
    context: RunContext,
    state: SimulationState,
    stop_reason: str,
    wall_seconds: float,
    logs: dict[str, str],
    clock: dict | None = None,
) -> dict:
    """The finished run's model.pt and run.json (hashes of the outputs last); the checkpoint goes.
    The logs' hashes are those of the texts this run wrote, which `RunLogs.settled_texts` put on disk;
    `clock`: a run on the real clock, how its last stretch (from its start or last resume) kept the pace."""
    save_torch(out / MODEL, state.global_model)
    hashes = {MODEL: sha256(out / MODEL)}
    hashed = [name for name in (METRICS, EVENTS, EVALUATIONS) if name in logs]  # evaluations.csv: on a grid only
    hashes.update({name: hashlib.sha256(logs[name].encode()).hexdigest() for name in hashed})
    if clock is not None:  # a real-clock run's wall.csv (`sim.clients`): what the simulator is checked against
        hashes[WALL] = sha256(out / WALL)
    summary = {
        **context.identity,
        **run_environment(str(context.device), torch.__version__),
        "rounds_completed": state.version,
        "stop_reason": stop_reason,
        "virtual_time": state.now,
        "wall_seconds": wall_seconds,
        "started_at": state.started_at,
        "finished_at": utc_now(),
        "torch_threads": torch.get_num_threads(),
        "cpu_kernels": torch.backends.cpu.get_cpu_capability(),  # AVX2, AVX512: each rounds its own way
        "lr_clock": context.strategy.lr_clock,
        **({"clock": clock} if clock is not None else {}),
    }
    outputs = (*RUN_OUTPUTS, EVALUATIONS, WALL)
    record = write_run_record(out, summary, {name: hashes[name] for name in outputs if name in hashes})
    (out / CHECKPOINT).unlink(missing_ok=True)
    (out / PROGRESS).unlink(missing_ok=True)
    return record
