"""The engine at cross-device scale (docs/performance.md "The engine at scale"): the bench's timing-only
run (`synthetic.engine_overhead`, `trainer: none`) at C = 10^4, 10^6, 10^7 and 10^8 clients (`--scales`), the
clients' world off and on, each in a process of its own, so that its peak memory is its own; past 10^7 the
clients hold their sizes only (`synthetic.engine_data`).

Reported per row: seconds per round (between the first round and the last), the first round (setting up
the run included: what grows with C before anything is dispatched), the process's peak resident memory,
and that peak beyond the data, per client: the engine's own cost of a client. The data are the clients'
images and labels (the resident memory once they exist is the baseline; a timing-only run copies none of
them); the rest, the run's fixed cost included (about 100 MB: the model, torch's workspace), is counted
against the clients.
"""

import json
import os
import resource
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import asyncfl

SCALES = (10_000, 1_000_000, 10_000_000, 100_000_000)
QUICK_SCALES = (1_000, 10_000)
PER_ROUND = 100  # J = M: Bonawitz et al. 2019's order of clients at once is 10^2–10^4
ROUNDS = 12


def peak_resident_bytes() -> int:
    """The process's peak resident memory so far: Linux's VmHWM, the high-water mark of this program's
    own memory (`ru_maxrss` keeps the parent's resident size from before `exec`: a row whose peak stays
    below its parent's read as no growth at all); elsewhere `ru_maxrss` (macOS reports bytes)."""
    status = Path("/proc/self/status")
    if status.is_file():
        (line,) = [line for line in status.read_text().splitlines() if line.startswith("VmHWM:")]
        return int(line.split()[1]) * 1024
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def measure(clients: int, world: bool, rounds: int = ROUNDS) -> dict:
    """One row, in the calling process: the clients' data first (their resident memory is the
    baseline), then the engine's run."""
    from asyncfl.bench.synthetic import engine_data, engine_overhead

    data = engine_data(clients)
    holds = "sizes" if data[1].sizes_only else "images"
    baseline = peak_resident_bytes()
    with tempfile.TemporaryDirectory() as scratch:
        row = engine_overhead(clients, PER_ROUND, rounds, Path(scratch), world, data)
    peak = peak_resident_bytes()
    return row | {
        "data": holds,
        "peak_memory_mib": round(peak / 2**20, 1),
        "bytes_per_client": round((peak - baseline) / clients, 1),
    }


def measure_apart(clients: int, world: bool, rounds: int = ROUNDS) -> dict:
    """`measure` in a fresh interpreter, so its peak memory is its own: it finds this package where
    this process found it, and hands its row back as JSON."""
    package_root = str(Path(asyncfl.__file__).parent.parent)
    env = os.environ | {"PYTHONPATH": os.pathsep.join(filter(None, (package_root, os.environ.get("PYTHONPATH"))))}
    command = [sys.executable, "-m", "asyncfl.bench.scale", json.dumps([clients, world, rounds])]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"the engine measure at C = {clients} failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.splitlines()[-1])


def engine_scale(scales: tuple[int, ...], report: Callable[[str], None] = print) -> list[dict]:
    """Every scale, world off then on, one process each; each row reported as it is measured."""
    rows = []
    report(format_header())
    for clients in scales:
        for world in (False, True):
            rows.append(measure_apart(clients, world))
            report(format_row(rows[-1]))
    return rows


COLUMNS = (
    "clients",
    "data",
    "world",
    "seconds_per_round",
    "first_round_seconds",
    "peak_memory_mib",
    "bytes_per_client",
)


def format_header() -> str:
    return "  ".join(f"{column:>19}" for column in COLUMNS)


def format_row(row: dict) -> str:
    return "  ".join(f"{str(row[column]):>19}" for column in COLUMNS)


if __name__ == "__main__":  # one row, for `measure_apart`
    print(json.dumps(measure(*json.loads(sys.argv[1]))))
