"""What one aggregation computes and records (docs/design.md "Training"): the clients' local results,
trained lazily and together; the updates folded into the new global model; the round's record for the
logs, the dispatches set aside included; and the evaluation, when one is due."""

import math
from pathlib import Path

from asyncfl.fl.aggregation import update_norm
from asyncfl.fl.strategy import Update
from asyncfl.models import ModelState
from asyncfl.runs.logs import PHASE_COLUMNS, Aggregation
from asyncfl.settings.config import TrainConfig
from asyncfl.sim.context import RunContext
from asyncfl.sim.ending import check_finite_model
from asyncfl.sim.outcomes import Unaggregated, will_be_discarded
from asyncfl.sim.state import Job, SimulationState
from asyncfl.training.evaluation import evaluate, training_gradient
from asyncfl.training.interface import LocalResult, LocalTask, Merge


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
    updates = server_updates(context, state, jobs, results, starts)
    # the strategy's memory across rounds (CA2FL's cache, FedStaleWeight's staleness), read and renewed
    new, coefficients, state.server_memory = context.strategy.aggregate_with_memory(
        old, updates, state.server_memory, len(context.sizes)
    )
    if context.server_optimizer is not None:  # the server steps on the aggregate's pseudo-gradient
        stalest = max(update.staleness for update in updates)
        new, state.server_moments = context.server_optimizer.step(old, new, state.server_moments, stalest)
    check_finite_model(new, state.version, out)
    norm = update_norm(new, old, context.parameter_names)
    sizes = [update.size for update in updates]
    record = aggregation_record(state.version + 1, state.now, jobs, results, sizes, coefficients, norm)
    record.phases = logged_phases(context, jobs)
    record.trained = context.trains
    if context.strategy.cuts_local_work:
        record.samples_trained = [samples_trained(context, job, result) for job, result in buffer]
    record.losses = [loss_row(context, state.version + 1, *item) for item in unaggregated.jobs]
    record.accounting = unaggregated.counts(context.accounting_columns, state.dispatched)
    return new, record, coefficients


def samples_trained(context: RunContext, job: Job, result: LocalResult) -> int:
    """The samples a job's update trained: its epochs' whole, or the cut that fits a deadline, the last
    epoch it ran cut short (an early stop under patience ends the count there too). A timing-only run
    trains none but logs the samples each dispatch was given, its trained twin's (no patience there)."""
    epochs = result.epochs_run if context.trains else context.config.local_epochs
    whole = epochs * int(context.sizes[job.client])
    return whole if job.samples is None else min(job.samples, whole)


def logged_phases(context: RunContext, jobs: list[Job]) -> list[tuple[float, float, float]]:
    """Each job's (download, compute, upload) seconds for events.csv where the clients have links
    (none otherwise: no columns)."""
    if context.system.links is None:
        return []
    system, sizes = context.system, context.sizes
    phases = [system.job_phases(job, int(sizes[job.client])) for job in jobs]
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


def task_of(context: RunContext, state: SimulationState, job: Job) -> LocalTask:
    """The job's local task, with the fresher global model it merges mid-training where it asked for one
    and the model had moved on (`SimulationState.merges`)."""
    fresh, weight = state.merges.get(job.key, (job.version, 0.0))
    merge = None
    if fresh != job.version:
        steps = context.strategy.merge_after(whole_steps(context.config, int(context.sizes[job.client])))
        merge = Merge(steps, state.start_models[fresh], weight)
    return context.local_task(job, start_of(context, state, job), merge)


def whole_steps(config: TrainConfig, size: int) -> int:
    """A dispatch's local steps over its whole epochs, I·⌈n_c/B⌉ (what FedCompass and FedQueue cut, and
    FedASMU's request divides)."""
    return config.local_epochs * math.ceil(size / config.batch_size)


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
        "samples_trained": None,  # never aggregated: logged only where the column is (partial work)
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
        asking = strategy.merges_fresh_model and other.key not in state.merges  # its merge not known yet
        return other.key not in results and not other.lost and not discarded and not asking

    if job.key not in results:
        pending = [job, *filter(trains, state.outstanding.values())]
        tasks = [task_of(context, state, j) for j in pending]
        results.update(zip((j.key for j in pending), context.trainer.train(tasks), strict=True))
    return results.pop(job.key)


def server_updates(
    context: RunContext, state: SimulationState, jobs: list[Job], results: list[LocalResult], starts: list[ModelState]
) -> list[Update]:
    """The arrived updates as the strategy combines them, each with its size and staleness weight s(τ),
    its learning rates, what of the memory its version was sent with and its seconds outside training."""
    version = state.version
    return [
        Update(
            result.state,
            start,
            int(context.sizes[job.client]),
            context.strategy.staleness_weight(job.versions_behind(version)),
            job.versions_behind(version),
            job.client,
            job.lrs,
            state.sent_memories.get(job.version, {}),
            outside_training(context, job) if context.strategy.reads_delays else 0.0,
            result.train_loss,
            job.version,
            job.arrival_time - job.dispatch_time,
        )
        for job, result, start in zip(jobs, results, starts, strict=True)
    ]


def outside_training(context: RunContext, job: Job) -> float:
    """Virtual seconds of the job's dispatch outside its training: latency and transfers."""
    return job.arrival_time - job.dispatch_time - context.system.job_phases(job, int(context.sizes[job.client])).compute


def evaluate_global(context: RunContext, state: ModelState, record: Aggregation) -> None:
    """The global model's test loss and accuracy, and (unless the config turns it off) its training loss
    and squared gradient norm."""
    record.test_loss, record.test_accuracy = evaluate(context.model, state, context.test_images, context.test_labels)
    record.validation_loss, record.validation_accuracy = validation_metrics(context, state)
    if not context.config.eval_gradient:
        return
    record.global_train_loss, record.gradient_norm_squared = training_gradient(
        context.model, state, context.train_images, context.train_labels, context.all_indices
    )


def validation_metrics(context: RunContext, state: ModelState) -> tuple[float | None, float | None]:
    """The model's loss and accuracy on the validation split; none where the partition holds none."""
    if context.validation_images is None or context.validation_labels is None:
        return None, None
    return evaluate(context.model, state, context.validation_images, context.validation_labels)
