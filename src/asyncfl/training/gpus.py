"""Which GPU a job trains on: a free one of those it can see, so that N jobs on an N-GPU machine use N GPUs.

SLURM gives each job its own GPUs (it sets CUDA_VISIBLE_DEVICES), and such a job sees only them.
Snakemake run on one machine gives none: every job sees every GPU, and the first device is each
one's default, so four jobs would all train on GPU 0 while the other three idle. So a job takes a
device itself, by locking a file named after the GPU's UUID (the same name whatever index
CUDA_VISIBLE_DEVICES gives the GPU in each job) in a folder every job on the machine shares, and
holds the lock for the process's life. `flock` locks die with their process, however it ends, so a
killed job leaves no stale lock behind.

With more jobs than GPUs, jobs share: each file is one place on a device, and a job takes the
first free place in the order (place 0 of every device, then place 1 of every device, …), that is
the least-shared device, lowest index first. Jobs that should wait for a free GPU instead are
Snakemake's to hold back: `--resources gpu=N` (docs/cluster.md "Several GPUs on one machine").
"""

import fcntl
import functools
import itertools
import os
import re
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import torch

from asyncfl.settings.errors import InputError

LOCKS_VARIABLE = "ASYNCFL_GPU_LOCKS"  # the lock folder, when the temporary folder is not shared by the jobs


class DeviceClaim(NamedTuple):
    """A place on one device, held while `lock` (an open file descriptor) stays open."""

    device_index: int  # the device's position among those this process sees: cuda:index
    place: int  # how many other jobs (at least) held the device when it was claimed: 0 when it was free
    lock: int


def lock_folder() -> Path:
    """$ASYNCFL_GPU_LOCKS, else `asyncfl-gpu-locks` in the temporary folder (/tmp unless TMPDIR says
    otherwise): the machine's jobs must share it, and under SLURM a job's private /tmp does no harm,
    since SLURM has already given each job its own GPUs."""
    return Path(os.environ.get(LOCKS_VARIABLE) or Path(tempfile.gettempdir()) / "asyncfl-gpu-locks")


def open_lock_folder(folder: Path) -> None:
    """Create the folder writable by every user (with /tmp's sticky bit), since jobs of several users
    share a machine's GPUs."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if folder.stat().st_uid == os.getuid():
            folder.chmod(0o1777)
    except OSError as error:
        raise unusable_lock(folder, error) from error


def unusable_lock(path: Path, error: OSError) -> InputError:
    return InputError(
        f"cannot use {path} for GPU locks ({error.strerror}); set {LOCKS_VARIABLE} to a writable local folder"
    )


def claim_device(identities: Sequence[str], folder: Path) -> DeviceClaim:
    """The first free place, in place-then-device order, among the devices named by `identities` (their
    UUIDs, in the order this process indexes them)."""
    if not identities:
        raise ValueError("no devices to claim")
    open_lock_folder(folder)
    for place in itertools.count():
        for index, identity in enumerate(identities):
            path = folder / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', identity)}.{place}.lock"
            try:
                descriptor = os.open(path, os.O_RDONLY | os.O_CREAT, 0o666)
            except OSError as error:
                raise unusable_lock(path, error) from error
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(descriptor)
                continue
            return DeviceClaim(index, place, descriptor)
    raise AssertionError("unreachable: the places never run out")


def visible_gpus() -> list[str]:
    """The UUIDs of the CUDA devices this process sees, by index."""
    return [str(torch.cuda.get_device_properties(index).uuid) for index in range(torch.cuda.device_count())]


@functools.cache
def held_gpu() -> torch.device:
    """This process's GPU, claimed on first use and held until the process ends; also made the current
    device, so that streams, graphs and generators made without a device land on it too."""
    claim = claim_device(visible_gpus(), lock_folder())
    torch.cuda.set_device(claim.device_index)
    if claim.place:
        print(
            f"asyncfl: every visible GPU is taken; sharing cuda:{claim.device_index} with at least "
            f"{claim.place} other job(s) (snakemake --resources gpu=N runs at most N at once)",
            file=sys.stderr,
        )
    return torch.device("cuda", claim.device_index)
