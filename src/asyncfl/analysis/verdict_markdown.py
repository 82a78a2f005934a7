"""The verdicts of one row of a straggler sweep as Markdown tables, for docs/results.md and README: written
from straggler_verdicts.csv by `asyncfl verdict-table`, so that a published table is the run's own
numbers, not a transcription of them.

Two tables: each run name's seeds that stayed above the target by T and its restricted mean time (a run
that never stays counts T), and each asynchronous name (rows) against each synchronous one (columns),
every cell the primary seed set's difference, interval and adjusted verdict (`verdicts.primary_set`),
what the other seed sets say of it (`verdicts.replication_of`), and, where the sweep declared a power,
the difference its seeds could detect.
"""

import math
from pathlib import Path

import pandas as pd

from asyncfl.analysis.run_styles import display_name
from asyncfl.analysis.verdicts import (
    ALL,
    DISCOVERY,
    EQUIVALENT,
    FASTER,
    METRIC_WORDS,
    METRICS,
    MIN_SEEDS,
    REPLICATION,
    SIGN_DIFFERS,
    SLOWER,
    VERDICTS,
    primary_set,
    replication_of,
)
from asyncfl.settings.errors import InputError
from asyncfl.settings.names import ALGORITHMS, NAME, base_algorithm

# What every cell needs; a table from an older asyncfl may lack the optional ones (budget, seed sets,
# equivalence, power), never these
REQUIRED = (
    "target",
    "severity",
    "metric",
    "reference",
    "other",
    "seeds",
    "reference_time",
    "other_time",
    "reference_reached",
    "other_reached",
    "difference",
    "ci_low",
    "ci_high",
    "p_holm",
    "family_size",
    "verdict",
)
DECIDED = (FASTER, SLOWER, EQUIVALENT)
SEED_SETS = (ALL, DISCOVERY, REPLICATION)
# Numbers every row holds (and the optional columns' where present), finite in every row: a cell of text,
# NaN or inf there is a damaged table, never a number to print
FINITE = ("target", "budget", "seeds", "reference_time", "other_time", "reference_reached", "other_reached",
          "family_size")  # fmt: skip
COUNTS = ("seeds", "reference_reached", "other_reached", "family_size")
# Numbers a comparison's verdict rests on: finite wherever it decided anything
DECIDING = ("difference", "ci_low", "ci_high", "p_holm")
NUMBERS = (*FINITE, *DECIDING, "equivalence_margin", "p_equivalence_holm", "detectable_difference")
KEY = ("metric", "severity", "target", "budget", "seed_set", "reference", "other")


def read_verdicts(path: Path) -> pd.DataFrame:
    """straggler_verdicts.csv, checked: a CSV with every column a cell needs and at least one row."""
    try:
        table = pd.read_csv(path)
    except FileNotFoundError:
        raise InputError(f"--verdicts {path}: no such file (asyncfl stragglers writes it)") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as error:
        raise InputError(f"--verdicts {path}: not a verdicts CSV ({str(error).splitlines()[0]})") from None
    missing = [column for column in REQUIRED if column not in table]
    if missing:
        raise InputError(f"--verdicts {path}: lacks the columns {', '.join(missing)} (not straggler_verdicts.csv?)")
    if table.empty:
        raise InputError(f"--verdicts {path}: holds no comparison")
    return checked_cells(table, path)


def checked_cells(table: pd.DataFrame, path: Path) -> pd.DataFrame:
    """The table with its numbers as numbers, refused in one line naming the column and row where a cell
    is not what `asyncfl stragglers` writes: text or a non-finite value where a number must be, a count
    that is no whole number, an unknown verdict or seed set, a run name no workflow makes or no algorithm
    has, a comparison twice."""

    def refuse(column: str, index: int, what: str) -> InputError:
        value = table.at[index, column]
        shown = repr(value) if isinstance(value, str) else str(value)
        return InputError(f"--verdicts {path}: column {column}, row {index + 2}: {shown} {what}")

    for column in (name for name in NUMBERS if name in table):
        numbers = pd.to_numeric(table[column], errors="coerce")
        texts = numbers.isna() & table[column].notna()
        if texts.any():
            raise refuse(column, int(texts.idxmax()), "is not a number")
        table[column] = numbers
    for column in (name for name in FINITE if name in table):
        bad = ~table[column].map(lambda value: math.isfinite(value))
        if bad.any():
            raise refuse(column, int(bad.idxmax()), "is not a finite number")
    for column in COUNTS:
        bad = (table[column] < 0) | (table[column] % 1 != 0)
        if bad.any():
            raise refuse(column, int(bad.idxmax()), "is not a count")
    for verdict, columns in ((DECIDED, DECIDING), ((EQUIVALENT,), ("equivalence_margin", "p_equivalence_holm"))):
        decided = table.verdict.isin(verdict)
        for column in columns:
            if column not in table:
                if decided.any():
                    raise InputError(f"--verdicts {path}: an {verdict[0]} verdict without a {column} column")
                continue
            bad = decided & ~table[column].map(lambda value: math.isfinite(value))
            if bad.any():
                raise refuse(column, int(bad.idxmax()), "is no number a verdict can rest on")
    few = table.verdict.isin(DECIDED) & (table.seeds < MIN_SEEDS)
    if few.any():
        raise refuse("seeds", int(few.idxmax()), f"paired seeds decide nothing (at least {MIN_SEEDS})")
    for column, allowed in (("verdict", VERDICTS), ("seed_set", SEED_SETS), ("metric", METRICS)):
        if column in table and not table[column].isin(allowed).all():
            raise refuse(column, int((~table[column].isin(allowed)).idxmax()), f"is none of {', '.join(allowed)}")
    for column in ("severity", "reference", "other"):
        bad = ~table[column].map(lambda name: isinstance(name, str) and bool(NAME.fullmatch(name)))
        if bad.any():
            raise refuse(column, int(bad.idxmax()), "is no run or severity name")
    for column in ("reference", "other"):
        bad = ~table[column].map(lambda name: base_algorithm(name) in ALGORITHMS)
        if bad.any():
            raise refuse(column, int(bad.idxmax()), "names no algorithm")
    repeated = table.duplicated([column for column in KEY if column in table], keep=False)
    if repeated.any():
        raise InputError(f"--verdicts {path}: row {int(repeated.idxmax()) + 2} and another are one comparison twice")
    return table


def number(value: float) -> str:
    """A number as short as it reads back exactly: 30, 0.78, but 0.80000001 (never rounded to another's)."""
    short = f"{value:g}"
    return short if float(short) == value else repr(float(value))


def selected(table: pd.DataFrame, severity: str, target: float, budget: float | None, path: Path) -> pd.DataFrame:
    """The rows of one severity, target and budget (default: the longest, T) at the primary time, each
    choice refused in one line naming its option and what the file holds."""

    def present(column: str) -> str:
        return ", ".join(number(value) if isinstance(value, float) else str(value) for value in table[column].unique())

    rows = table[table.metric == METRICS[0]]
    if severity not in set(rows.severity):
        raise InputError(f"--severity {severity}: {path} has {present('severity')}")
    rows = rows[rows.severity == severity]
    if not (rows.target - target).abs().lt(1e-9).any():
        raise InputError(f"--target {number(target)}: {path} has {present('target')}")
    rows = rows[(rows.target - target).abs() < 1e-9]
    if "budget" in rows:
        chosen = rows.budget.max() if budget is None else budget
        if not (rows.budget - chosen).abs().lt(1e-9).any():
            raise InputError(f"--budget {number(chosen)}: {path} has {present('budget')}")
        rows = rows[(rows.budget - chosen).abs() < 1e-9]
    elif budget is not None:
        raise InputError(f"--budget {number(budget)}: {path} was read at one budget only; leave --budget out")
    return rows


def cell(row: pd.Series, check: str | None, sets: dict[str, float]) -> str:
    """One comparison: the difference and its interval, the verdict (bold where decided) and its
    adjusted p, what the other seed sets say (`check`: `replication_of`'s word; `sets`: their mean
    differences), the detectable difference, the seeds that stayed."""
    verdict = f"equivalent within ±{row.equivalence_margin:g} s" if row.verdict == EQUIVALENT else row.verdict
    text = f"{row.difference:+.1f} [{row.ci_low:+.1f}, {row.ci_high:+.1f}] {verdict}"
    if row.verdict in DECIDED:
        p = row.p_equivalence_holm if row.verdict == EQUIVALENT else row.p_holm
        text = f"**{text}** (p {p:.2g})"
    parts = [text]
    if sets and row.seed_set == ALL:  # pooled: the two sets check the sign of a difference decided
        mark = ("✗ " if check == SIGN_DIFFERS else "✓ ") if row.verdict in (FASTER, SLOWER) else ""
        parts.append(f"{mark}sets " + " / ".join(f"{difference:+.1f}" for difference in sets.values()))
    elif sets:  # apart: the replication set's own verdict
        mark = "✓" if check == row.verdict else "✗"
        parts.append(f"{mark} replication {sets[REPLICATION]:+.1f} {check}")
    if "detectable_difference" in row and pd.notna(row.detectable_difference):
        parts.append(f"detects {row.detectable_difference:.0f}")
    parts.append(f"stay {row.reference_reached} vs {row.other_reached} of {row.seeds}")
    return "; ".join(parts)


def set_differences(table: pd.DataFrame, row: pd.Series) -> dict[str, float]:
    """The mean difference of `row`'s comparison on each seed set other than the primary one."""
    if "seed_set" not in table:
        return {}
    same = table[(table.reference == row.reference) & (table.other == row.other)]
    primary = row.seed_set
    return {
        name: float(same[same.seed_set == name].difference.iloc[0])
        for name in (DISCOVERY, REPLICATION)
        if name != primary and (same.seed_set == name).any()
    }


def times_table(rows: pd.DataFrame, budget: str) -> str:
    """Each run name: the seeds that stayed above the target by T and its restricted mean time."""
    seen: dict[str, tuple[int, int, float]] = {}
    for row in rows.itertuples():
        seen.setdefault(row.reference, (int(row.reference_reached), int(row.seeds), float(row.reference_time)))
        seen.setdefault(row.other, (int(row.other_reached), int(row.seeds), float(row.other_time)))
    lines = [f"| run name | stays above by {budget} | mean time to stay |", "|---|---|---|"]
    for name, (reached, seeds, time) in sorted(seen.items(), key=lambda item: item[1][2]):
        lines.append(f"| {display_name(name)} | {reached} of {seeds} | {time:.1f} s |")
    return "\n".join(lines)


def verdict_markdown(path: Path, severity: str, target: float, budget: float | None = None) -> str:
    """The two tables of one severity at `target` and `budget` (default: T), with a line that says what
    they are: the seeds, the family, the margin."""
    table = read_verdicts(path)
    rows = selected(table, severity, target, budget, path)
    primary = primary_set(rows)
    checks = replication_of(rows)
    at = f"{rows.budget.iloc[0]:g} s" if "budget" in rows else "T"  # a table read at one budget names none
    read_at = f"T = {at}" if "budget" in rows else "at the table's one budget T"
    synchronous = list(dict.fromkeys(primary.other))  # every name that is no reference: FedQueue's too
    asynchronous = list(dict.fromkeys(primary.reference))
    lines = [" | ".join(["| run name", *map(display_name, synchronous)]) + " |", "|---" * (1 + len(synchronous)) + "|"]
    for reference in asynchronous:
        cells = []
        for other in synchronous:
            match = primary[(primary.reference == reference) & (primary.other == other)]
            if match.empty:
                cells.append("—")
                continue
            row = match.iloc[0]
            check = checks.get((row.severity, row.metric, row.reference, row.other))
            cells.append(cell(row, check, set_differences(rows, row)))
        lines.append(" | ".join([f"| {display_name(reference)}", *cells]) + " |")
    first = primary.iloc[0]
    margin = f"; equivalent within ±{first.equivalence_margin:g} s" if "equivalence_margin" in primary else ""
    pooled = ", pooled" if "seed_set" in rows and len(set(rows.seed_set)) > 1 else ""
    sets = {ALL: pooled, DISCOVERY: " (discovery set)"}.get(first.seed_set, "") if "seed_set" in primary else ""
    heading = (
        f"{severity}, {METRIC_WORDS[METRICS[0]]} {100 * target:g} %, {read_at}: {int(first.seeds)} paired "
        f"seeds{sets}, Holm over {int(first.family_size)}{margin}"
    )
    return "\n\n".join([heading, times_table(primary, at), "\n".join(lines)]) + "\n"
