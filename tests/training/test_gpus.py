"""Which GPU a job takes (training/gpus.py), on fake devices: the claims are lock files, real here."""

import os
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from asyncfl.settings.errors import InputError
from asyncfl.training import gpus
from asyncfl.training.runtime import choose_device

FOUR = ["GPU-0a1b", "GPU-2c3d", "GPU-4e5f", "GPU-6a7b"]

# a job: claims a device, says which, and holds it until its stdin closes (or it is killed)
JOB = """
import sys
from pathlib import Path
from asyncfl.training.gpus import claim_device
claim = claim_device(sys.argv[1].split(","), Path(sys.argv[2]))
print(claim.device_index, claim.place, flush=True)
sys.stdin.read()
"""


@pytest.fixture
def start_job(tmp_path: Path) -> Iterator:
    """Start a job process on the fake devices and return it with the (index, place) it claimed; every
    job started is ended when the test ends, pass or fail."""
    jobs: list[subprocess.Popen] = []

    def start(devices: list[str]) -> tuple[subprocess.Popen, tuple[int, int]]:
        job = subprocess.Popen(
            [sys.executable, "-c", JOB, ",".join(devices), str(tmp_path / "locks")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        jobs.append(job)
        assert job.stdout is not None
        line = job.stdout.readline()
        assert line, f"the job ended without claiming a device (exit {job.wait()})"
        index, place = map(int, line.split())
        return job, (index, place)

    yield start
    for job in jobs:
        job.kill()
        job.wait()


@pytest.mark.subprocess
def test_four_jobs_on_four_gpus_take_four_devices_and_a_fifth_shares(start_job) -> None:
    claims = [start_job(FOUR)[1] for _ in range(4)]
    assert claims == [(0, 0), (1, 0), (2, 0), (3, 0)]
    assert start_job(FOUR)[1] == (0, 1)  # more jobs than GPUs: the least-shared GPU, lowest index first
    assert start_job(FOUR)[1] == (1, 1)


@pytest.mark.subprocess
def test_a_killed_job_frees_its_gpu_at_once(start_job) -> None:
    jobs = [start_job(FOUR)[0] for _ in range(4)]
    jobs[2].send_signal(signal.SIGKILL)  # no chance to clean up: the kernel drops its lock
    jobs[2].wait()
    assert start_job(FOUR)[1] == (2, 0)


@pytest.mark.subprocess
def test_a_job_that_ends_frees_its_gpu(start_job) -> None:
    job, claim = start_job(FOUR[:1])
    assert claim == (0, 0)
    job.communicate("")  # stdin closed: the job ends normally
    assert start_job(FOUR[:1])[1] == (0, 0)


@pytest.mark.subprocess
def test_jobs_seeing_other_gpus_do_not_contend(start_job) -> None:
    """SLURM's jobs each see their own GPU as cuda:0: the locks are the GPUs' UUIDs, not the indices."""
    assert start_job(FOUR[1:2])[1] == (0, 0)
    assert start_job(FOUR[2:3])[1] == (0, 0)
    assert start_job(FOUR)[1] == (0, 0)  # sees every GPU: takes the one no job holds, the first
    assert start_job(FOUR)[1] == (3, 0)


def test_claims_in_one_process_follow_the_same_order(tmp_path: Path) -> None:
    claims = [gpus.claim_device(FOUR[:2], tmp_path) for _ in range(5)]
    try:
        assert [(c.device_index, c.place) for c in claims] == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2)]
        assert stat.S_IMODE(tmp_path.stat().st_mode) == 0o1777  # every user's jobs share it
    finally:
        for claim in claims:
            os.close(claim.lock)


def test_a_lock_folder_that_cannot_be_made_is_one_line_naming_the_variable(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(InputError, match=f"cannot use .*file.* for GPU locks .* set {gpus.LOCKS_VARIABLE}"):
        gpus.claim_device(FOUR, tmp_path / "file")


def test_the_lock_folder_is_the_variable_or_the_temporary_folder(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv(gpus.LOCKS_VARIABLE, str(tmp_path / "mine"))
    assert gpus.lock_folder() == tmp_path / "mine"
    monkeypatch.delenv(gpus.LOCKS_VARIABLE)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)  # read TMPDIR again
    assert gpus.lock_folder() == tmp_path / "asyncfl-gpu-locks"


class FakeProperties:
    def __init__(self, uuid: str) -> None:
        self.uuid = uuid


def test_choose_device_on_cuda_takes_a_free_gpu_and_makes_it_current(monkeypatch, tmp_path: Path) -> None:
    """torch's CUDA calls faked (no GPU here): `auto` claims through the locks, the first GPU being taken
    by another job, and makes the one it got the current device."""
    current = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: FakeProperties(FOUR[index]))
    monkeypatch.setattr(torch.cuda, "set_device", current.append)
    monkeypatch.setenv(gpus.LOCKS_VARIABLE, str(tmp_path))
    other_job = gpus.claim_device(FOUR[:1], tmp_path)
    gpus.held_gpu.cache_clear()
    try:
        assert choose_device("auto") == torch.device("cuda", 1) == choose_device("cuda")
        assert current == [1]  # claimed once, held for the process's life
    finally:
        gpus.held_gpu.cache_clear()
        os.close(other_job.lock)


def test_the_cpu_claims_nothing(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv(gpus.LOCKS_VARIABLE, str(tmp_path / "locks"))
    assert choose_device("cpu") == torch.device("cpu")
    assert not (tmp_path / "locks").exists()
