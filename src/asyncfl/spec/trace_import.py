"""Availability traces in the formats people have, converted to asyncfl's `client,start,end` CSV
(`asyncfl trace import`; docs/design.md "The clients' world"). No third-party trace ships with
asyncfl: these read the files their projects publish.

- **FedScale** (`client_behave_trace`, a pickle): client id → {"active": [s…], "inactive": [e…],
  "finish_time": F, …}, seconds; FedScale's simulator holds a client online while `active[i] ≤ t mod
  F < inactive[i]`, so the trace repeats every F seconds. The pickle is read with every class refused:
  only numbers, strings, lists and dicts load, so a file that would run code is an error, not a risk.
- **FLASH** (Yang et al., WWW 2021; the `user_behavior` JSON): guid → {"messages": "YYYY-mm-dd
  HH:MM:SS<TAB>state" lines, …}. A device is online, as FLASH's strict ("Google") rule has it, while it
  is charging (`battery_charged_on`), on WiFi (`wifi`; `2G`…`5G` or `unknown` end it) and idle (its
  screen off or locked). Times count from the earliest message among the chosen devices; a period
  still open at a device's last message ends there (nothing is known after it).

Clients are the first C ids (FedScale) or guids (FLASH) in sorted order, numbered 0..C-1.
"""

import io
import json
import pickle
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from asyncfl.spec.errors import InputError
from asyncfl.spec.integrity import read_input

Periods = dict[int, list[tuple[float, float]]]
FLASH_TIME = "%Y-%m-%d %H:%M:%S"
MAX_TRACE_BYTES = 4 << 30  # FedScale's and FLASH's published traces are hundreds of MB


class PlainUnpickler(pickle.Unpickler):
    """Loads numbers, strings, lists, tuples and dicts only: every class or function is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise InputError(f"the pickle asks for {module}.{name}; a FedScale trace holds only dicts, lists and numbers")


def fedscale_periods(data: bytes, clients: int, horizon: float | None) -> Periods:
    """FedScale's availability trace as online periods, repeated every `finish_time` up to `horizon`
    virtual seconds (None: one repetition)."""
    try:
        trace = PlainUnpickler(io.BytesIO(data)).load()
    except (pickle.UnpicklingError, EOFError, ValueError) as error:
        raise InputError(f"not a FedScale trace pickle ({error})") from None
    if not isinstance(trace, dict) or not trace:
        raise InputError("a FedScale trace is a dict of client id → {active, inactive, finish_time}; this is not")
    periods: Periods = {}
    for client, key in enumerate(chosen(trace, clients)):
        entry = trace[key]
        try:
            starts, ends, period = list(entry["active"]), list(entry["inactive"]), float(entry["finish_time"])
        except (KeyError, TypeError, ValueError):
            raise InputError(f"FedScale client {key!r} lacks active, inactive or a numeric finish_time") from None
        if len(starts) != len(ends) or period <= 0:
            raise InputError(f"FedScale client {key!r}: active and inactive differ in length, or finish_time ≤ 0")
        repeats = 1 if horizon is None else int(-(-horizon // period))
        periods[client] = [
            (float(start) + k * period, float(end) + k * period)
            for k in range(repeats)
            for start, end in zip(starts, ends, strict=True)
            if float(end) > float(start)
        ]
    return periods


def flash_periods(data: bytes, clients: int, horizon: float | None) -> Periods:
    """FLASH's state messages as the periods each device is charging, on WiFi and idle (a trace is as
    long as its messages: `horizon` only cuts, in `clipped`)."""
    try:
        trace = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise InputError(f"not a FLASH trace: not JSON ({error})") from None
    if not isinstance(trace, dict) or not trace:
        raise InputError("a FLASH trace is a JSON object of guid → {messages: …}; this is not")
    devices = {key: flash_events(key, trace[key]) for key in chosen(trace, clients)}
    origin = min((events[0][0] for events in devices.values() if events), default=None)
    if origin is None:
        raise InputError("the FLASH trace's chosen devices have no timed message")
    return {
        client: [
            ((start - origin).total_seconds(), (end - origin).total_seconds()) for start, end in ready_spans(events)
        ]
        for client, events in enumerate(devices.values())
    }


def flash_events(key: str, device: Any) -> list[tuple[datetime, str]]:
    """A device's (time, state) messages in time order."""
    if not isinstance(device, dict) or not isinstance(device.get("messages"), str):
        raise InputError(f"FLASH device {key!r} has no messages text")
    events = []
    for line in device["messages"].splitlines():
        if not line.strip():
            continue
        stamp, _, state = line.partition("\t")
        try:
            events.append((datetime.strptime(stamp.strip(), FLASH_TIME), state.strip().lower()))
        except ValueError:
            raise InputError(
                f"FLASH device {key!r}: {line.strip()[:60]!r} is not 'YYYY-mm-dd HH:MM:SS<TAB>state'"
            ) from None
    return sorted(events, key=lambda event: event[0])


STATE_CHANGES: dict[str, tuple[str, bool]] = {
    "battery_charged_on": ("charging", True),
    "battery_charged_off": ("charging", False),
    "wifi": ("wifi", True),
    **{network: ("wifi", False) for network in ("2g", "3g", "4g", "5g", "unknown")},
    "screen_off": ("screen_off", True),
    "screen_on": ("screen_off", False),
    "screen_lock": ("locked", True),
    "screen_unlock": ("locked", False),
}


def ready_spans(events: list[tuple[datetime, str]]) -> list[tuple[datetime, datetime]]:
    """The spans over which a device is charging, on WiFi and idle (screen off or locked); other
    messages (battery levels, phone on/off) change nothing."""
    state = {"charging": False, "wifi": False, "screen_off": False, "locked": False}

    def ready() -> bool:
        return state["charging"] and state["wifi"] and (state["screen_off"] or state["locked"])

    spans, opened = [], None
    for time, message in events:
        if message not in STATE_CHANGES:
            continue
        was = ready()
        name, value = STATE_CHANGES[message]
        state[name] = value
        if not was and ready():
            opened = time
        elif was and not ready() and opened is not None and time > opened:
            spans.append((opened, time))
    if ready() and opened is not None and events[-1][0] > opened:
        spans.append((opened, events[-1][0]))
    return spans


def chosen(trace: dict, clients: int) -> list:
    """The first `clients` keys in sorted order (by number where every key is one)."""
    keys = sorted(trace, key=lambda key: (0, int(key)) if str(key).lstrip("-").isdigit() else (1, str(key)))
    if len(keys) < clients:
        raise InputError(f"the trace has {len(keys)} clients, fewer than --clients {clients}; lower it")
    return keys[:clients]


FORMATS: dict[str, Callable[[bytes, int, float | None], Periods]] = {
    "fedscale": fedscale_periods,
    "flash": flash_periods,
}


def trace_csv(periods: Periods) -> str:
    """The `client,start,end` CSV (`spec.traces.read_trace`'s format), each period with repr-exact times."""
    rows = [f"{client},{start!r},{end!r}" for client, spans in periods.items() for start, end in sorted(spans)]
    return "client,start,end\n" + "".join(row + "\n" for row in rows)


def clipped(periods: Periods, horizon: float | None) -> Periods:
    """The periods that begin before `horizon`, ended at it at the latest (None: all, whole)."""
    if horizon is None:
        return periods
    return {client: [(s, min(e, horizon)) for s, e in spans if s < horizon] for client, spans in periods.items()}


def import_trace(source: Path, trace_format: str, clients: int, horizon: float | None) -> str:
    """The CSV of the trace at `source` in `trace_format` (one of FORMATS), cut at `horizon`."""
    data = read_input(source, MAX_TRACE_BYTES)
    return trace_csv(clipped(FORMATS[trace_format](data, clients, horizon), horizon))
