"""What a run costs on a device, from the table of measured costs (config/costs.csv), for the minutes its
job asks a cluster for (docs/cluster.md "Your cluster").

A run's work is counted, not timed: the client updates it trains (`run_updates`), each `local_epochs`
passes over a client of average size in batches of `batch_size`, and the samples its evaluations score.
The table gives, per device kind and model, what `asyncfl bench --costs` measured there: one training
step's seconds at the batch it measured, one scored sample's, and a run's start (imports, data, setup).
A step is charged at least the measured step's time, more in proportion to a larger batch: on a GPU a
small model's step costs about the same at any batch (launches and small kernels), on a CPU it grows
with the batch, so the charge bounds both. Pure and torch-free: the workflow reads it while it parses.
"""

import csv
import math
import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from asyncfl.settings.config import TrainConfig, make_config
from asyncfl.settings.errors import InputError
from asyncfl.settings.names import ASYNCHRONOUS, MODELS, TIMING_ONLY, updates_per_round
from asyncfl.settings.numbers import finite

# Training and test samples of each dataset as its loader serves them (digits: scikit-learn's 1,797 in
# data/digits.py's fixed 80/20 split); tests/planning/test_run_cost.py checks them against the real loaders
DATASET_SIZES = {"mnist": (60_000, 10_000), "fashion-mnist": (60_000, 10_000), "cifar10": (50_000, 10_000)}
DATASET_SIZES["digits"] = (1_437, 360)
DEVICE_KIND = re.compile(r"[a-z0-9][a-z0-9._-]*")
MAX_SAFETY = 100.0


@dataclass(frozen=True)
class MeasuredCost:
    """One row of the cost table: what a model's run costs on one device kind, and where it was measured.

    Attributes:
        device: the device kind (`cuda-h100-80gb-hbm3`, `cpu-avx512-2threads`: `bench.costs.device_kind`).
        model: the model (names.MODELS).
        batch_size: the batch of the measured steps.
        step_seconds: one client training step at that batch (the run's trainer, fp32).
        scored_sample_seconds: one sample of an evaluation (test or validation loss and accuracy).
        start_seconds: a run's start: the training stack's imports, the data on the device, its setup.
        measured: the date, torch and commit of the measure, or the source of a row entered by hand.
    """

    device: str
    model: str
    batch_size: int
    step_seconds: float
    scored_sample_seconds: float
    start_seconds: float
    measured: str

    def run_seconds(self, work: "RunWork") -> float:
        """The measured seconds of a run of `work`, before any safety factor."""
        step = self.step_seconds * max(1.0, work.batch_size / self.batch_size)
        gradient_sample = self.step_seconds / self.batch_size  # a full-batch gradient's sample: a training one's
        return (
            self.start_seconds
            + work.steps * step
            + work.scored_samples * self.scored_sample_seconds
            + work.gradient_samples * gradient_sample
        )


COLUMNS = tuple(field.name for field in fields(MeasuredCost))
NUMBERS = ("step_seconds", "scored_sample_seconds", "start_seconds")


@dataclass(frozen=True)
class RunWork:
    """What a run computes: client training steps of `batch_size`, samples scored by its evaluations, and
    samples of its full-batch gradients (`eval_gradient`)."""

    steps: int
    batch_size: int
    scored_samples: int
    gradient_samples: int


def read_cost_table(path: Path) -> dict[tuple[str, str], MeasuredCost]:
    """The cost table at `path`, checked: its columns, one row per device kind and model, sizes and
    seconds positive and finite. Raises InputError naming the file, the row and what to fix."""
    try:
        with open(path, newline="") as stream:
            lines = list(csv.reader(stream))
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise InputError(f"cost table {path}: cannot be read ({error}); `git checkout config/costs.csv`") from None
    header = tuple(lines[0]) if lines else ()
    if header != COLUMNS:
        raise InputError(f"cost table {path}: columns {', '.join(header) or 'none'}; expected {', '.join(COLUMNS)}")
    table: dict[tuple[str, str], MeasuredCost] = {}
    for line, fields_ in enumerate(lines[1:], start=2):
        where = f"cost table {path}, line {line}"
        if len(fields_) != len(COLUMNS):
            raise InputError(f"{where}: {len(fields_)} fields, {len(COLUMNS)} expected ({', '.join(COLUMNS)})")
        cost = measured_cost(dict(zip(COLUMNS, fields_, strict=True)), where)
        if (cost.device, cost.model) in table:
            raise InputError(f"cost table {path}, line {line}: a second row of {cost.device} {cost.model}; keep one")
        table[cost.device, cost.model] = cost
    return table


def measured_cost(row: dict[str, str], where: str) -> MeasuredCost:
    if not DEVICE_KIND.fullmatch(row["device"]):
        raise InputError(f"{where}: device {row['device']!r}: lower-case letters, digits, '.', '_' and '-'")
    if row["model"] not in MODELS:
        raise InputError(f"{where}: model {row['model']!r}; one of {', '.join(MODELS)}")
    numbers: dict[str, Any] = {}
    for column in ("batch_size", *NUMBERS):
        try:
            value = int(row[column]) if column == "batch_size" else float(row[column])
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value > 0 and value < 1e9):
            raise InputError(f"{where}: {column} {row[column]!r}: a positive number")
        numbers[column] = value
    return MeasuredCost(row["device"], row["model"], measured=row["measured"], **numbers)


def run_work(settings: dict[str, Any], algorithm: str, j: int, dataset: str, clients: int, kept: float) -> RunWork:
    """The work of one run of `settings` (`asyncfl train`'s, besides algorithm and J) on `dataset` split
    over `clients` clients who keep `kept` of its training set (the rest is the validation split)."""
    config = make_config({**settings, "algorithm": algorithm, "clients_per_round": j})
    if config.trainer == TIMING_ONLY:
        return RunWork(0, config.batch_size, 0, 0)
    train_samples, test_samples = DATASET_SIZES[dataset]
    per_client = train_samples * kept / clients
    updates = run_updates(config, per_client)
    rounds = math.ceil(updates / updates_per_round(algorithm, j, config.buffer_size))
    if config.eval_every_updates is not None:
        evaluations = updates // config.eval_every_updates + 1
    else:
        evaluations = rounds // config.eval_every + 1
    grid = 0
    if config.eval_every_seconds is not None and config.max_virtual_time is not None:
        grid = math.floor(config.max_virtual_time / config.eval_every_seconds) + 1
    scored = test_samples + round(train_samples * (1 - kept))  # the test set and the validation split
    steps = updates * config.local_epochs * math.ceil(per_client / config.batch_size)
    gradient = evaluations * round(train_samples * kept) if config.eval_gradient else 0
    return RunWork(steps, config.batch_size, (evaluations + grid) * scored, gradient)


def run_updates(config: TrainConfig, per_client: float) -> int:
    """Client updates a run of `config` trains: its update budget, or rounds × J. Under a virtual-time
    budget alone, an upper estimate: the clients it keeps training (J; M for the asynchronous algorithms;
    over-selected and rejected dispatches are not trained) × T over one dispatch at speed 1 of a client
    of `per_client` samples (stragglers only lower it)."""
    j = config.clients_per_round
    if config.max_updates or config.max_virtual_time is None:
        return config.max_updates or config.rounds * j
    compute = config.seconds_per_dispatch or config.local_epochs * per_client * config.seconds_per_sample
    dispatch = compute + config.latency_median
    in_flight = config.concurrency_or_default if config.algorithm in ASYNCHRONOUS else j
    return math.ceil(in_flight * config.max_virtual_time / dispatch)


def check_cost(cost: dict[str, Any], table: dict[tuple[str, str], MeasuredCost]) -> None:
    """`resources.cost` against the table: a device kind it has rows of, a finite safety factor ≥ 1."""
    safety, device = cost["safety"], cost.get("device")
    number = isinstance(safety, int | float) and not isinstance(safety, bool)
    if not (number and finite(safety) and 1 <= safety <= MAX_SAFETY):
        raise InputError(
            f"resources.cost.safety is {safety!r}: a factor from 1 to {MAX_SAFETY:g} over the measured cost "
            "(a job asking for less than measured is killed at its limit)"
        )
    kinds = sorted({kind for kind, _ in table})
    if device is not None and device not in kinds:
        raise InputError(
            f"resources.cost.device is {device!r}, which config/costs.csv has no row of; its device kinds: "
            f"{', '.join(kinds) or 'none'} (measure yours with `asyncfl bench --costs config/costs.csv`), or null"
        )
