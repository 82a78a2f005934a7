"""Availability traces, the CSVs of `availability: trace` (docs/world.md "The clients' world"): read and
checked here, in the settings layer, so the workflow checks a trace while it parses, before any job runs,
and the engine reads it the same way."""

import csv
import io
import math
from pathlib import Path

from asyncfl.settings.errors import InputError
from asyncfl.settings.integrity import MAX_RECORD_BYTES, read_input


def read_trace(path: Path, clients: int) -> dict[int, list[tuple[float, float]]]:
    """A trace CSV with the header `client,start,end`: one row per online period, in virtual seconds.
    Every row is checked; the first bad one is named in one line with its fix."""
    try:
        text = read_input(path, MAX_RECORD_BYTES).decode("utf-8-sig")  # Excel's "CSV UTF-8" starts with a BOM
    except UnicodeDecodeError:
        raise InputError(f"availability_trace {path} is not a text CSV (client,start,end)") from None
    rows = list(csv.reader(io.StringIO(text)))
    if not rows or [cell.strip() for cell in rows[0]] != ["client", "start", "end"]:
        raise InputError(f"availability_trace {path}: the first line must be the header client,start,end")
    intervals: dict[int, list[tuple[float, float]]] = {c: [] for c in range(clients)}
    for line, row in enumerate(rows[1:], start=2):
        where = f"availability_trace {path}, line {line}"
        try:
            client, start, end = int(row[0]), float(row[1]), float(row[2])
        except (ValueError, IndexError):
            raise InputError(f"{where}: {','.join(row)!r} is not an integer client and two numbers") from None
        if len(row) != 3:
            raise InputError(f"{where}: {','.join(row)!r} has {len(row)} fields; the header client,start,end has 3")
        if not 0 <= client < clients:
            raise InputError(f"{where}: client {client} is not one of the run's clients 0..{clients - 1}")
        if not (math.isfinite(start) and math.isfinite(end) and 0 <= start < end):
            raise InputError(f"{where}: an online period needs 0 <= start < end, finite; got {start}, {end}")
        intervals[client].append((start, end))
    for client, spans in intervals.items():
        spans.sort()
        for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
            if start <= end:
                raise InputError(
                    f"availability_trace {path}: client {client}'s online periods overlap or touch at {start}; "
                    "merge them into one row"
                )
    if not any(intervals.values()):
        raise InputError(f"availability_trace {path} has no online period; add rows client,start,end")
    return intervals
