"""Shared test helpers."""

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
QUICK_CONFIG = REPO / ".test/config/quick.yaml"  # the quick pipeline, where the Snakemake catalog keeps test configs
# Rules call `python -m asyncfl`: this interpreter's environment first, as `make` arranges.
ENV = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}

# CI sets this so that a test which cannot run here fails instead of skipping quietly.
REQUIRE_ALL = os.environ.get("ASYNCFL_REQUIRE_ALL") == "1"


# Where the workflow writes each run's metrics.csv, relative to its working directory: the runs of the
# plain experiments and those of the severity sweeps
RUN_METRICS_GLOBS = ("results/*/runs/*/*/*/metrics.csv", "results/*/severities/*/*/*/*/metrics.csv")


@pytest.fixture(scope="session", autouse=True)
def prepared_digits() -> None:
    """The digits prepared where `--dataset digits` finds them by default (resources/data/digits under the
    repository, the tests' working directory), as the pipeline's `data` rule prepares them: each process the
    tests start then reads the file instead of importing scikit-learn (about 1.5 s a process). Written
    atomically, the same bytes from every worker."""
    from asyncfl.data.digits import DIGITS_FILE, digits_from_sklearn, read_prepared_digits
    from asyncfl.data.labels import default_root
    from asyncfl.files import write_npz

    prepared = REPO / default_root("digits") / DIGITS_FILE
    if read_prepared_digits(prepared) is None:
        write_npz(prepared, digits_from_sklearn())


def figure_names(config: dict, experiment: str) -> list[str]:
    """The figures the workflow draws of every experiment of `config`, as the layout names them."""
    from asyncfl.settings.catalogue import Scope, scope_figures

    setup = config["experiments"][experiment]
    scopes = [Scope.EXPERIMENT]
    if setup.get("severities"):
        scopes = [Scope.SEVERITY_SWEEP, *([Scope.TUNING] if "tune" in setup else [])]
    return [figure.name for scope in scopes for figure in scope_figures(scope, config["reference_J"])]


def skip_unless(condition: bool, reason: str) -> None:
    """Skip when `condition` is false, or fail under ASYNCFL_REQUIRE_ALL=1 (CI)."""
    if condition:
        return
    if REQUIRE_ALL:
        pytest.fail(f"ASYNCFL_REQUIRE_ALL=1 but {reason}")
    pytest.skip(reason)


# A GPU machine sets this so that a CUDA test which cannot run fails; CI (no GPU) leaves it unset.
REQUIRE_CUDA = os.environ.get("ASYNCFL_REQUIRE_CUDA") == "1"


def skip_unless_cuda() -> None:
    """Skip on a machine without CUDA (CI), or fail there under ASYNCFL_REQUIRE_CUDA=1 (a GPU run)."""
    import torch

    if torch.cuda.is_available():
        return
    if REQUIRE_CUDA:
        pytest.fail("ASYNCFL_REQUIRE_CUDA=1 but no CUDA device is visible")
    pytest.skip("CUDA only (CI has no GPU)")


def snakemake(*args: str, workdir: Path | None = None, env=None, timeout: int = 1800) -> subprocess.CompletedProcess:
    """Real snakemake on the repository's workflow, in `workdir` if given."""
    where = ["--directory", str(workdir)] if workdir else []
    command = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), *where, *args]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, env=env or ENV, timeout=timeout)


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock on `path` for the block (flock: released if the holder dies)."""
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def shared_by_workers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder every worker of this test session sees (pytest-xdist gives each its own base temp)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


class QuickRun(NamedTuple):
    """The session's quick pipeline: its folder and the config it ran (the quick config, or on the test
    cluster the quick config with the site's partitions named, as docs/cluster.md has a site's user do)."""

    workdir: Path
    config: Path


@pytest.fixture(scope="session")
def quick_run(tmp_path_factory) -> QuickRun:
    """The quick config run through snakemake once per test session, whichever worker of `make test` asks
    first (the others wait for it; tests only read it, or add to it): on the test cluster where one runs
    (CI), as a site runs the main command, the jobs' records kept beside it (`quick_run_jobs`), else
    locally as `make run` does. One run serves the end-to-end checks and the cluster's: the quick
    pipeline costs CI's two cores about 320 CPU-s a time (docs/development.md "Test tiers")."""
    shared = shared_by_workers(tmp_path_factory)
    workdir, done = shared / "quick-run", shared / "quick-run.done"
    with locked(shared / "quick-run.lock"):
        if not done.exists():
            shutil.rmtree(workdir, ignore_errors=True)  # a worker that failed to make it left a part
            workdir.mkdir()
            config = shared / "quick-site" / QUICK_CONFIG.name if cluster_is_up() else QUICK_CONFIG
            if config != QUICK_CONFIG:
                from slurm_cases import SLURM_PROFILE, jobs_by_rule, on_this_site

                config.parent.mkdir(exist_ok=True)
                site = on_this_site(yaml.safe_load(QUICK_CONFIG.read_text()))
                config.write_text(yaml.safe_dump(site, sort_keys=False))  # a sweep's severities keep their order
                result = snakemake(*SLURM_PROFILE, "--configfile", str(config), workdir=workdir)
                # the cluster keeps a finished job's record for MinJobAge only: kept while it is listed
                quick_run_jobs(workdir).write_text(json.dumps(jobs_by_rule(workdir)))
            else:
                result = snakemake("--cores", "2", "--configfile", str(config), workdir=workdir)
            assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
            done.write_text(str(config))  # the worker that ran it decides: the cluster may be busy when another asks
    return QuickRun(workdir, Path(done.read_text()))


def quick_run_jobs(workdir: Path) -> Path:
    """Where `quick_run` keeps the cluster's records of its jobs, by rule (absent from a local run)."""
    return workdir.with_name("quick-run-jobs.json")


# Each test file's measured seconds (setup, call and teardown summed), from a run of `make test` with
# ASYNCFL_STORE_DURATIONS=1: they order the files within a tier, longest first (a file not listed: last)
FILE_SECONDS = Path(__file__).with_name("file_seconds.json")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`make test` runs each test file on one of four worker processes (pytest-xdist, `--dist loadfile
    --no-loadscope-reorder`: a file's module fixtures are made once). The files are handed out in this
    order: the three SLURM files first, since their tests mostly wait on the cluster while the other
    workers use the CPU, then files of the slower tiers, so that the fast files fill the end; within a
    tier the longest files first (`FILE_SECONDS`: a minute-long file handed out last ran alone on one
    core while the other workers had finished)."""
    tiers = ("slurm", "workflow", "subprocess")
    seconds = json.loads(FILE_SECONDS.read_text()) if FILE_SECONDS.exists() else {}

    def tier(item: pytest.Item) -> int:
        return next((rank for rank, name in enumerate(tiers) if item.get_closest_marker(name)), len(tiers))

    rank: dict[Path, int] = {}
    for item in items:
        rank[item.path] = min(rank.get(item.path, len(tiers)), tier(item))
    items.sort(key=lambda item: (rank[item.path], -seconds.get(item.path.relative_to(REPO).as_posix(), 0)))


MEASURED: Counter[str] = Counter()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if os.environ.get("ASYNCFL_STORE_DURATIONS") == "1":
        MEASURED[report.nodeid.split("::")[0]] += report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    """With ASYNCFL_STORE_DURATIONS=1, the session's seconds per file into `FILE_SECONDS` (in the main
    process, which every worker's reports reach)."""
    if MEASURED and not os.environ.get("PYTEST_XDIST_WORKER"):
        FILE_SECONDS.write_text(json.dumps({name: round(MEASURED[name]) for name in sorted(MEASURED)}, indent=1) + "\n")


def cluster_is_up() -> bool:
    if shutil.which("sinfo") is None:
        return False
    result = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True)
    states = set(result.stdout.split())
    return result.returncode == 0 and bool(states) and states <= {"idle", "mixed", "allocated", "completing"}


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test marked slurm skips (or fails, in CI) where no cluster runs."""
    if item.get_closest_marker("slurm"):
        skip_unless(cluster_is_up(), "no SLURM cluster here: start one with `tests/slurm/cluster.sh start`")


@contextmanager
def started(command: list[str], **options) -> Iterator[subprocess.Popen]:
    """A process for the block, killed and reaped when the block ends, pass or fail."""
    process = subprocess.Popen(command, **options)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


def wait_for(condition: Callable[[], bool], process: subprocess.Popen, what: str, cap: float = 1800) -> None:
    """Wait on an event (not a deadline that load can miss): until `condition` holds, failing if the
    process ends first, or after `cap` seconds, a cap no healthy run reaches, saying which it was."""
    waited = time.monotonic()
    while not condition():
        assert process.poll() is None, f"the process ended (exit {process.returncode}) before {what}"
        assert time.monotonic() - waited < cap, f"{what} did not happen within {cap:.0f} s"
        time.sleep(0.01)


@pytest.fixture
def full_disk(tmp_path) -> Iterator[Path]:
    """A 64 KiB tmpfs: a real filesystem that runs out of space (mounting needs root)."""
    skip_unless(os.geteuid() == 0, "mounting a small tmpfs needs root")
    mount = tmp_path / "small"
    mount.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True)
    skip_unless(result.returncode == 0, f"cannot mount a tmpfs here: {result.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", str(mount)], check=True)


@pytest.fixture(autouse=True)
def torch_threads_restored() -> Iterator[None]:
    """Every test leaves torch's thread count as it found it: a command run in-process with --threads
    sets it for the whole process, and a run's bytes, and whether a checkpoint resumes, depend on it."""
    import torch

    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


# Tuning runs of the tuning tests (select, tune): a small MLP on digits, a 20 virtual-s budget, its time grid
TUNING_TARGET, TUNING_BUDGET = 0.8, 20.0
TUNING_RUN_SETTINGS = {
    "model": "mlp",
    "local_epochs": 1,
    "batch_size": 16,
    "rounds": 10_000,
    "max_virtual_time": TUNING_BUDGET,
    "eval_every": 1000,
    "eval_every_seconds": 1.0,
    "eval_gradient": False,
    "seconds_per_sample": 0.01,
}
