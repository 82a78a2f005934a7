"""The federated-learning simulation: a server and asyncio clients on a virtual clock (README "Training").

One event loop serves every algorithm: clients are dispatched with the global model of the
current version v and arrive after their virtual duration; the server takes arrivals in
(arrival time, client, dispatch index) order, and the algorithm's strategy says how many
arrivals make a round, how they combine and how many clients to dispatch next. Staleness
τ = version at aggregation − version at dispatch.

Training is lazy: a dispatch only records a job; the first time a result is needed, every job
not yet trained is trained in one call, which lets a vectorised trainer batch the clients in
flight. Checkpoints hold the whole run state at an aggregation, so a killed run resumes to
byte-identical outputs.
"""

import asyncio
import dataclasses
import hashlib
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from asyncfl.data.datasets import Dataset, normalize
from asyncfl.data.partition import Partition
from asyncfl.files import save_torch, sha256, write_json
from asyncfl.fl.aggregation import State, staleness_weight, update_norm
from asyncfl.fl.strategies import Strategy, Update, make_strategy
from asyncfl.models import build_model
from asyncfl.sim.checks import check_run
from asyncfl.sim.client_system import ClientSystem
from asyncfl.sim.clock import run_virtual, sleep_until
from asyncfl.sim.logs import Aggregation, RunLogs
from asyncfl.sim.provenance import run_environment
from asyncfl.sim.run_state import (
    CHECKPOINT,
    OUTPUTS,
    Job,
    RunState,
    load_checkpoint,
    run_identity,
    save_checkpoint,
    utc_now,
)
from asyncfl.spec.config import TrainConfig
from asyncfl.spec.errors import InputError
from asyncfl.spec.random_streams import shuffle_key
from asyncfl.training.evaluation import evaluate, training_gradient
from asyncfl.training.plain import LocalResult, LocalTask, Trainer
from asyncfl.training.runtime import choose_device, make_deterministic, numerics_for, trainer_class


class TrainingDiverged(InputError):
    """A client's training loss became nan or inf."""


@dataclass(frozen=True)
class RunContext:
    """What a run reads and never changes: settings, device, model, test set, trainer, clients."""

    config: TrainConfig
    identity: dict  # what a checkpoint must match to be resumed: settings, dataset, partition
    device: torch.device
    model: torch.nn.Module
    test_images: torch.Tensor
    test_labels: torch.Tensor
    train_images: torch.Tensor  # normalised, on the device: the global model's training loss and gradient
    train_labels: torch.Tensor
    trainer: Trainer
    sizes: np.ndarray  # n_c per client
    client_indices: list[torch.Tensor]  # each client's training indices, on the device
    system: ClientSystem

    @property
    def all_indices(self) -> torch.Tensor:
        """Every training sample of the partition: the data of L(θ) = Σ_c (n_c/n)·L_c(θ)."""
        return torch.cat(self.client_indices)


def prepare_run(
    config: TrainConfig, dataset: Dataset, partition: Partition, partition_sha256: str, trainer: Trainer | None
) -> RunContext:
    """Check the run, set the process up (device, determinism, numerics) and put the data on the device."""
    device = choose_device(config.device)
    check_run(config, dataset, partition, device)
    identity = run_identity(config, dataset.info.name, partition_sha256)
    make_deterministic(config.seed)
    model = build_model(config.model, dataset.info).to(device)
    images = normalize(dataset.train_images.to(device), dataset.info)
    labels = dataset.train_labels.to(device)
    test_images = normalize(dataset.test_images.to(device), dataset.info)
    numerics = numerics_for(config)
    trainer = trainer or trainer_class(config.trainer, device)(
        model, images, labels, config.batch_size, config.optimizer, config.patience, numerics
    )
    indices = [torch.from_numpy(partition.client_indices(c)).to(device) for c in range(partition.num_clients)]
    return RunContext(
        config,
        identity,
        device,
        model,
        test_images,
        dataset.test_labels.to(device),
        images,
        labels,
        trainer,
        partition.sizes,
        indices,
        ClientSystem.draw(config, partition.num_clients),
    )


class Simulation:
    """The event loop of one run: dispatch, serve, aggregate, over a `RunContext` and a `RunState`."""

    def __init__(
        self,
        config: TrainConfig,
        dataset: Dataset,
        partition: Partition,
        out: Path,
        partition_sha256: str = "",
        trainer: Trainer | None = None,
    ):
        self.context = prepare_run(config, dataset, partition, partition_sha256, trainer)
        self.config, self.out, self.strategy = config, Path(out), make_strategy(config)
        model_state = {k: v.detach().clone() for k, v in self.context.model.state_dict().items()}
        self.state = RunState.fresh(
            model_state, config.seed, partition.num_clients, own_models=not self.strategy.clients_load_global_model
        )
        # Not checkpointed: derived, or empty at every checkpoint.
        self.buffer: list[tuple[Job, LocalResult]] = []
        self.in_flight = np.zeros(partition.num_clients, dtype=np.int64)
        self.clients: set[asyncio.Task] = set()
        self.inbox: asyncio.PriorityQueue = asyncio.PriorityQueue()
        self.stop_reason = ""
        self.started = time.perf_counter()
        self.parameter_names = [name for name, _ in self.context.model.named_parameters()]

    # ---- dispatch -------------------------------------------------------------------------------
    def sample_clients(self, count: int) -> np.ndarray:
        """Uniform draw of clients to dispatch: idle ones without replacement, any with replacement."""
        if self.config.replacement:
            return self.state.rng.integers(len(self.context.sizes), size=count)
        return self.state.rng.choice(np.flatnonzero(self.in_flight == 0), size=count, replace=False)

    def dispatch(self, client: int) -> None:
        state = self.state
        aggregated = int(state.dispatch_counts.sum()) - len(state.outstanding) - len(self.buffer)
        size = int(self.context.sizes[client])
        job = next_job(self.config, self.strategy, self.context.system, state, client, size, aggregated)
        if self.strategy.clients_load_global_model:
            state.starts.setdefault(job.version, state.global_state)
        self.state.outstanding[job.key] = job
        self.spawn(job)

    def spawn(self, job: Job) -> None:
        self.in_flight[job.client] += 1
        task = asyncio.get_running_loop().create_task(self.client(job))
        self.clients.add(task)
        task.add_done_callback(self.clients.discard)

    async def client(self, job: Job) -> None:
        """A client: busy for its virtual duration, then hands its update to the server."""
        await sleep_until(job.arrival_time)
        self.inbox.put_nowait((job.key, job))

    def result(self, job: Job) -> LocalResult:
        """The job's local update; trains every outstanding untrained job together the first time."""
        results = self.state.results
        if job.key not in results:
            pending = [j for j in [job, *self.state.outstanding.values()] if j.key not in results]
            tasks = [local_task(j, self.start_of(j), self.context, self.strategy) for j in pending]
            results.update(zip((j.key for j in pending), self.context.trainer.train(tasks), strict=True))
        return results.pop(job.key)

    def start_of(self, job: Job) -> State:
        """The model a job trains from: the global model it was sent, or the client's own last model."""
        if self.strategy.clients_load_global_model:
            return self.state.starts[job.version]
        return self.state.client_models[job.client]

    # ---- the server -----------------------------------------------------------------------------
    async def serve(self, logs: RunLogs) -> None:
        state = self.state
        for job in state.outstanding.values():  # a resumed run's clients in flight
            self.spawn(job)
        if state.version == 0 and not state.outstanding:
            for client in self.sample_clients(self.strategy.initial_clients):
                self.dispatch(int(client))
        try:
            while True:
                _, job = await self.inbox.get()
                state.now = job.arrival_time
                del state.outstanding[job.key]
                self.in_flight[job.client] -= 1
                result = self.result(job)
                check_finite(result, job, state.version, self.out)
                self.buffer.append((job, result))
                aggregated = len(self.buffer) == self.strategy.arrivals_per_round
                if aggregated and self.aggregate(logs):
                    return
                following = self.strategy.clients_after_arrival(aggregated)
                for client in self.sample_clients(following) if following else ():
                    self.dispatch(int(client))
                if aggregated and state.version % self.config.checkpoint_every == 0:
                    snapshot = dataclasses.replace(state, wall_seconds=self.elapsed())
                    save_checkpoint(self.out / CHECKPOINT, self.context.identity, snapshot, logs.settled_texts())
        finally:
            for task in self.clients:
                task.cancel()
            await asyncio.gather(*self.clients, return_exceptions=True)

    def aggregate(self, logs: RunLogs) -> bool:
        """Fold the buffered updates into the global model; log the round; True when the run is over."""
        config, state = self.config, self.state
        jobs, results = [job for job, _ in self.buffer], [result for _, result in self.buffer]
        sizes = [int(self.context.sizes[j.client]) for j in jobs]
        old = state.global_state
        starts = [self.start_of(job) for job in jobs]
        new, coefficients = self.strategy.aggregate(old, server_updates(config, state, jobs, results, sizes, starts))
        check_finite_model(new, state.version, self.out)
        norm = update_norm(new, old, self.parameter_names)
        record = Aggregation.of(state.version + 1, state.now, jobs, results, sizes, coefficients, norm)
        state.global_state, state.version = new, state.version + 1
        if not self.strategy.clients_load_global_model:
            state.client_models.update({job.client: result.state for job, result in self.buffer})
        self.buffer.clear()
        live = {j.version for j in state.outstanding.values()}
        state.starts = {v: start for v, start in state.starts.items() if v in live}
        updates = int(state.dispatch_counts.sum()) - len(state.outstanding)  # every arrival so far is aggregated
        self.stop_reason = stop_condition(config, state.version, state.now, norm, updates)
        if state.version % config.eval_every == 0 or self.stop_reason:
            context = self.context
            record.test_loss, record.test_accuracy = evaluate(
                context.model, new, context.test_images, context.test_labels
            )
            record.global_train_loss, record.gradient_norm_squared = training_gradient(
                context.model, new, context.train_images, context.train_labels, context.all_indices
            )
        logs.record(record, self.elapsed())
        return bool(self.stop_reason)

    def elapsed(self) -> float:
        """Wall-clock seconds of the whole run so far, resumes included."""
        return round(self.state.wall_seconds + time.perf_counter() - self.started, 3)

    def run(self) -> dict:
        """Run (or resume) to the end; write model.pt and run.json; return run.json's content."""
        self.out.mkdir(parents=True, exist_ok=True)
        resumed = load_checkpoint(self.out / CHECKPOINT, self.context.identity, self.context.device)
        if resumed:
            self.state = resumed[0]
            print(f"resuming {self.out} from its checkpoint at round {self.state.version}", flush=True)
        self.started = time.perf_counter()
        logs = RunLogs(self.out, resumed[1] if resumed else None, self.config.rounds, self.state.version)
        try:
            run_virtual(self.serve(logs), start=self.state.now)
            texts = logs.settled_texts()
        finally:
            logs.close()
        return write_outputs(self.out, self.context, self.state, self.stop_reason, self.elapsed(), texts)


def next_job(
    config: TrainConfig, strategy: Strategy, system: ClientSystem, state: RunState, client: int, size: int, updates: int
) -> Job:
    """The client's next dispatch, now, from the current version, after `updates` client updates were
    aggregated: its arrival time and learning rates."""
    index = int(state.dispatch_counts[client])
    state.dispatch_counts[client] += 1
    duration = system.duration(config, client, size, index)
    lrs = strategy.learning_rates(state.version, updates, system.delay(config, client, duration))
    return Job(client, index, state.version, state.now, state.now + duration, lrs)


def check_finite(result: LocalResult, job: Job, version: int, out: Path) -> None:
    if not math.isfinite(result.train_loss):
        raise TrainingDiverged(
            f"round {version + 1}, client {job.client}: training loss is {result.train_loss}; "
            f"rows up to round {version} are kept in {out}; lower gamma0 or check the data"
        )


def check_finite_model(state: State, version: int, out: Path) -> None:
    """A global model with a nan or inf entry is never logged or saved as a result (one device sync)."""
    floating = [torch.isfinite(tensor).all() for tensor in state.values() if tensor.is_floating_point()]
    if floating and not bool(torch.stack(floating).all()):
        raise TrainingDiverged(
            f"round {version + 1}: the aggregated global model has nan or inf entries; rows up to round {version} "
            f"are kept in {out}; lower server_lr, mixing or gamma0"
        )


def server_updates(
    config: TrainConfig,
    state: RunState,
    jobs: list[Job],
    results: list[LocalResult],
    sizes: list[int],
    starts: list[State],
) -> list[Update]:
    """The arrived updates as the strategy combines them, each with its staleness weight s(τ)."""
    weights = [
        staleness_weight(config.staleness, j.staleness(state.version), config.staleness_a, config.staleness_b)
        for j in jobs
    ]
    return [Update(*u) for u in zip([r.state for r in results], starts, sizes, weights, strict=True)]


def local_task(job: Job, start: State, context: RunContext, strategy: Strategy) -> LocalTask:
    """What the trainer needs of a job: the model it starts from, its samples, rates and shuffle stream,
    and the local objective's proximal weight μ."""
    config = context.config
    return LocalTask(
        start,
        context.client_indices[job.client],
        job.lrs,
        shuffle_key(config.seed, job.client, job.dispatch_index),
        config.prox_mu,
        strategy.optimizer_per_epoch,
    )


def stop_condition(config: TrainConfig, version: int, now: float, norm: float, updates: int) -> str:
    """Why the run ends after the aggregation that made `version` ("" while it goes on). The budgets
    (`max_virtual_time`, `max_updates`) let runs of different algorithms stop at equal cost."""
    if version >= config.rounds:
        return "rounds"
    if config.kappa > 0 and norm <= config.kappa:
        return "kappa"
    if config.max_virtual_time is not None and now >= config.max_virtual_time:
        return "max_virtual_time"
    if config.max_updates is not None and updates >= config.max_updates:
        return "max_updates"
    return ""


def write_outputs(
    out: Path, context: RunContext, state: RunState, stop_reason: str, wall_seconds: float, logs: dict[str, str]
) -> dict:
    """The finished run's model.pt and run.json (hashes of the outputs last); the checkpoint goes.
    The logs' hashes are those of the texts this run wrote, which `RunLogs.settled_texts` put on disk."""
    save_torch(out / "model.pt", state.global_state)
    hashes = {"model.pt": sha256(out / "model.pt")}
    hashes.update({f"{name}.csv": hashlib.sha256(logs[name].encode()).hexdigest() for name in ("metrics", "events")})
    summary = {
        **context.identity,
        **run_environment(context.device),
        "rounds_completed": state.version,
        "stop_reason": stop_reason,
        "virtual_time": state.now,
        "wall_seconds": wall_seconds,
        "started_at": state.started_at,
        "finished_at": utc_now(),
        "torch_threads": torch.get_num_threads(),
        "lr_clock": make_strategy(context.config).lr_clock,
        "sha256": {name: hashes[name] for name in OUTPUTS},
    }
    write_json(out / "run.json", summary)
    (out / CHECKPOINT).unlink(missing_ok=True)
    return summary
