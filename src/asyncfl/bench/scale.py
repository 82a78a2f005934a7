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
import math
import os
import resource
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import asyncfl
from asyncfl.settings.errors import InputError

SCALES = (10_000, 1_000_000, 10_000_000, 100_000_000)
QUICK_SCALES = (1_000, 10_000)
PER_ROUND = 100  # J = M: Bonawitz et al. 2019's order of clients at once is 10^2–10^4
ROUNDS = 12
# A row's peak memory, measured (docs/performance.md "The engine at scale", the world on): a run's fixed
# part, and per client while the clients hold images (C ≤ MOST_CLIENTS_WITH_DATA) or sizes only; bounds
# over what was measured (247 and 73 bytes a client at 10^7 and 10^8)
FIXED_BYTES, BYTES_PER_CLIENT = 300 * 2**20, {"images": 300, "sizes": 100}


def memory_available() -> float:
    """The bytes this process may still use: the least of the machine's available memory, its cgroup's
    limit and its address-space limit (`ulimit -v`), those that are known; infinite where none is."""
    limits = [math.inf]
    meminfo = Path("/proc/meminfo")
    if meminfo.is_file():
        available = [line.split()[1] for line in meminfo.read_text().splitlines() if line.startswith("MemAvailable:")]
        limits += [int(value) * 1024 for value in available]
    cgroup = Path("/sys/fs/cgroup/memory.max")
    if cgroup.is_file() and cgroup.read_text().strip().isdigit():
        limits.append(int(cgroup.read_text()))
    address_space = resource.getrlimit(resource.RLIMIT_AS)[0]
    if address_space != resource.RLIM_INFINITY:
        limits.append(address_space)
    return min(limits)


def check_scales(scales: tuple[int, ...], available: float | None = None) -> None:
    """Every row can run here: at least J clients, and its estimated peak memory within what is
    `available` (default: `memory_available`), before any row starts."""
    from asyncfl.bench.synthetic import MOST_CLIENTS_WITH_DATA

    available = memory_available() if available is None else available
    for clients in scales:
        if clients < PER_ROUND:
            raise InputError(
                f"--scales {clients}: the engine's rows dispatch J = {PER_ROUND} clients at once; give {PER_ROUND} "
                "clients or more"
            )
        holds = "images" if clients <= MOST_CLIENTS_WITH_DATA else "sizes"
        needs = FIXED_BYTES + clients * BYTES_PER_CLIENT[holds]
        if needs > available:
            raise InputError(
                f"--scales {clients}: a row needs about {needs / 1e9:.1f} GB ({BYTES_PER_CLIENT[holds]} bytes a client "
                f'holding {holds}, docs/performance.md "The engine at scale"), more than the {available / 1e9:.1f} GB '
                "this process may use here; give fewer clients"
            )


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
    check_scales(scales)
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
