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

import dataclasses
import time
from pathlib import Path

from asyncfl.data.dataset import Dataset, DatasetInfo
from asyncfl.data.partition import Partition
from asyncfl.fl.aggregation import update_norm
from asyncfl.fl.strategy import Update
from asyncfl.models import ModelState
from asyncfl.runs.checkpoint import load_checkpoint, save_checkpoint
from asyncfl.runs.logs import PHASE_COLUMNS, Aggregation, RunLogs
from asyncfl.sim.clock import run_virtual
from asyncfl.sim.context import RunContext, client_initial_states, prepare_run
from asyncfl.sim.dispatcher import Dispatcher
from asyncfl.sim.ending import check_finite, check_finite_model, stop_condition, warn_of_starved, write_outputs
from asyncfl.sim.events import Kind
from asyncfl.sim.invariants import SelfCheck
from asyncfl.sim.outcomes import (
    DISCARDED,
    REJECTED,
    Unaggregated,
    check_abandoned,
    check_lost,
    will_be_discarded,
)
from asyncfl.sim.state import Job, SimulationState
from asyncfl.spec.config import TrainConfig
from asyncfl.spec.layout import CHECKPOINT, EVENTS
from asyncfl.training.evaluation import evaluate, training_gradient
from asyncfl.training.interface import LocalResult, Trainer


class Simulation:
    """The event loop of one run: dispatch, serve, aggregate, over a `RunContext` and a `SimulationState`."""

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
        self.state = fresh_state(self.context, dataset.info, partition.num_clients)
        # Not checkpointed: derived, or empty at every checkpoint.
        self.buffer: list[tuple[Job, LocalResult]] = []
        self.abandoned_in_a_row = 0
        self.lost_in_a_row: list[str] = []  # fates of the dispatches lost since the last that arrived
        self.stop_reason = ""
        self.started = time.perf_counter()
        # derived from the state where the run starts or resumes (`run`)
        self.check: SelfCheck
        self.dispatcher: Dispatcher
        self.unaggregated: Unaggregated  # set aside since the last aggregation, which logs them

    def lose(self, job: Job) -> None:
        """A dispatch whose result never arrives: its work is lost, its slot frees and is filled (in a
        closed loop, where the strategy wants it), and the next aggregation's logs record it."""
        self.unaggregated.set_aside([job], job.lost)
        self.lost_in_a_row.append(job.lost)
        check_lost(self.lost_in_a_row, self.config)
        in_round = len(self.buffer) + len(self.state.outstanding) + self.state.waiting
        self.dispatcher.request(self.dispatcher.closed_loop(self.strategy.clients_after_loss(in_round)))

    def take(self, job: Job) -> bool:
        """Take an update that arrived, or reject it as too stale; True when the round is complete."""
        staleness = job.versions_behind(self.state.version)
        if self.strategy.over_cap(staleness) and self.strategy.drops_stale:
            self.unaggregated.set_aside([job], REJECTED, staleness)
            self.dispatcher.request(self.dispatcher.closed_loop(1))
            return False
        self.unaggregated.kept_over_cap += self.strategy.over_cap(staleness)
        result = local_result(self.context, self.state, job, len(self.buffer) + 1)
        check_finite(result, job, self.state.version, self.out)
        self.buffer.append((job, result))
        if len(self.buffer) < self.strategy.arrivals_per_round:
            self.dispatcher.request(self.dispatcher.closed_loop(self.strategy.clients_after_arrival(False)))
            return False
        return True

    async def serve(self, logs: RunLogs) -> None:
        state, dispatcher = self.state, self.dispatcher
        dispatcher.start()
        try:
            while True:
                event = await dispatcher.events.next()
                job = event.job
                if job is None:
                    if event.kind != Kind.DEADLINE:
                        dispatcher.on_server_event(event)
                    elif event.time == state.deadline_at and self.on_deadline(logs):  # else its round closed earlier
                        return
                    continue
                if job.key not in state.outstanding:  # discarded when its round closed
                    continue
                self.check.on_arrival(job, self.context.system, int(self.context.sizes[job.client]))
                state.now = job.arrival_time
                dispatcher.arrived(job)
                if job.lost:
                    self.lose(job)
                    continue
                self.lost_in_a_row.clear()
                if self.take(job) and (self.aggregate(logs) or self.next_round(logs)):
                    return
        finally:
            await dispatcher.events.stop()

    def on_deadline(self, logs: RunLogs) -> bool:
        """The open synchronous round's deadline: aggregate what arrived, or abandon the round below the
        reports it needs (it cost the time, the model is unchanged); True when the run is over."""
        self.state.now = self.state.deadline_at or self.state.now
        if len(self.buffer) < self.strategy.min_reports:
            self.unaggregated.abandon([job for job, _ in self.buffer])
            self.buffer.clear()
            self.abandoned_in_a_row += 1
            check_abandoned(self.abandoned_in_a_row, self.config)
        elif self.aggregate(logs):
            return True
        return self.next_round(logs)

    def next_round(self, logs: RunLogs) -> bool:
        """After a round: the next dispatches, and a checkpoint when one is due (False: the run goes on)."""
        self.dispatcher.start_round(self.dispatcher.closed_loop(self.strategy.clients_after_arrival(True)))
        if self.state.version % self.config.checkpoint_every == 0 and not self.abandoned_in_a_row:
            snapshot = dataclasses.replace(self.state, wall_seconds=self.elapsed())
            save_checkpoint(self.out / CHECKPOINT, self.context.identity, snapshot.payload(logs.settled_texts()))
        return False

    def aggregate(self, logs: RunLogs) -> bool:
        """Fold the buffered updates into the global model; log the round; True when the run is over."""
        config, state = self.config, self.state
        if self.strategy.closes_rounds:
            self.unaggregated.discard(DISCARDED)
        self.abandoned_in_a_row = 0
        new, record, coefficients = folded_round(self.context, state, self.buffer, self.unaggregated, self.out)
        self.unaggregated.clear()
        state.advance(new, self.buffer if not self.strategy.clients_load_global_model else [])
        folded = len(self.buffer)
        self.buffer.clear()
        self.check.on_aggregation(state.version, coefficients, len(self.buffer), len(state.outstanding))
        arrived = state.aggregated(0)
        self.stop_reason = stop_condition(
            config, state.version, state.now, record.update_norm, arrived, state.dispatched
        )
        if evaluation_due(config, state.version, arrived - folded, arrived) or self.stop_reason:
            evaluate_global(self.context, new, record)
        logs.record(record, self.elapsed())
        return bool(self.stop_reason)

    def elapsed(self) -> float:
        """Wall-clock seconds of the whole run so far, resumes included."""
        return round(self.state.wall_seconds + time.perf_counter() - self.started, 3)

    def run(self) -> dict:
        """Run (or resume) to the end; write model.pt and run.json; return run.json's content."""
        self.out.mkdir(parents=True, exist_ok=True)
        resumed = resumed_state(self.context, self.out)
        self.state = resumed[0] if resumed else self.state
        self.started = time.perf_counter()
        self.check = SelfCheck.of(self.state, self.strategy.initial_clients, self.strategy.convex)
        self.dispatcher = Dispatcher(self.context, self.state, self.buffer, self.check)
        self.unaggregated = Unaggregated(self.state, self.check, self.dispatcher.withdraw)
        logs = open_logs(self.context, self.out, resumed[1] if resumed else None, self.state.version)
        try:
            run_virtual(self.serve(logs), start=self.state.now)
            texts = logs.settled_texts()
        finally:
            logs.close()
        if self.strategy.drops_stale:
            warn_of_starved(texts[EVENTS], self.config)
        return write_outputs(self.out, self.context, self.state, self.stop_reason, self.elapsed(), texts)


def resumed_state(context: RunContext, out: Path) -> tuple[SimulationState, dict[str, str]] | None:
    """The state and the logs' text saved by the run folder's checkpoint, checked; None without one."""
    checkpoint = load_checkpoint(out / CHECKPOINT, context.identity, context.device)
    resumed = SimulationState.from_payload(checkpoint, str(out / CHECKPOINT)) if checkpoint else None
    if resumed:
        print(f"resuming {out} from its checkpoint at round {resumed[0].version}", flush=True)
    return resumed


def fresh_state(context: RunContext, info: DatasetInfo, num_clients: int) -> SimulationState:
    """The state of a run that starts afresh: the initial global model, and each client's own initial
    model where the strategy's clients keep their own."""
    model_state = {k: v.detach().clone() for k, v in context.model.state_dict().items()}
    own_models = None
    if not context.strategy.clients_load_global_model:
        own_models = client_initial_states(context.config, info, context.device, num_clients)
    return SimulationState.fresh(model_state, context.config.seed, num_clients, own_models)


def folded_round(
    context: RunContext,
    state: SimulationState,
    buffer: list[tuple[Job, LocalResult]],
    unaggregated: Unaggregated,
    out: Path,
) -> tuple[ModelState, Aggregation, list[float]]:
    """The buffered updates folded into a new global model, with the round's record (the dispatches
    set aside since the last aggregation included) and the aggregation's coefficients."""
    jobs, results = [job for job, _ in buffer], [result for _, result in buffer]
    old, starts = state.global_model, [start_of(context, state, job) for job in jobs]
    updates = server_updates(context, state.version, jobs, results, starts)
    new, coefficients = context.strategy.aggregate(old, updates)
    check_finite_model(new, state.version, out)
    norm = update_norm(new, old, context.parameter_names)
    sizes = [update.size for update in updates]
    record = aggregation_record(state.version + 1, state.now, jobs, results, sizes, coefficients, norm)
    record.phases = logged_phases(context, jobs)
    record.losses = [loss_row(context, state.version + 1, *item) for item in unaggregated.jobs]
    record.accounting = unaggregated.counts(context.accounting_columns, state.dispatched)
    return new, record, coefficients


def open_logs(context: RunContext, out: Path, resumed: dict[str, str] | None, version: int) -> RunLogs:
    """The run's logs, afresh or as a checkpoint held them, with the columns its settings call for."""
    accounting = context.accounting_columns
    return RunLogs(
        out,
        resumed,
        context.config.rounds,
        version,
        context.strategy.logs_reference_loss,
        context.system.links is not None,
        accounting,
        bool({"dropped", "discarded", "rejected"} & set(accounting)),
    )


def logged_phases(context: RunContext, jobs: list[Job]) -> list[tuple[float, float, float]]:
    """Each job's (download, compute, upload) seconds for events.csv where the clients have links
    (none otherwise: no columns)."""
    if context.system.links is None:
        return []
    phases = [context.system.phases(j.client, int(context.sizes[j.client]), j.dispatch_index) for j in jobs]
    return [(p.download, p.compute, p.upload) for p in phases]


def aggregation_record(
    version: int,
    now: float,
    jobs: list[Job],
    results: list[LocalResult],
    sizes: list[int],
    coefficients: list[float],
    norm: float,
) -> Aggregation:
    """What the logs record of the aggregation that made `version` from the jobs' results."""
    return Aggregation(
        version,
        now,
        [j.client for j in jobs],
        [j.version for j in jobs],
        [j.dispatch_time for j in jobs],
        [j.arrival_time for j in jobs],
        [j.versions_behind(version - 1) for j in jobs],
        [j.lrs[0] for j in jobs],
        sizes,
        [r.train_loss for r in results],
        [r.epochs_run for r in results],
        [r.mean_epoch_loss for r in results],
        coefficients,
        norm,
    )


def evaluation_due(config: TrainConfig, version: int, updates_before: int, updates_after: int) -> bool:
    """Whether the aggregation that made `version` (and took the count of aggregated client updates from
    `updates_before` to `updates_after`) evaluates the global model: every `eval_every` rounds, or at
    the first aggregation at or past each multiple of `eval_every_updates` updates, the same counts for
    every algorithm whatever its round costs."""
    if config.eval_every_updates is None:
        return version % config.eval_every == 0
    return updates_after // config.eval_every_updates > updates_before // config.eval_every_updates


def start_of(context: RunContext, state: SimulationState, job: Job) -> ModelState:
    """The model a job trains from: the global model it was sent, or the client's own last model."""
    if context.strategy.clients_load_global_model:
        return state.start_models[job.version]
    return state.client_models[job.client]


def loss_row(context: RunContext, round_: int, job: Job, fate: str, staleness: int | None) -> dict:
    """events.csv's row of a dispatch set aside (`outcomes`), logged with the round it would have joined:
    no coefficient, epochs or loss, since its result never joined the model; the staleness of a
    rejected update."""
    row = {
        "round": round_,
        "client": job.client,
        "dispatch_version": job.version,
        "dispatch_time": job.dispatch_time,
        "arrival_time": job.arrival_time,
        "staleness": staleness,
        "coefficient": None,
        "lr": job.lrs[0],
        "epochs_run": None,
        "n_samples": int(context.sizes[job.client]),
        "train_loss": None,
        "lost": fate,
    }
    phases = logged_phases(context, [job])
    return row | (dict(zip(PHASE_COLUMNS, phases[0], strict=True)) if phases else {})


def local_result(context: RunContext, state: SimulationState, job: Job, buffered: int) -> LocalResult:
    """The job's local update; trains every outstanding untrained job together the first time, so a
    vectorised trainer batches the clients in flight, except those that will be lost or discarded
    (`buffered`: results the open round holds, this job's included)."""
    results, strategy = state.results, context.strategy

    def trains(other: Job) -> bool:
        discarded = strategy.closes_rounds and will_be_discarded(state, buffered, strategy.arrivals_per_round, other)
        return other.key not in results and not other.lost and not discarded

    if job.key not in results:
        pending = [job, *filter(trains, state.outstanding.values())]
        tasks = [context.local_task(j, start_of(context, state, j)) for j in pending]
        results.update(zip((j.key for j in pending), context.trainer.train(tasks), strict=True))
    return results.pop(job.key)


def server_updates(
    context: RunContext, version: int, jobs: list[Job], results: list[LocalResult], starts: list[ModelState]
) -> list[Update]:
    """The arrived updates as the strategy combines them, each with its size and staleness weight s(τ)."""
    return [
        Update(
            result.state,
            start,
            int(context.sizes[job.client]),
            context.strategy.staleness_weight(job.versions_behind(version)),
        )
        for job, result, start in zip(jobs, results, starts, strict=True)
    ]


def evaluate_global(context: RunContext, state: ModelState, record: Aggregation) -> None:
    """The global model's test loss and accuracy, and (unless the config turns it off) its training loss
    and squared gradient norm."""
    record.test_loss, record.test_accuracy = evaluate(context.model, state, context.test_images, context.test_labels)
    if not context.config.eval_gradient:
        return
    record.global_train_loss, record.gradient_norm_squared = training_gradient(
        context.model, state, context.train_images, context.train_labels, context.all_indices
    )
