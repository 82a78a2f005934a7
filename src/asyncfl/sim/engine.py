"""The federated-learning simulation: a server and its clients on a virtual clock (docs/design.md "Training").

One event loop (`events.EventQueue`, a handler per event kind here) serves every algorithm: clients
are dispatched with the global model of the current version v and arrive after their virtual
duration; the server takes arrivals in (arrival time, client, dispatch index) order, and the
algorithm's strategy says how many arrivals make a round, how they combine and how many clients to
dispatch next. Staleness τ = version at aggregation − version at dispatch.

Training is lazy: a dispatch only records a job; the first time a result is needed, every job
not yet trained is trained in one call, which lets a vectorised trainer batch the clients in
flight. Checkpoints hold the whole run state at an aggregation, so a killed run resumes to
byte-identical outputs.
"""

import asyncio
import dataclasses
import functools
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from asyncfl.data.dataset import Dataset, DatasetInfo
from asyncfl.data.partition import Partition
from asyncfl.files import write_json
from asyncfl.fl.strategy import ServerClients
from asyncfl.planning.layout import CHECKPOINT, EVENTS, PROGRESS
from asyncfl.runs.checkpoint import load_checkpoint, save_checkpoint
from asyncfl.runs.logs import RunLogs
from asyncfl.settings.config import TrainConfig
from asyncfl.sim.availability import NEVER
from asyncfl.sim.clients import ClientTasks
from asyncfl.sim.compass_round import CompassRound
from asyncfl.sim.context import RunContext, client_initial_states, prepare_run
from asyncfl.sim.dispatcher import Dispatcher, no_client_online
from asyncfl.sim.ending import stop_condition, warn_of_starved, work_done, write_outputs
from asyncfl.sim.events import Event, Kind, PacedQueue, event_queue
from asyncfl.sim.grid import EvaluationGrid
from asyncfl.sim.invariants import SelfCheck
from asyncfl.sim.open_round import OpenRound
from asyncfl.sim.outcomes import DISCARDED, Unaggregated, progress_bound
from asyncfl.sim.rounds import evaluate_global, evaluation_due, folded_round
from asyncfl.sim.state import Job, SimulationState
from asyncfl.training.interface import LocalResult, Trainer, TrainerPool


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
        tuned: dict | None = None,
        pool: TrainerPool | None = None,
    ):
        """`tuned`: the settings a tuning stage chose for this run, which run.json records as such;
        `pool`: where runs stepped together share their trainers (`lockstep.Lockstep`)."""
        self.context = prepare_run(config, dataset, partition, partition_sha256, trainer, tuned, pool)
        self.config, self.out, self.strategy = config, Path(out), self.context.strategy
        self.state = fresh_state(self.context, dataset.info, partition.num_clients)
        self.stop_reason = ""
        self.started = time.perf_counter()
        # derived from the state where the run starts or resumes (`run`)
        self.check: SelfCheck
        self.dispatcher: Dispatcher
        self.unaggregated: Unaggregated  # set aside since the last aggregation, which logs them
        self.round: OpenRound | CompassRound
        self.grid: EvaluationGrid

    def handlers(self, logs: RunLogs) -> dict[Kind, Callable[[Event], bool]]:
        """The handler of each kind of event; each returns True when the run is over."""
        return {
            Kind.WAKE: self.dispatcher.on_wake,
            Kind.CHECK_IN: self.dispatcher.on_check_in,
            Kind.FETCH: self.dispatcher.on_fetch,
            Kind.ARRIVAL: functools.partial(self.on_arrival, logs=logs),
            Kind.DEADLINE: functools.partial(self.on_deadline, logs=logs),
            Kind.STEP: functools.partial(self.on_step, logs=logs),
            Kind.EVALUATE: functools.partial(self.grid.on_event, log=logs.evaluations),
        }

    def serve(self, logs: RunLogs) -> None:
        """Serve the run's events in order, each by its kind's handler, until one ends the run."""
        handlers = self.handlers(logs)
        self.dispatcher.start()
        self.grid.start()
        self.schedule_step()
        events = self.dispatcher.events
        while True:
            event = events.next()
            if handlers[event.kind](event):
                return

    async def serve_paced(self, logs: RunLogs, clients: ClientTasks) -> None:
        """`serve` on the real clock: the server an asyncio task that awaits each batch's wall time while
        the clients' tasks train, and each arrival's training before its handler; the clients still in
        flight are cancelled at the end, or when the run is stopped."""
        handlers = self.handlers(logs)
        events = self.dispatcher.events
        assert isinstance(events, PacedQueue)
        try:
            clients.warm_up(self.state.global_model)  # before any event: nothing waits on the loop
            events.restart()
            self.dispatcher.start()
            self.grid.start()
            self.schedule_step()
            while True:
                event = await events.paced_next(clients.unscheduled)
                if event.job is not None and event.job.key in self.state.outstanding:
                    await clients.result(event.job)
                if handlers[event.kind](event):
                    return
        finally:
            await clients.close()

    def on_arrival(self, event: Event, logs: RunLogs) -> bool:
        """A dispatch ended: its update joins the open round (which may aggregate), or it was lost."""
        state, job = self.state, event.job
        assert job is not None  # an arrival's event carries its dispatch
        if job.key not in state.outstanding:  # discarded when its round closed
            return False
        self.check.on_arrival(job, self.context.system, int(self.context.sizes[job.client]))
        state.now = job.arrival_time
        self.dispatcher.arrived(job)
        if job.lost:
            return self.round.lose(job) and (self.aggregate(logs) or self.next_round(logs))
        return self.round.take(job) and (self.aggregate(logs) or self.next_round(logs))

    def on_deadline(self, event: Event, logs: RunLogs) -> bool:
        """The open synchronous round's deadline (unless its round closed earlier): aggregate what
        arrived, or abandon the round below the reports it needs; or an arrival group's (FedCompass,
        `event.order` its number): aggregate what it holds; True when the run is over."""
        if isinstance(self.round, CompassRound):
            if not self.round.on_deadline(event.order[0]):
                return False
            self.state.now = event.time
            return self.aggregate(logs) or self.next_round(logs)
        if event.time != self.state.deadline_at:
            return False
        self.state.now = self.state.deadline_at
        if self.round.has_reports() and self.aggregate(logs):
            return True
        return self.next_round(logs)

    def schedule_step(self) -> None:
        """Where the server acts on a clock of steps (Pisces): the next step, from the memory's count of
        them (a resumed run's next)."""
        if self.strategy.steps_the_server:
            index = self.state.server_memory.get("steps", 0)
            self.dispatcher.events.at(Event(index * self.strategy.step_seconds, Kind.STEP, (index,)))

    def on_step(self, event: Event, logs: RunLogs) -> bool:
        """A server's step: the strategy says whom to start and whether to aggregate the buffer; the
        aggregation first, then the starts (from the new model), then the checkpoint; True when the run is over."""
        state, buffer = self.state, self.round.buffer
        state.now = event.time
        running = sorted({job.client for job in state.outstanding.values()})
        buffered = sorted(job.client for job, _ in buffer)
        taken = set(running) | set(buffered)
        world, total = self.context.world, len(self.context.sizes)
        idle = [client for client in range(total) if client not in taken and world.is_online(client, state.now)]
        clients = ServerClients(buffered, running, idle, total)
        if not (running or buffered or idle) and world.next_online(np.arange(total), state.now) == NEVER:
            no_client_online(state.now, total, total)
        chosen, aggregates, memory = self.strategy.step(state.now, clients, state.server_memory)
        state.server_memory = {**memory, "steps": event.order[0] + 1}
        if aggregates and self.aggregate(logs):
            return True
        for client in chosen:
            self.dispatcher.dispatch(client)
        if aggregates:
            self.next_round(logs)
        self.schedule_step()
        return False

    def next_round(self, logs: RunLogs) -> bool:
        """After a round: the next dispatches, and a checkpoint when one is due (False: the run goes on)."""
        self.dispatcher.start_round(self.dispatcher.closed_loop(self.round.dispatches_after_aggregation()))
        if self.state.version % self.config.checkpoint_every == 0 and not self.round.abandoned_in_a_row:
            snapshot = dataclasses.replace(self.state, wall_seconds=self.elapsed())
            save_checkpoint(self.out / CHECKPOINT, self.context.identity, snapshot.payload(logs.settled_texts()))
            state = self.state
            done = work_done(self.config, state.version, state.now, state.aggregated(0), state.dispatched)
            write_json(self.out / PROGRESS, {"done": done, "wall_seconds": snapshot.wall_seconds})
        return False

    def aggregate(self, logs: RunLogs) -> bool:
        """Fold the buffered updates into the global model; log the round; True when the run is over."""
        config, state, buffer = self.config, self.state, self.round.buffer
        if self.strategy.closes_rounds:
            self.unaggregated.discard(DISCARDED)
        new, record, coefficients = folded_round(self.context, state, buffer, self.unaggregated, self.out)
        self.unaggregated.clear()
        state.advance(new, buffer if not self.strategy.clients_load_global_model else [])
        folded = len(buffer)
        self.round.folded()
        self.check.on_aggregation(
            state.version, coefficients, len(buffer) + len(state.waiting_updates), len(state.outstanding)
        )
        arrived = state.aggregated(0)
        self.stop_reason = stop_condition(
            config, state.version, state.now, record.update_norm, arrived, state.dispatched
        )
        due = evaluation_due(config, state.version, arrived - folded, arrived) or self.stop_reason
        if due and self.context.trains:  # a timing-only run's model is its initial one: nothing to score
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
        # a server of steps buffers what arrives until its pacer says: each client at most once between two
        round_size = len(self.context.sizes) if self.strategy.steps_the_server else self.strategy.arrivals_per_round
        bound = progress_bound(round_size, self.strategy.most_in_flight)
        self.check = SelfCheck.of(self.state, self.strategy, bound)
        buffer: list[tuple[Job, LocalResult]] = []
        events = event_queue(self.config.clock, self.state.now, self.config.time_scale)
        clients = (
            ClientTasks(self.context, self.state, events, self.config.client_workers)
            if isinstance(events, PacedQueue)
            else None
        )
        self.dispatcher = Dispatcher(self.context, self.state, buffer, self.check, events, clients)
        self.unaggregated = Unaggregated(self.state, self.check, self.dispatcher.withdraw)
        round_of = CompassRound if self.strategy.schedules_groups else OpenRound
        self.round = round_of(self.context, self.state, buffer, self.dispatcher, self.unaggregated, self.out)
        self.grid = EvaluationGrid(self.context, self.state, self.dispatcher)
        logs = open_logs(self.context, self.out, resumed[1] if resumed else None, self.state.version)
        try:
            if clients is None:
                self.serve(logs)
            else:
                asyncio.run(self.serve_paced(logs, clients))
            if logs.evaluations is not None:
                self.grid.catch_up(logs.evaluations)
            texts = logs.settled_texts()
        finally:
            logs.close()
            if clients is not None:
                clients.write_wall(self.out)
        if self.strategy.drops_stale:
            warn_of_starved(texts[EVENTS], self.config)
        clock = None
        if isinstance(events, PacedQueue) and clients is not None:
            clock = events.record() | clients.record()
            if not clients.measures:  # a measured run's time is the machine's, late or not
                warn_if_late(clock)
        return write_outputs(self.out, self.context, self.state, self.stop_reason, self.elapsed(), texts, clock)


def warn_if_late(clock: dict) -> None:
    """One line on stderr where the machine did not keep the real clock's pace: the outputs are still the
    virtual run's (its order kept), but the run was longer than paced."""
    if not clock["late_batches"] and not clock["late_dispatches"]:
        return
    print(
        f"warning: the machine fell behind the real clock: {clock['late_batches']} event batch(es) served late "
        f"(at most {clock['most_behind_seconds']} s), {clock['late_dispatches']} arrival(s) waited for their "
        f"training (the first: client, dispatch {clock['first_late_dispatch']}); the outputs are the virtual "
        "run's, its wall time longer than paced (raise time_scale or client_workers)",
        file=sys.stderr,
        flush=True,
    )


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
    shared_link = context.system.server is not None
    groups = context.strategy.schedules_groups
    memory = context.strategy.initial_memory(context.sizes)
    return SimulationState.fresh(model_state, context.config.seed, num_clients, own_models, shared_link, groups, memory)


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
        context.config.eval_every_seconds is not None,
        context.validation_images is not None,
        context.strategy.cuts_local_work,
    )
