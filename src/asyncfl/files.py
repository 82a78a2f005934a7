"""Atomic, byte-reproducible file writes: a killed job never leaves a half-written output."""

import ctypes
import errno
import hashlib
import os
import shutil
import zipfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import numpy as np

from asyncfl.settings.errors import InputError
from asyncfl.settings.integrity import MAX_NAME_BYTES, check_output, strict_json_dumps

# Fixed zip member timestamp (the zip epoch): np.savez stamps the current time, which
# would make identical arrays produce different files.
ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary sibling of `path`; rename it onto `path` only if the block succeeds. Only a
    regular file (or nothing) at `path` is replaced: a folder or special file there is refused first.
    `written_together` of one output."""
    with written_together([Path(path)]) as temporaries:
        yield temporaries[Path(path)]


@contextmanager
def written_together(paths: list[Path]) -> Iterator[dict[Path, Path]]:
    """Temporaries for several outputs of one command (its figures, tables and choice), renamed onto
    their names only once the block has written them all: a command that fails part way (a bad input,
    a full disk) leaves every output as it was, never some new beside some old. Unlike
    `publish_folder`, the outputs may lie in several folders that other commands' outputs share; each
    rename is atomic, and only a kill between the last few renames could leave a mix. A temporary
    is unlinked before the block (a planted symlink there would be written through; os.replace never
    follows one), and an error names the file the user asked for, never its temporary sibling."""
    paths = [Path(path) for path in paths]
    check_apart(paths)
    for path in paths:
        check_output(path)
    temporaries = {path: temporary_sibling(path) for path in paths}
    try:
        for path, tmp in temporaries.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp.unlink(missing_ok=True)
        for path in paths:  # every folder made, every output checked again: before any is written
            check_output(path)
        yield temporaries
        for path, tmp in temporaries.items():
            os.replace(tmp, path)
    except OSError as error:
        asked = {str(tmp): str(path) for path, tmp in temporaries.items()}
        named = asked.get(str(error.filename), error.filename if len(paths) > 1 else str(paths[0]))
        raise OSError(error.errno, error.strerror, named) from None
    finally:
        for tmp in temporaries.values():  # cleaning up: the error that matters, if any, is on its way
            with suppress(OSError):
                tmp.unlink(missing_ok=True)


def check_apart(paths: list[Path]) -> None:
    """Outputs written together are distinct files: one path given twice, or an output that is the
    folder another goes into, once left some outputs written and the last failing."""
    resolved = [Path(os.path.abspath(path)) for path in paths]
    for index, path in enumerate(resolved):
        for other_index, other in enumerate(resolved):
            if other_index == index:
                continue
            if other == path and other_index < index:
                raise InputError(f"{paths[index]} is given for two outputs; give each output its own path")
            if path in other.parents:
                raise InputError(
                    f"{paths[index]} is an output and also the folder of the output {paths[other_index]}; "
                    "give them paths apart"
                )


def temporary_sibling(path: Path, kind: str = ".tmp") -> Path:
    """`.NAME.PID.tmp` beside `path`, NAME shortened where needed, so it fits wherever `path` fits."""
    suffix = f".{os.getpid()}{kind}"
    room = MAX_NAME_BYTES - len(suffix) - 1
    name = path.name.encode()[:room].decode(errors="ignore")
    return path.with_name(f".{name}{suffix}")


def publish_folder(out: Path, names: tuple[str, ...], write: Callable[[Path], None]) -> None:
    """Write the files `names` into the folder `out` as one set: `write` fills a hidden staging folder
    beside `out`, which then takes `out`'s place in one atomic exchange (Linux's renameat2), so a
    kill leaves the old set or the new one, never a mix. Anything else in `out` (an extracted
    archive, say) is moved into the new folder. Where the filesystem cannot exchange (NFS), `out`
    is moved aside and the new folder renamed in: a kill between the two leaves no `out` at all, which
    a rerun makes again, still never a mix."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise OSError(errno.ENOTDIR, "a file stands where a folder must go", str(out))
    for name in names:
        check_output(out / name)
    staging, old = temporary_sibling(out, ".new"), temporary_sibling(out, ".old")
    try:
        for folder in (staging, old):
            shutil.rmtree(folder, ignore_errors=True)  # left by a killed run of this same pid number
        staging.mkdir(parents=True)
        write(staging)
        if not out.exists():
            os.rename(staging, out)
            return
        if not exchange(staging, out):
            os.rename(out, old)
            os.rename(staging, out)
            staging = old
        for entry in Path(staging).iterdir():  # the old folder now: carry over what the set does not own
            if entry.name not in names:
                os.rename(entry, out / entry.name)
    except OSError as error:
        raise OSError(error.errno, error.strerror, str(out)) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


RENAME_EXCHANGE = 2  # linux/fs.h
AT_FDCWD = -100


def exchange(first: Path, second: Path) -> bool:
    """Swap two paths atomically; False where the C library or the filesystem cannot."""
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is None:
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if renameat2(AT_FDCWD, os.fsencode(first), AT_FDCWD, os.fsencode(second), RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(second))


def open_log(path: Path, text: str) -> int:
    """Create (or empty) the log at `path`, write `text`, and return the descriptor for appends. It
    refuses to follow a symlink or to open a special file: a run writes its own files only
    (docs/outputs.md "Outputs")."""
    check_output(path)
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_NOFOLLOW, 0o644)
    except OSError as error:
        raise OSError(error.errno, error.strerror, str(path)) from None
    try:
        append_whole(descriptor, path, text)
    except OSError:
        os.close(descriptor)
        raise
    return descriptor


def append_whole(descriptor: int, path: Path, text: str) -> None:
    """Append `text` through `descriptor` whole or not at all: a failed write (a full disk) is cut back
    to the previous end, so no torn line stays behind."""
    end = os.lseek(descriptor, 0, os.SEEK_END)
    data = text.encode()
    try:
        while data:
            data = data[os.write(descriptor, data) :]
    except OSError as error:
        os.ftruncate(descriptor, end)
        raise OSError(error.errno, error.strerror, str(path)) from None


def same_file(descriptor: int, path: Path) -> bool:
    """Whether `path` still names the file open as `descriptor` (not deleted, replaced or moved)."""
    try:
        named = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    opened = os.fstat(descriptor)
    return (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino)


def write_text(path: Path, text: str) -> None:
    """Write a text file atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def json_text(data: Any) -> str:
    """Strict JSON (no NaN or Infinity) with sorted keys, so equal data gives equal bytes."""
    return strict_json_dumps(data, indent=1, sort_keys=True) + "\n"


def write_json(path: Path, data: Any) -> None:
    """Write `json_text(data)` atomically."""
    write_text(path, json_text(data))


def write_npz(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """Write an uncompressed .npz that `np.load` reads, byte-identical for identical arrays."""
    with atomic_path(path) as tmp, zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as archive:
        for name, array in arrays.items():
            member = zipfile.ZipInfo(f"{name}.npy", date_time=ZIP_EPOCH)
            with archive.open(member, "w", force_zip64=True) as stream:
                np.lib.format.write_array(stream, np.asarray(array), allow_pickle=False)


def sha256(path: Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
