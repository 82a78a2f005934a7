"""What a run records (docs/outputs.md "Run folders"): append-only CSV logs that a resumed run restores from its
checkpoint, the rows that go into them, and the progress shown while it runs.

A log's text is kept in memory, and that copy is the one a checkpoint stores and run.json hashes.
Rows also go to the file at once, through a descriptor held open, for whoever watches the run; the
file is checked against the memory copy at every checkpoint and at the end, and written again whole
where it differs (deleted, replaced or cut short by someone else), so a run never vouches for a log
it did not write whole.

Numbers are written with Python's shortest round-trip repr, so equal runs give equal bytes.
Wall-clock seconds differ between equal runs, so they live in their own file
(timings.csv) and metrics.csv stays byte-reproducible.
"""

import csv
import io
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from tqdm import tqdm

from asyncfl.files import append_whole, open_log, same_file, write_text
from asyncfl.planning.layout import EVALUATIONS, EVENTS, METRICS, TIMINGS

METRICS_COLUMNS = (
    "round",
    "virtual_time",
    "train_loss",
    "test_loss",
    "test_accuracy",
    "mean_staleness",
    "max_staleness",
    "update_norm",
    "lr",
    "global_train_loss",
    "gradient_norm_squared",
)
# metrics.csv of the algorithms that emulate the paper's reference code (`Strategy.logs_reference_loss`)
# adds the "server loss" as that code computed it, beside asyncfl's own proxy
AS_CODED_COLUMNS = ("train_loss_as_coded",)
# events.csv of a run whose clients have links (`bandwidth_median` set) adds each dispatch's phases
PHASE_COLUMNS = ("download_seconds", "compute_seconds", "upload_seconds")
# a run some of whose dispatches may never be aggregated (lost, discarded, rejected: `sim.outcomes`)
# adds a row per such dispatch to events.csv, with why in `lost`; its metrics.csv adds the accounting
# columns that apply to it (`outcomes.accounting_columns`)
LOSS_EVENT_COLUMNS = ("lost",)
# a run with partial work at a deadline (sync's `partial_work`), or whose scheduler gives each dispatch its
# steps (FedCompass's), adds the samples each update trained: n_samples stays the client's size, and a cut
# update trained fewer than local_epochs × n_samples
PARTIAL_COLUMNS = ("samples_trained",)
EVENTS_COLUMNS = (
    "round",
    "client",
    "dispatch_version",
    "dispatch_time",
    "arrival_time",
    "staleness",
    "coefficient",
    "lr",
    "epochs_run",
    "n_samples",
    "train_loss",
)
# What only training makes, left empty in both logs by a timing-only run (`trainer: none`), which trains
# nothing and keeps its initial model: the losses, the epochs, the step sizes and the model's movement
TRAINING_COLUMNS = ("train_loss", "train_loss_as_coded", "epochs_run", "lr", "update_norm")
TIMINGS_COLUMNS = ("round", "wall_seconds")
# evaluations.csv, a run that evaluates on a time grid (`eval_every_seconds`): the global model standing at
# each grid time, with the work spent by then (client updates aggregated, dispatches, client-busy seconds,
# the model bytes moved: a download per dispatch, an upload per update that reached the server)
# metrics.csv and evaluations.csv of a run whose partition holds a validation split add its metrics
VALIDATION_COLUMNS = ("validation_loss", "validation_accuracy")
EVALUATION_COLUMNS = (
    "virtual_time",
    "round",
    "updates",
    "dispatched",
    "busy_seconds",
    "bytes_moved",
    "test_loss",
    "test_accuracy",
)


def cell(value: object) -> str:
    """One CSV cell: a missing value (None: not evaluated this round) is empty, floats use their
    shortest exact repr (nan and inf included, so a diverged value never reads as a missing one)."""
    if value is None:
        return ""
    return repr(value) if isinstance(value, float) else str(value)


class CsvLog:
    """An append-only CSV log with a fixed header: its text in memory, its rows on disk as they come."""

    def __init__(self, path: Path, columns: tuple[str, ...], resumed_text: str | None = None):
        """Start the log afresh, or with the text it had at a checkpoint (the file itself may be gone:
        Snakemake deletes the outputs of a failed job)."""
        self.path, self.columns = Path(path), columns
        self.parts = [",".join(columns) + "\n" if resumed_text is None else resumed_text]
        self.descriptor = open_log(self.path, self.parts[0])

    def append(self, rows: list[dict]) -> None:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerows([[cell(row[column]) for column in self.columns] for row in rows])
        append_whole(self.descriptor, self.path, buffer.getvalue())
        self.parts.append(buffer.getvalue())

    def text(self) -> str:
        """The whole log as this run wrote it."""
        if len(self.parts) > 1:
            self.parts = ["".join(self.parts)]
        return self.parts[0]

    def settle(self) -> None:
        """Make the file at `path` hold exactly the log's text: rewritten whole if anyone else touched it."""
        text = self.text()
        if same_file(self.descriptor, self.path) and self.path.read_bytes() == text.encode():
            return
        os.close(self.descriptor)
        write_text(self.path, text)
        self.descriptor = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW)

    def close(self) -> None:
        os.close(self.descriptor)


class Progress:
    """A progress bar on a terminal; plain periodic lines otherwise (SLURM logs)."""

    def __init__(self, total: int, start: int, stream: TextIO | None = None):
        stream = stream or sys.stderr  # looked up now: the process's stderr may have been replaced
        self.total, self.interactive = total, stream.isatty()
        self.every = max(1, total // 20)
        self.bar = tqdm(total=total, initial=start, unit="round", file=stream) if self.interactive else None

    def update(self, round_: int, virtual_time: float, train_loss: float | None, test_accuracy: float | None) -> None:
        accuracy = "n/a" if test_accuracy is None else f"{test_accuracy:.4f}"
        loss = "n/a" if train_loss is None else f"{train_loss:.4f}"
        if self.bar is not None:
            self.bar.set_postfix_str(f"virtual {virtual_time:.1f} s, test acc {accuracy}", refresh=False)
            self.bar.update(round_ - self.bar.n)
        elif round_ % self.every == 0 or round_ == self.total:
            print(
                f"round {round_}/{self.total}  virtual time {virtual_time:.1f} s  train loss {loss}  "
                f"test accuracy {accuracy}",
                flush=True,
            )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


@dataclass
class Aggregation:
    """One server aggregation, as the logs record it: the round's jobs and what became of each."""

    version: int  # the global version this aggregation created (the round number)
    now: float  # virtual time of the aggregation
    clients: Sequence[int]
    dispatch_versions: Sequence[int]
    dispatch_times: Sequence[float]
    arrival_times: Sequence[float]
    stalenesses: Sequence[int]  # τ = version at aggregation − version at dispatch
    lrs: Sequence[float]  # each job's learning rate of its first local epoch
    sizes: Sequence[int]
    train_losses: Sequence[float]
    epochs_run: Sequence[int]
    mean_epoch_losses: Sequence[float]  # each job's mean over its epochs' losses
    coefficients: Sequence[float]  # each update's coefficient in the new global model
    update_norm: float
    test_loss: float | None = None  # set when the round evaluates the global model
    test_accuracy: float | None = None
    global_train_loss: float | None = None  # L(θ_v) on the partition's training samples, when evaluated
    gradient_norm_squared: float | None = None  # ‖∇L(θ_v)‖² on the same samples (Theorem 1's quantity)
    validation_loss: float | None = None  # on the validation split, when evaluated and the partition has one
    validation_accuracy: float | None = None
    phases: Sequence[tuple[float, float, float]] = ()  # each job's (download, compute, upload) seconds, with links
    samples_trained: Sequence[int] = ()  # each job's samples trained, under partial work
    losses: Sequence[dict] = ()  # events.csv's rows of the dispatches set aside since the previous aggregation
    accounting: dict[str, int] = field(default_factory=dict)  # metrics.csv's accounting cells, where logged
    trained: bool = True  # false in a timing-only run (`trainer: none`): TRAINING_COLUMNS are left empty

    @property
    def train_loss(self) -> float:
        """The paper's "server loss": the n-weighted mean last-epoch training loss of the aggregated clients."""
        return sum(n * loss for n, loss in zip(self.sizes, self.train_losses, strict=True)) / sum(self.sizes)

    @property
    def train_loss_as_coded(self) -> float:
        """The "server loss" as the paper's reference code computed it: the unweighted mean over the
        round's clients of each one's mean loss over its local epochs (a training-loss proxy too)."""
        return sum(self.mean_epoch_losses) / len(self.mean_epoch_losses)

    def metrics_row(self) -> dict:
        taus = self.stalenesses
        row = {
            "round": self.version,
            "virtual_time": self.now,
            "train_loss": self.train_loss,
            "test_loss": self.test_loss,
            "test_accuracy": self.test_accuracy,
            "mean_staleness": sum(taus) / len(taus),
            "max_staleness": max(taus),
            "update_norm": self.update_norm,
            "lr": sum(self.lrs) / len(self.lrs),
            "global_train_loss": self.global_train_loss,
            "gradient_norm_squared": self.gradient_norm_squared,
            "validation_loss": self.validation_loss,
            "validation_accuracy": self.validation_accuracy,
            "train_loss_as_coded": self.train_loss_as_coded,
            **self.accounting,
        }
        return row if self.trained else row | dict.fromkeys(TRAINING_COLUMNS)

    def event_rows(self) -> list[dict]:
        columns = zip(
            self.clients,
            self.dispatch_versions,
            self.dispatch_times,
            self.arrival_times,
            self.stalenesses,
            self.coefficients,
            self.lrs,
            self.epochs_run,
            self.sizes,
            self.train_losses,
            strict=True,
        )
        rows = [dict(zip(EVENTS_COLUMNS[1:], row, strict=True), round=self.version) for row in columns]
        if not self.trained:
            rows = [row | dict.fromkeys(TRAINING_COLUMNS) for row in rows]
        for row, phases in zip(rows, self.phases, strict=False):  # none where the clients have no links
            row.update(zip(PHASE_COLUMNS, phases, strict=True))
        for row, samples in zip(rows, self.samples_trained, strict=False):  # none without partial work
            row[PARTIAL_COLUMNS[0]] = samples
        return [*self.losses, *({**row, "lost": ""} for row in rows)]


class RunLogs:
    """The three CSV logs of a run folder and its progress display."""

    def __init__(
        self,
        out: Path,
        resumed: dict[str, str] | None,
        rounds: int,
        start_round: int,
        as_coded: bool = False,
        phases: bool = False,
        accounting: tuple[str, ...] = (),
        losses: bool = False,
        grid: bool = False,
        validated: bool = False,
        partial: bool = False,
    ):
        """`as_coded`: metrics.csv also holds AS_CODED_COLUMNS (`Strategy.logs_reference_loss`);
        `phases`: events.csv also holds PHASE_COLUMNS (the clients have links); `accounting`: metrics.csv's
        accounting columns; `losses`: events.csv holds LOSS_EVENT_COLUMNS (dispatches can be set aside);
        `grid`: the run also writes evaluations.csv; `validated`: both hold VALIDATION_COLUMNS; `partial`:
        events.csv holds PARTIAL_COLUMNS (sync's partial work)."""
        resumed = resumed or {}
        validation = VALIDATION_COLUMNS if validated else ()
        columns = METRICS_COLUMNS + (AS_CODED_COLUMNS if as_coded else ()) + accounting + validation
        self.metrics = CsvLog(out / METRICS, columns, resumed.get(METRICS))
        events = EVENTS_COLUMNS + (PHASE_COLUMNS if phases else ()) + (LOSS_EVENT_COLUMNS if losses else ())
        events += PARTIAL_COLUMNS if partial else ()
        self.events = CsvLog(out / EVENTS, events, resumed.get(EVENTS))
        self.timings = CsvLog(out / TIMINGS, TIMINGS_COLUMNS, resumed.get(TIMINGS))
        grid_columns = EVALUATION_COLUMNS + validation
        self.evaluations = CsvLog(out / EVALUATIONS, grid_columns, resumed.get(EVALUATIONS)) if grid else None
        self.progress = Progress(rounds, start_round)

    def record(self, aggregation: Aggregation, wall_seconds: float) -> None:
        self.metrics.append([aggregation.metrics_row()])
        self.events.append(aggregation.event_rows())
        self.timings.append([{"round": aggregation.version, "wall_seconds": wall_seconds}])
        loss = aggregation.train_loss if aggregation.trained else None
        self.progress.update(aggregation.version, aggregation.now, loss, aggregation.test_accuracy)

    def settled_texts(self) -> dict[str, str]:
        """The logs' texts by file name, for a checkpoint or run.json, after making the files on disk hold them."""
        logs = {METRICS: self.metrics, EVENTS: self.events, TIMINGS: self.timings}
        if self.evaluations is not None:
            logs[EVALUATIONS] = self.evaluations
        for log in logs.values():
            log.settle()
        return {name: log.text() for name, log in logs.items()}

    def close(self) -> None:
        for log in (self.metrics, self.events, self.timings, self.evaluations):
            if log is not None:
                log.close()
        self.progress.close()
