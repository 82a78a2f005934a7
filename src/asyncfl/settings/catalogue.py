"""Every figure asyncfl draws, registered once (docs/development.md "Adding a figure").

One `Figure` entry in `CATALOGUE` is the whole registration: the workflow's rules take their outputs
from it, the report its caption (workflow/report/KEY.rst), `asyncfl figures` its drawer (the function
KEY of asyncfl.analysis.drawers) and its size. Kept free of heavy imports: the workflow reads it while
it plans the DAG.
"""

from dataclasses import dataclass, replace
from enum import StrEnum


class Scope(StrEnum):
    """Which command draws a figure, from which runs, and which workflow rule asks for it."""

    EXPERIMENT = "experiment"  # asyncfl figures, from every run of a plain experiment (rule figures)
    EMULATION = "emulation"  # asyncfl figures --emulation, where the experiment runs all it `compares`
    SEVERITY_SWEEP = "severity sweep"  # asyncfl stragglers, from every run of a severity sweep
    THEORY = "theory"  # asyncfl theory, from one finished run of a plain experiment
    TUNING = "tuning"  # asyncfl select, from the tuning runs of a sweep with `tune:`
    MEASURED = "measured"  # asyncfl sim-vs-real, from an experiment's runs with measured durations


@dataclass(frozen=True)
class Figure:
    """One figure, as the command that draws it, the workflow and the tests know it.

    Attributes:
        key: its drawer (the function KEY of asyncfl.analysis.drawers, for the figures `asyncfl figures`
            draws), its report caption (workflow/report/KEY.rst) and its name where `per_j` is false.
        title: shown above the panels, after the experiment's name; "{j}" stands for "J = reference J".
        scope: the command that draws it and the runs it reads.
        per_j: named KEY_J{J}, its name saying which J it shows (other figures show one J too).
        panels: side by side, one column width each.
        rows: of panels, one above the other (the figure's height is shared among them).
        height: inches, plus `height_per_client` for each client (a figure with a row per client).
        compares: for a figure of the paper's code as it ran, the algorithms it compares: it is drawn
            (by its own workflow rule) where the experiment runs every one of them.
        reference_j: the J its single-J panels show, once `at` has placed it in an experiment.
        timing: drawn from the clock alone (who was dispatched when, staleness, the partition): a
            timing-only experiment's figures (`trainer: none`), which have no loss or score to draw.
    """

    key: str
    title: str
    scope: Scope = Scope.EXPERIMENT
    per_j: bool = False
    panels: int = 1
    rows: int = 1
    height: float = 2.6
    height_per_client: float = 0.0
    compares: tuple[str, ...] = ()
    reference_j: int | None = None  # set by `at`
    timing: bool = False

    @property
    def name(self) -> str:
        """The file stem (NAME.png, NAME.pdf) and the report's label."""
        return f"{self.key}_J{self.reference_j}" if self.per_j else self.key

    def at(self, reference_j: int) -> "Figure":
        """This figure as drawn for an experiment whose single-J figures are at `reference_j` (itself, for a
        figure that does not say which J it shows)."""
        if not self.per_j and "{j}" not in self.title:
            return self
        title = self.title.replace("{j}", f"J = {reference_j}")
        return replace(self, title=title, reference_j=reference_j)


CATALOGUE = (
    Figure("server_loss", "AFL server loss, {j}", per_j=True),
    Figure("client_selection", "Client participation, {j}", per_j=True, height=3.6, timing=True),
    Figure("participation", "Updates per client vs duration, {j}", per_j=True, height=3.4, timing=True),
    Figure("participation_sweep", "AFL server loss by clients per round"),
    Figure("afl_vs_sync", "AFL vs synchronous FL at equal client updates, {j}"),
    Figure("test_metrics_updates", "Global model on the test set by client updates, {j}", panels=2, height=3.4),
    Figure("test_metrics_time", "Global model on the test set over virtual time, {j}", panels=2, height=3.4),
    Figure("staleness_distribution", "Staleness of aggregated updates, {j}", height=3.0, timing=True),
    Figure(
        "partition_heatmap", "Training samples per client and class", height=0.9, height_per_client=0.18, timing=True
    ),
    Figure("algorithms_compared", "Algorithms compared at their budget, {j}", panels=2),
    Figure("gradient_norm", "Training-gradient norm of the global model, {j}", panels=2, height=4.4),
    Figure(
        "system_timeline",
        "Clients over virtual time, {j}",
        panels=2,
        rows=2,
        height=2.0,
        height_per_client=0.3,
        timing=True,
    ),
    Figure(
        "as_coded_vs_described",
        "AFL as the paper's code runs it vs as the paper describes it",
        Scope.EMULATION,
        panels=2,
        height=3.6,
        compares=("afl", "afl_as_coded"),
    ),
    # AFL vs sync as published (both as the paper's code ran them) beside AFL vs sync as described
    Figure(
        "afl_vs_sync_as_published",
        "AFL vs synchronous FL as the paper's code ran them, and as described",
        Scope.EMULATION,
        panels=3,
        height=3.6,
        compares=("afl", "sync", "afl_as_coded", "sync_as_coded"),
    ),
    # With the table of its numbers (NAME.csv)
    Figure(
        "straggler_claim",
        "Stragglers: time to stay above the target accuracy, and accuracy at the budget, by severity",
        Scope.SEVERITY_SWEEP,
        panels=2,
        height=5.4,
    ),
    # One column per severity (its `panels` the sweep's count of severities)
    Figure(
        "straggler_curves",
        "Stragglers: test accuracy over virtual time and over client work",
        Scope.SEVERITY_SWEEP,
        panels=3,
        rows=2,
        height=5.2,
    ),
    # One panel per target; its numbers are straggler_verdicts.csv's
    Figure(
        "async_advantage",
        "Where asynchrony wins: asynchronous minus synchronous FL at equal clients in flight",
        Scope.SEVERITY_SWEEP,
        height=1.6,
    ),
    # One panel per severity; its numbers are NAME.csv beside it
    Figure(
        "verdict_over_budget",
        "Verdicts over the budget: asynchronous minus plain synchronous FL, runs cut at T/4 … T",
        Scope.SEVERITY_SWEEP,
        panels=3,
        height=2.8,
    ),
    # One panel per severity; its numbers are straggler_verdicts.csv's (README's figure)
    Figure(
        "verdict_summary",
        "The claim at a glance: each asynchronous name minus plain sync and minus the best synchronous answer",
        Scope.SEVERITY_SWEEP,
        panels=3,
        height=2.6,
    ),
    Figure("sampling_variance", "Variance of the sampled mean update", Scope.THEORY, height=2.8),
    # One column per measured run; with the table of its numbers (NAME.csv) and the replays it compares
    Figure(
        "sim_vs_real",
        "The simulator against measured runs: test accuracy over virtual time, and staleness",
        Scope.MEASURED,
        panels=3,
        rows=2,
        height=5.6,
    ),
    # With the table of its numbers (NAME.csv) beside the choice (tuning/chosen.json)
    Figure(
        "tuning",
        "Tuning on the validation split: time to the target at each grid point",
        Scope.TUNING,
        panels=2,
        height=3.8,
    ),
)


def scope_figures(scope: Scope, reference_j: int, timing_only: bool = False) -> list[Figure]:
    """The figures of one scope, in the catalogue's order, named and titled for `reference_j`; of a
    timing-only experiment's runs, those drawn from the clock alone."""
    return [figure.at(reference_j) for figure in CATALOGUE if figure.scope == scope and figure.timing >= timing_only]


def catalogued(key: str) -> Figure:
    """The figure of this key."""
    (figure,) = (figure for figure in CATALOGUE if figure.key == key)
    return figure
