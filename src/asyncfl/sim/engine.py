"""The federated-learning simulation: a server and asyncio clients on a virtual clock (docs/design.md "Training").

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
import time
from pathlib import Path

import numpy as np

from asyncfl.data.dataset import Dataset
from asyncfl.data.partition import Partition
from asyncfl.fl.aggregation import update_norm
from asyncfl.fl.strategies import Update
from asyncfl.models import State
from asyncfl.sim.client_system import ClientSystem, Phases
from asyncfl.sim.clock import run_virtual, sleep_until
from asyncfl.sim.context import RunContext, client_initial_states, prepare_run
from asyncfl.sim.invariants import SelfCheck
from asyncfl.sim.logs import Aggregation, RunLogs
from asyncfl.sim.outcome import check_finite, check_finite_model, stop_condition, write_outputs
from asyncfl.sim.run_state import Job, RunState, load_checkpoint, save_checkpoint
from asyncfl.spec.config import TrainConfig
from asyncfl.spec.layout import CHECKPOINT
from asyncfl.training.evaluation import evaluate, training_gradient
from asyncfl.training.interface import LocalResult, Trainer


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
        self.config, self.out, self.strategy = config, Path(out), self.context.strategy
        model_state = {k: v.detach().clone() for k, v in self.context.model.state_dict().items()}
        own_models = None
        if not self.strategy.clients_load_global_model:
            own_models = client_initial_states(config, dataset.info, self.context.device, partition.num_clients)
        self.state = RunState.fresh(model_state, config.seed, partition.num_clients, own_models)
        # Not checkpointed: derived, or empty at every checkpoint.
        self.buffer: list[tuple[Job, LocalResult]] = []
        self.in_flight = np.zeros(partition.num_clients, dtype=np.int64)
        self.clients: set[asyncio.Task] = set()
        self.inbox: asyncio.PriorityQueue = asyncio.PriorityQueue()
        self.stop_reason = ""
        self.started = time.perf_counter()
        self.check: SelfCheck  # derived from the state where the run starts or resumes (`run`)

    def sample_clients(self, count: int) -> np.ndarray:
        """Uniform draw of clients to dispatch: idle ones without replacement, any with replacement."""
        if self.config.replacement:
            return self.state.rng.integers(len(self.context.sizes), size=count)
        return self.state.rng.choice(np.flatnonzero(self.in_flight == 0), size=count, replace=False)

    def dispatch(self, client: int) -> None:
        state = self.state
        aggregated = int(state.dispatch_counts.sum()) - len(state.outstanding) - len(self.buffer)
        job = next_job(self.context, state, client, aggregated)
        if self.strategy.clients_load_global_model:
            state.starts.setdefault(job.version, state.global_state)
        self.state.outstanding[job.key] = job
        self.check.on_dispatch(job, len(state.outstanding))
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
                self.check.on_arrival(job, self.context.system, int(self.context.sizes[job.client]))
                state.now = job.arrival_time
                del state.outstanding[job.key]
                self.in_flight[job.client] -= 1
                result = local_result(self.context, state, job)
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
        old, starts = state.global_state, [start_of(self.context, state, job) for job in jobs]
        updates = server_updates(self.context, state.version, jobs, results, starts)
        new, coefficients = self.strategy.aggregate(old, updates)
        check_finite_model(new, state.version, self.out)
        norm = update_norm(new, old, self.context.parameter_names)
        sizes = [update.size for update in updates]
        record = Aggregation.of(state.version + 1, state.now, jobs, results, sizes, coefficients, norm)
        record.phases = logged_phases(self.context, jobs)
        state.advance(new, self.buffer if not self.strategy.clients_load_global_model else [])
        self.buffer.clear()
        self.check.on_aggregation(state.version, coefficients, len(self.buffer), len(state.outstanding))
        arrived = int(state.dispatch_counts.sum()) - len(state.outstanding)  # every arrival so far is aggregated
        self.stop_reason = stop_condition(config, state.version, state.now, norm, arrived)
        if evaluation_due(config, state.version, arrived - len(jobs), arrived) or self.stop_reason:
            evaluate_global(self.context, new, record)
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
        self.check = SelfCheck.of(self.state, self.strategy.initial_clients, self.strategy.convex)
        logs = RunLogs(
            self.out,
            resumed[1] if resumed else None,
            self.config.rounds,
            self.state.version,
            self.strategy.logs_reference_loss,
            self.context.system.links is not None,
        )
        try:
            run_virtual(self.serve(logs), start=self.state.now)
            texts = logs.settled_texts()
        finally:
            logs.close()
        return write_outputs(self.out, self.context, self.state, self.stop_reason, self.elapsed(), texts)


def logged_phases(context: RunContext, jobs: list[Job]) -> list[Phases]:
    """Each job's phases for events.csv where the clients have links (none otherwise: no columns)."""
    if context.system.links is None:
        return []
    return [context.system.phases(j.client, int(context.sizes[j.client]), j.dispatch_index) for j in jobs]


def evaluation_due(config: TrainConfig, version: int, updates_before: int, updates_after: int) -> bool:
    """Whether the aggregation that made `version` (and took the count of aggregated client updates from
    `updates_before` to `updates_after`) evaluates the global model: every `eval_every` rounds, or at
    the first aggregation at or past each multiple of `eval_every_updates` updates, the same counts for
    every algorithm whatever its round costs."""
    if config.eval_every_updates is None:
        return version % config.eval_every == 0
    return updates_after // config.eval_every_updates > updates_before // config.eval_every_updates


def start_of(context: RunContext, state: RunState, job: Job) -> State:
    """The model a job trains from: the global model it was sent, or the client's own last model."""
    if context.strategy.clients_load_global_model:
        return state.starts[job.version]
    return state.client_models[job.client]


def local_result(context: RunContext, state: RunState, job: Job) -> LocalResult:
    """The job's local update; trains every outstanding untrained job together the first time, so a
    vectorised trainer batches the clients in flight."""
    results = state.results
    if job.key not in results:
        pending = [j for j in [job, *state.outstanding.values()] if j.key not in results]
        tasks = [context.local_task(j, start_of(context, state, j)) for j in pending]
        results.update(zip((j.key for j in pending), context.trainer.train(tasks), strict=True))
    return results.pop(job.key)


def next_job(context: RunContext, state: RunState, client: int, updates: int) -> Job:
    """The client's next dispatch, now, from the current version, after `updates` client updates were
    aggregated: its arrival time and learning rates."""
    system: ClientSystem = context.system
    index = int(state.dispatch_counts[client])
    state.dispatch_counts[client] += 1
    duration = system.duration(client, int(context.sizes[client]), index)
    lrs = context.strategy.learning_rates(state.version, updates, system.delay(client, duration))
    return Job(client, index, state.version, state.now, state.now + duration, lrs)


def server_updates(
    context: RunContext, version: int, jobs: list[Job], results: list[LocalResult], starts: list[State]
) -> list[Update]:
    """The arrived updates as the strategy combines them, each with its size and staleness weight s(τ)."""
    return [
        Update(result.state, start, int(context.sizes[job.client]), context.strategy.staleness(job.staleness(version)))
        for job, result, start in zip(jobs, results, starts, strict=True)
    ]


def evaluate_global(context: RunContext, state: State, record: Aggregation) -> None:
    """The global model's test loss and accuracy, and its training loss and squared gradient norm."""
    record.test_loss, record.test_accuracy = evaluate(context.model, state, context.test_images, context.test_labels)
    record.global_train_loss, record.gradient_norm_squared = training_gradient(
        context.model, state, context.train_images, context.train_labels, context.all_indices
    )
