"""Evaluation on a virtual-time grid (`eval_every_seconds`, docs/design.md "Training"): the global model
as it stands at t = Δ, 2Δ, … evaluated on the test set, the same instants for every algorithm whatever
its rounds cost, with the work spent by then. Nothing a run trains depends on it: evaluating draws no
random number and changes no state but its own count."""

from asyncfl.models import ModelState
from asyncfl.runs.logs import CsvLog
from asyncfl.settings.config import MAX_GRID_ROWS
from asyncfl.settings.errors import InputError
from asyncfl.sim.context import RunContext
from asyncfl.sim.dispatcher import Dispatcher
from asyncfl.sim.events import Event, Kind
from asyncfl.sim.rounds import validation_metrics
from asyncfl.sim.state import SimulationState
from asyncfl.training.evaluation import evaluate


class EvaluationGrid:
    """The grid's server events and evaluations.csv's rows, over one run's context, state and dispatcher."""

    def __init__(self, context: RunContext, state: SimulationState, dispatcher: Dispatcher):
        self.context, self.state, self.dispatcher = context, state, dispatcher
        self.every = context.config.eval_every_seconds
        # The last model evaluated and its scores: a model that has not changed since (no aggregation
        # between two instants, as in a synchronous round waiting for a straggler) scores the same, bit
        # for bit, so it is not evaluated again. Held by reference: its identity is the model's.
        self.scored: tuple[ModelState, dict[str, float | None]] | None = None

    def time(self, index: int) -> float:
        """The grid's `index`-th instant, a product rather than a running sum: no drift over long runs."""
        assert self.every is not None
        return index * self.every

    def start(self) -> None:
        """Schedule the first instant not yet evaluated (a resumed run's next one)."""
        if self.every is not None:
            self.schedule(self.state.evaluations + 1)

    def schedule(self, index: int) -> None:
        self.dispatcher.events.at(Event(self.time(index), Kind.EVALUATE, (index,)))

    def on_event(self, event: Event, log: CsvLog | None) -> bool:
        """Evaluate the model standing at the event's instant, and schedule the next one while anything
        else can still happen (a run with nothing pending would wait for ever: the clock says so).
        Never the run's end."""
        assert log is not None  # evaluations.csv is open wherever the grid schedules events
        self.state.now = event.time
        (index,) = event.order
        self.evaluate(index, log)
        state = self.state
        if state.outstanding or state.waiting or self.context.world.checkins is not None:
            self.schedule(index + 1)
        return False

    def catch_up(self, log: CsvLog) -> None:
        """At the run's end, the instants at its last aggregation's time, which its final model stands at
        (an evaluation at t comes after every other event at t)."""
        if self.every is None:
            return
        while self.time(self.state.evaluations + 1) <= self.state.now:
            self.evaluate(self.state.evaluations + 1, log)

    def scores(self, model: ModelState) -> dict[str, float | None]:
        """The model's test (and validation) loss and accuracy; the last ones again for the same model."""
        if self.scored is not None and self.scored[0] is model:
            return self.scored[1]
        context = self.context
        if not context.trains:  # a timing-only run: the work spent by each instant, no model scored
            return {"test_loss": None, "test_accuracy": None}
        loss, accuracy = evaluate(context.model, model, context.test_images, context.test_labels)
        scores: dict[str, float | None] = {"test_loss": loss, "test_accuracy": accuracy}
        if context.validation_images is not None:
            scores["validation_loss"], scores["validation_accuracy"] = validation_metrics(context, model)
        self.scored = (model, scores)
        return scores

    def evaluate(self, index: int, log: CsvLog) -> None:
        if index > MAX_GRID_ROWS:  # with max_virtual_time the config refuses it; without, no end is known
            raise InputError(
                f"eval_every_seconds = {self.every!r} has scored the model {MAX_GRID_ROWS:,} times by virtual time "
                f"{self.time(index):g} s and the run goes on (evaluations.csv has no end without max_virtual_time); "
                "set max_virtual_time, or a coarser eval_every_seconds"
            )
        state, context = self.state, self.context
        in_flight = sum(self.time(index) - job.dispatch_time for job in state.outstanding.values())
        row: dict[str, float | None] = {
            "virtual_time": self.time(index),
            "round": state.version,
            "updates": state.aggregated(len(self.dispatcher.buffer)),
            "dispatched": state.dispatched,
            "busy_seconds": state.busy_seconds + in_flight,
            "bytes_moved": context.model_bytes * (state.dispatched + state.uploads),
            **self.scores(state.global_model),
        }
        log.append([row])
        state.evaluations = index
