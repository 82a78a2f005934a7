"""What a run records (SPEC §8): append-only CSV logs that a resumed run restores from its checkpoint.

Numbers are written with Python's shortest round-trip repr, so equal runs give equal bytes.
Wall-clock seconds differ between equal runs, so they live in their own file
(timings.csv) and metrics.csv stays byte-reproducible.
"""

import csv
import io
import math
import sys
from pathlib import Path

from tqdm import tqdm

METRICS_COLUMNS = ("round", "virtual_time", "train_loss", "test_loss", "test_accuracy", "mean_staleness",
                   "max_staleness", "update_norm", "lr")
EVENTS_COLUMNS = ("round", "client", "dispatch_version", "dispatch_time", "arrival_time", "staleness", "weight", "lr",
                  "epochs_run", "n_samples", "train_loss")
TIMINGS_COLUMNS = ("round", "wall_seconds")


def cell(value: object) -> str:
    """One CSV cell: missing values (None, nan) are empty, floats use their shortest exact repr."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return repr(value) if isinstance(value, float) else str(value)


class CsvLog:
    """An append-only CSV file with a fixed header, flushed after every append."""

    def __init__(self, path: Path, columns: tuple[str, ...], resumed_text: str | None = None):
        """Start the file afresh, or with the text it had at a checkpoint (the file itself may be gone:
        Snakemake deletes the outputs of a failed job)."""
        self.path, self.columns = Path(path), columns
        self.path.write_text(",".join(columns) + "\n" if resumed_text is None else resumed_text)

    def append(self, rows: list[dict]) -> None:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerows([[cell(row[column]) for column in self.columns] for row in rows])
        with open(self.path, "a") as stream:
            stream.write(buffer.getvalue())

    def text(self) -> str:
        return self.path.read_text()


class Progress:
    """A progress bar on a terminal; plain periodic lines otherwise (SLURM logs)."""

    def __init__(self, total: int, start: int, stream=sys.stderr):
        self.total, self.interactive = total, stream.isatty()
        self.every = max(1, total // 20)
        self.bar = tqdm(total=total, initial=start, unit="round", file=stream) if self.interactive else None

    def update(self, round_: int, virtual_time: float, train_loss: float, test_accuracy: float | None) -> None:
        accuracy = "n/a" if test_accuracy is None else f"{test_accuracy:.4f}"
        if self.bar is not None:
            self.bar.set_postfix_str(f"virtual {virtual_time:.1f} s, test acc {accuracy}", refresh=False)
            self.bar.update(round_ - self.bar.n)
        elif round_ % self.every == 0 or round_ == self.total:
            print(f"round {round_}/{self.total}  virtual time {virtual_time:.1f} s  train loss {train_loss:.4f}  "
                  f"test accuracy {accuracy}", flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
