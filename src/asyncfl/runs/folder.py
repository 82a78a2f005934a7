"""One run folder, one owner: its lock, the test for a finished run, and moving old outputs aside
(docs/design.md "Training").

A folder is owned through `fcntl.flock` on its `.lock` file, which holds the owner's pid and host
for the message a second command prints. The kernel drops the lock when its holder dies, so a
killed run never leaves a stale lock behind (flock works across nodes on NFSv4 shared filesystems).
"""

import fcntl
import json
import os
import shutil
import socket
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from asyncfl.files import sha256, temporary_sibling
from asyncfl.planning.layout import CHECKPOINT, EVALUATIONS, FAILED, MODEL, PROGRESS, RUN_OUTPUTS, RUN_RECORD, TIMINGS
from asyncfl.runs.record import TUNED, as_recorded, read_run_record, utc_now
from asyncfl.settings.errors import InputError

LOCK = ".lock"
REPLACED = "replaced"  # --force moves a folder's old outputs into replaced/TIMESTAMP/
MOVABLE = (*RUN_OUTPUTS, RUN_RECORD, TIMINGS, CHECKPOINT, PROGRESS, FAILED, EVALUATIONS)
KEPT = ".finished"  # hard links to a finished run's files, which outlive a failed job's cleanup
KEPT_FILES = (*RUN_OUTPUTS, TIMINGS, EVALUATIONS, RUN_RECORD)  # run.json last: it vouches for the rest


def check_out(out: Path) -> None:
    """A run folder is a folder of its own: never the current folder, which its outputs, its lock and its
    failure record would share with whatever else is there."""
    if str(out) in ("", "."):
        raise InputError("--out is empty or the current folder; give a folder of its own for the run's outputs")


@contextmanager
def owned(out: Path) -> Iterator[None]:
    """Hold the folder for the block; a second owner fails at once with one line naming the first."""
    check_out(out)
    if out.is_file():
        raise InputError(f"--out {out} is a file; give a folder for the run's outputs")
    out.mkdir(parents=True, exist_ok=True)
    refuse_symlinks(out)
    descriptor = os.open(out / LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = read_holder(descriptor)
            raise InputError(
                f"{out} is in use by pid {holder.get('pid', '?')} on {holder.get('host', '?')} "
                f"(since {holder.get('since', '?')}); wait for that run to end, or give another --out"
            ) from None
        holder = {"pid": os.getpid(), "host": socket.gethostname(), "since": utc_now()}
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, json.dumps(holder).encode(), 0)
        yield
    finally:
        os.close(descriptor)  # releases the lock; the file stays, so no two processes lock two files


def refuse_symlinks(out: Path) -> None:
    """A run writes and trusts its own files only: a symlink planted in its folder, at any depth (its
    kept copy `.finished/` included, which a restore would install as the run's), would redirect a
    write elsewhere or make another file the run's."""
    planted = sorted(
        Path(folder, name) for folder, folders, files in os.walk(out) for name in (*folders, *files)
        if Path(folder, name).is_symlink()
    )  # fmt: skip
    if planted:
        raise InputError(
            f"{planted[0]} is a symbolic link; a run folder holds only the run's own files, "
            "so remove the link (and any other) and run the same command again"
        )


def read_holder(descriptor: int) -> dict:
    try:
        return json.loads(os.pread(descriptor, 4096, 0) or b"{}")
    except ValueError:  # the holder is between truncating and writing its line
        return {}


def finished_run(out: Path, identity: dict) -> dict | None:
    """run.json's content when `out` holds this very run, finished, with outputs matching its hashes;
    None when it holds no finished run; InputError when it holds another or a damaged one."""
    if not (out / RUN_RECORD).exists():
        return None
    force = "use --force to move the old outputs aside and train again, or give another --out"
    summary = read_run_record(out)  # its own hash checked: an edited run.json is refused, never trusted
    hashes = summary["sha256"]
    identity = as_recorded(identity, summary)
    if any(summary.get(key) != identity.get(key) for key in {*identity, TUNED}):  # tuned or not, both ways
        raise InputError(f"{out} holds a finished run with other settings or data; {force}")
    for name in (*RUN_OUTPUTS, *([EVALUATIONS] if EVALUATIONS in hashes else [])):
        if not (out / name).is_file() or sha256(out / name) != hashes.get(name):
            raise InputError(f"{out}: {name} and the others do not match the hashes in its run.json; {force}")
    return summary


def move_aside(out: Path) -> Path | None:
    """Move the folder's outputs into replaced/TIMESTAMP/ (None when there were none)."""
    present = [name for name in MOVABLE if (out / name).exists()]
    if not present:
        return None
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    target = out / REPLACED / stamp
    target.mkdir(parents=True)
    for name in present:
        os.replace(out / name, target / name)
    return target


def clear_unfinished(out: Path) -> None:
    """Before a run starts or resumes where no finished run is: no model.pt may outlive its run.json,
    and no kept copy its run (a log opened afresh must not truncate a file it shares an inode with)."""
    (out / MODEL).unlink(missing_ok=True)
    shutil.rmtree(out / KEPT, ignore_errors=True)


def keep_finished(out: Path) -> None:
    """Hard-link a finished run's files into `out/.finished/`. Snakemake deletes every output of a job
    that fails, so a job training several runs (`train-many`) that fails in its last run would lose
    the runs it finished; `restore_finished` puts them back, checked, instead of training them again.
    Links cost no space; where the filesystem has none, nothing is kept and such runs train again."""
    kept = out / KEPT
    shutil.rmtree(kept, ignore_errors=True)
    try:
        kept.mkdir()
        for name in KEPT_FILES:
            if (out / name).is_file():
                os.link(out / name, kept / name)
    except OSError:
        shutil.rmtree(kept, ignore_errors=True)


def kept_here(out: Path) -> bool:
    """Whether every file of the kept copy is a regular file of this folder alone: one link, or two
    where the other is the run's own file (`keep_finished`); a hard link to a file elsewhere would make
    that file the run's, and a later write to the run's file would change it."""
    for name in KEPT_FILES:
        kept = out / KEPT / name
        if not kept.exists():
            continue
        status = kept.lstat()
        if not stat.S_ISREG(status.st_mode):
            return False
        own = out / name
        if status.st_nlink > 2 or (status.st_nlink == 2 and not (own.exists() and os.path.samefile(kept, own))):
            return False
    return True


def restore_finished(out: Path, identity: dict) -> bool:
    """Put back the files of this very run, finished, where its run.json is gone (a failed job's
    cleanup) and the kept copy is sealed, of this run (`identity`) and matches its hashes; a kept copy
    of another run, or a damaged one, is left alone, and the run trains as it would without it."""
    kept = out / KEPT
    if (out / RUN_RECORD).exists() or not (kept / RUN_RECORD).is_file() or not kept_here(out):
        return False
    try:
        if finished_run(kept, identity) is None:
            return False
    except InputError:
        return False
    for name in KEPT_FILES:
        if (kept / name).is_file() and not ((out / name).exists() and os.path.samefile(kept / name, out / name)):
            link = temporary_sibling(out / name, ".link")  # a rename onto the same file would do nothing
            link.unlink(missing_ok=True)
            os.link(kept / name, link)
            os.replace(link, out / name)
    return True
