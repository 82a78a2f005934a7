"""Availability traces in the formats people have, converted to asyncfl's `client,start,end` CSV
(`asyncfl trace import`; docs/world.md "The clients' world"). No third-party trace ships with
asyncfl: these read the files their projects publish, and every error names the source's file, its
client or device, and its field or line, never the CSV being written.

- **FedScale** (`client_behave_trace`, a pickle): client id → {"active": [s…], "inactive": [e…],
  "finish_time": F, …}, seconds; FedScale's simulator holds a client online while `active[i] ≤ t mod
  F ≤ inactive[i]`, so the trace repeats every F seconds. The pickle is read with every class refused:
  only numbers, strings, lists and dicts load, so a file that would run code is an error, not a risk.
- **FLASH** (Yang et al., WWW 2021; the `user_behavior` JSON): guid → {"messages": "YYYY-mm-dd
  HH:MM:SS<TAB>state" lines, …}. A device is online, as FLASH's `Timer` has it, while it is charging
  (`battery_charged_on`), on WiFi (`wifi`; `2G`…`5G` or `unknown` end it) and locked (`screen_lock`;
  FLASH's code defines idle as locked alone, so the screen's on/off changes nothing). Times count from
  the earliest message among the chosen devices that changes a state (a battery level says nothing of
  readiness); a period still open at a device's last message is
  dropped, as FLASH's code drops it (nothing says when it ended).

Both merge periods that touch or overlap into one, as FLASH's Timer merges its ready times and as
FedScale's closed intervals mean (a client online for a whole cycle is online across its end).
Clients are the first C ids (FedScale) or guids (FLASH) in sorted order, numbered 0..C-1.
"""

import io
import json
import math
import pickle
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from asyncfl.settings.errors import InputError
from asyncfl.settings.integrity import read_input

Periods = dict[int, list[tuple[float, float]]]
FLASH_TIME = "%Y-%m-%d %H:%M:%S"
MAX_TRACE_BYTES = 4 << 30  # FedScale's and FLASH's published traces are hundreds of MB
MAX_PERIODS = 1_000_000  # ~30 MB of CSV, within what `availability: trace` reads (MAX_RECORD_BYTES)
MAX_FLASH_SPAN_DAYS = 366  # FLASH's trace covers about a week: a span of years is a mis-dated message
DECIMAL_ID = re.compile(r"-?[0-9]+")


@dataclass(frozen=True)
class ImportedTrace:
    """The online periods of clients 0..C-1, and how many periods the source lists empty (FedScale's
    inactive ≤ active: online for an instant or never), left out."""

    periods: Periods
    skipped: int = 0
    clients_in_source: int = 0  # every client (FedScale) or device (FLASH) the source lists


class PlainUnpickler(pickle.Unpickler):
    """Loads numbers, strings, lists, tuples and dicts only: every class or function is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise InputError(f"the pickle asks for {module}.{name}; a FedScale trace holds only dicts, lists and numbers")


def fedscale_periods(data: bytes, clients: int, horizon: float | None) -> ImportedTrace:
    """FedScale's availability trace as online periods, repeated every `finish_time` up to `horizon`
    virtual seconds (None: one repetition)."""
    try:
        trace = PlainUnpickler(io.BytesIO(data)).load()
    except InputError:
        raise
    except Exception as error:  # crafted bytes can raise almost any type from inside the unpickler
        raise InputError(f"not a FedScale trace pickle ({type(error).__name__}: {str(error)[:80]})") from None
    if not isinstance(trace, dict) or not trace:
        raise InputError("a FedScale trace is a dict of client id → {active, inactive, finish_time}; this is not")
    cycles = [fedscale_cycle(key, trace[key]) for key in chosen(trace, clients)]
    ratios = [1.0 if horizon is None else horizon / period for _, period, _ in cycles]  # inf for a tiny cycle
    total = sum(ratio * len(spans) for ratio, (spans, _, _) in zip(ratios, cycles, strict=True))
    if total > MAX_PERIODS:
        reach = "list" if horizon is None else f"repeat to --horizon {horizon:g} as"
        raise InputError(
            f"the first {clients} FedScale clients {reach} {total:.3g} online periods, more than {MAX_PERIODS:,}; "
            "lower --horizon or --clients"
        )
    periods = {
        client: merged(
            [(start + k * period, end + k * period) for k in range(math.ceil(ratio)) for start, end in spans]
        )
        for client, (ratio, (spans, period, _)) in enumerate(zip(ratios, cycles, strict=True))
    }
    return ImportedTrace(periods, sum(empty for _, _, empty in cycles), len(trace))


def fedscale_cycle(key: Any, entry: Any) -> tuple[list[tuple[float, float]], float, int]:
    """One FedScale client's periods within its cycle, the cycle's length, and how many empty periods
    (inactive ≤ active) it lists; every field checked and named in FedScale's terms."""
    where = f"FedScale client {key!r}"
    if not isinstance(entry, dict) or not {"active", "inactive", "finish_time"} <= entry.keys():
        raise InputError(f"{where} lacks active, inactive or finish_time")
    period = plain_number(entry["finish_time"], f"{where}: finish_time")
    if not period > 0:
        raise InputError(f"{where}: finish_time is {period:g}; a cycle lasts > 0 seconds")
    starts, ends = entry["active"], entry["inactive"]
    if not isinstance(starts, list | tuple) or not isinstance(ends, list | tuple) or len(starts) != len(ends):
        raise InputError(f"{where}: active and inactive must be lists of equal length")
    spans = []
    for index, (start, end) in enumerate(zip(starts, ends, strict=True)):
        start = plain_number(start, f"{where}: active[{index}]")
        end = plain_number(end, f"{where}: inactive[{index}]")
        if not 0 <= start <= period or not 0 <= end <= period:
            raise InputError(
                f"{where}: active[{index}] {start:g} or inactive[{index}] {end:g} lies outside its cycle "
                f"[0, finish_time {period:g}]"
            )
        spans.append((start, end))
    online = [(start, end) for start, end in spans if end > start]
    return online, period, len(spans) - len(online)


def plain_number(value: Any, where: str) -> float:
    """`value` as a finite float, or one line naming `where` it came from."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(f"{where} is {str(value)[:40]!r}, not a number of seconds")
    number = float(value) if isinstance(value, float) or abs(value) < 1 << 1000 else math.inf
    if not math.isfinite(number):
        raise InputError(f"{where} is {str(value)[:40]}; give a finite number of seconds")
    return number


def flash_periods(data: bytes, clients: int, horizon: float | None) -> ImportedTrace:
    """FLASH's state messages as the periods each device is charging, on WiFi and locked (a trace is
    as long as its messages: `horizon` only cuts, in `clipped`)."""
    try:
        trace = json.loads(data)
    except (ValueError, RecursionError) as error:  # JSONDecodeError, UnicodeDecodeError, a 5,000-digit number
        raise InputError(f"not a FLASH trace: not JSON ({str(error)[:80]})") from None
    if not isinstance(trace, dict) or not trace:
        raise InputError("a FLASH trace is a JSON object of guid → {messages: …}; this is not")
    devices = {key: flash_events(key, trace[key]) for key in chosen(trace, clients)}
    # the span the devices' states change over: a message that changes nothing (a battery level, the
    # screen on) says nothing of when a device was ready, so it neither sets the origin nor stretches it
    changes = {key: [event for event in events if event[2] in STATE_CHANGES] for key, events in devices.items()}
    timed = [(events[0], key) for key, events in changes.items() if events]
    timed += [(events[-1], key) for key, events in changes.items() if events]
    if not timed:
        raise InputError("the FLASH trace's chosen devices have no message that changes their state")
    (first, first_key), (last, last_key) = min(timed), max(timed)
    if (last[0] - first[0]).days > MAX_FLASH_SPAN_DAYS:
        raise InputError(
            f"FLASH device {first_key!r}, messages line {first[1]} ({first[0]}), and device {last_key!r}, "
            f"line {last[1]} ({last[0]}), lie more than {MAX_FLASH_SPAN_DAYS} days apart; fix or remove the "
            "mis-dated message"
        )
    origin = first[0]
    return ImportedTrace(
        {
            client: merged(
                [
                    ((start - origin).total_seconds(), (end - origin).total_seconds())
                    for start, end in ready_spans(events)
                ]
            )
            for client, events in enumerate(devices.values())
        },
        clients_in_source=len(trace),
    )


def flash_events(key: str, device: Any) -> list[tuple[datetime, int, str]]:
    """A device's (time, line number, state) messages in time order; a state FLASH's code does not
    know is refused, naming its line."""
    if not isinstance(device, dict) or not isinstance(device.get("messages"), str):
        raise InputError(f"FLASH device {key!r} has no messages text")
    events = []
    for line, text in enumerate(device["messages"].splitlines(), start=1):
        if not text.strip():
            continue
        stamp, _, state = text.partition("\t")
        where = f"FLASH device {key!r}, messages line {line}"
        try:
            time = datetime.strptime(stamp.strip(), FLASH_TIME)
        except ValueError:
            raise InputError(f"{where}: {text.strip()[:60]!r} is not 'YYYY-mm-dd HH:MM:SS<TAB>state'") from None
        state = state.strip().lower()
        if state not in STATE_CHANGES and state not in NO_CHANGE and not battery_level(state):
            raise InputError(f"{where}: {state[:40]!r} is none of FLASH's states ({', '.join(STATE_CHANGES)} …)")
        events.append((time, line, state))
    return sorted(events, key=lambda event: event[:2])


def battery_level(state: str) -> bool:
    """Whether `state` is a battery level such as `87%` (FLASH reads it and changes nothing)."""
    try:
        return state.endswith("%") and math.isfinite(float(state[:-1]))
    except ValueError:
        return False


STATE_CHANGES: dict[str, tuple[str, bool]] = {
    "battery_charged_on": ("charging", True),
    "battery_charged_off": ("charging", False),
    "wifi": ("wifi", True),
    **{network: ("wifi", False) for network in ("2g", "3g", "4g", "5g", "unknown")},
    "screen_lock": ("locked", True),
    "screen_unlock": ("locked", False),
}
NO_CHANGE = {"screen_on", "screen_off", "battery_low", "battery_okay", "phone_on", "phone_off"}


def ready_spans(events: list[tuple[datetime, int, str]]) -> list[tuple[datetime, datetime]]:
    """The spans over which a device is charging, on WiFi and locked; a span still open at the last
    message is dropped, as FLASH's Timer drops it."""
    state = {"charging": False, "wifi": False, "locked": False}
    spans, opened = [], None
    for time, _, message in events:
        if message in STATE_CHANGES:
            name, value = STATE_CHANGES[message]
            state[name] = value
        if all(state.values()) and opened is None:
            opened = time
        elif not all(state.values()) and opened is not None:
            if time > opened:
                spans.append((opened, time))
            opened = None
    return spans


def merged(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """`spans` sorted, those that touch or overlap joined into one."""
    joined: list[tuple[float, float]] = []
    for start, end in sorted(spans):
        if joined and start <= joined[-1][1]:
            joined[-1] = (joined[-1][0], max(joined[-1][1], end))
        else:
            joined.append((start, end))
    return joined


def chosen(trace: dict, clients: int) -> list:
    """The first `clients` keys in sorted order (by number where a key is an integer or its decimal digits)."""

    def order(key: Any) -> tuple[int, int | str]:
        if isinstance(key, int) and not isinstance(key, bool):
            return (0, key)
        if isinstance(key, str) and DECIMAL_ID.fullmatch(key):
            return (0, int(key))
        return (1, str(key))

    if len(trace) < clients:
        raise InputError(f"the trace has {len(trace)} clients, fewer than --clients {clients}; lower it")
    return sorted(trace, key=order)[:clients]


FORMATS: dict[str, Callable[[bytes, int, float | None], ImportedTrace]] = {
    "fedscale": fedscale_periods,
    "flash": flash_periods,
}


def trace_csv(periods: Periods) -> str:
    """The `client,start,end` CSV (`settings.traces.read_trace`'s format), each period with repr-exact times."""
    rows = [f"{client},{start!r},{end!r}" for client, spans in periods.items() for start, end in spans]
    return "client,start,end\n" + "".join(row + "\n" for row in rows)


def clipped(periods: Periods, horizon: float | None) -> Periods:
    """The periods that begin before `horizon`, ended at it at the latest (None: all, whole)."""
    if horizon is None:
        return periods
    return {client: [(s, min(e, horizon)) for s, e in spans if s < horizon] for client, spans in periods.items()}


def import_trace(source: Path, trace_format: str, clients: int, horizon: float | None) -> ImportedTrace:
    """The trace at `source` in `trace_format` (one of FORMATS), cut at `horizon`; every error names
    `source`."""
    data = read_input(source, MAX_TRACE_BYTES)
    try:
        imported = FORMATS[trace_format](data, clients, horizon)
    except InputError as error:
        raise InputError(f"{source}: {error}") from None
    periods = clipped(imported.periods, horizon)
    if not any(periods.values()):
        cut = "" if horizon is None else f" before --horizon {horizon:g}"
        fix = no_period_fix(data, trace_format, imported, horizon)
        raise InputError(f"{source}: its first {clients} clients have no online period{cut}; {fix}")
    return ImportedTrace(periods, imported.skipped, imported.clients_in_source)


def no_period_fix(data: bytes, trace_format: str, imported: ImportedTrace, horizon: float | None) -> str:
    """What to do where the chosen clients have no online period: raise --clients only where a client past
    them has one; otherwise the trace itself has none to give (every period empty, no device ever ready)."""
    everyone = imported.clients_in_source
    if everyone > len(imported.periods):
        try:
            if any(clipped(FORMATS[trace_format](data, everyone, horizon).periods, horizon).values()):
                return f"raise --clients (the source lists {everyone})"
        except InputError as error:  # what reading them all would hit (too many periods): said as such
            return f"reading all {everyone} of its clients: {error}"
    if horizon is None:
        return f"none of its {everyone} clients has one: choose another trace"
    return f"none of its {everyone} clients has one before it: raise --horizon, or choose another trace"
