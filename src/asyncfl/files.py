"""Atomic, byte-reproducible file writes: a killed job never leaves a half-written output."""

import hashlib
import io
import json
import os
import zipfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch

# Fixed zip member timestamp (the zip epoch): np.savez stamps the current time, which
# would make identical arrays produce different files.
ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary sibling of `path`; rename it onto `path` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.unlink(missing_ok=True)  # a planted symlink here would be written through; os.replace never follows one
        yield tmp
        os.replace(tmp, path)
    except OSError as error:  # name the file the user asked for, not its temporary sibling
        raise OSError(error.errno, error.strerror, str(path)) from None
    finally:
        tmp.unlink(missing_ok=True)


def open_log(path: Path, text: str) -> int:
    """Create (or empty) the log at `path`, write `text`, and return the descriptor for appends. It
    refuses to follow a symlink: a run writes its own files only (README "Outputs")."""
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


def write_json(path: Path, data: Any) -> None:
    """Write JSON with sorted keys, so equal data gives equal bytes."""
    write_text(path, json.dumps(data, indent=1, sort_keys=True) + "\n")


def write_npz(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """Write an uncompressed .npz that `np.load` reads, byte-identical for identical arrays."""
    with atomic_path(path) as tmp, zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as archive:
        for name, array in arrays.items():
            member = zipfile.ZipInfo(f"{name}.npy", date_time=ZIP_EPOCH)
            with archive.open(member, "w", force_zip64=True) as stream:
                np.lib.format.write_array(stream, np.asarray(array), allow_pickle=False)


def save_torch(path: Path, obj: Any) -> None:
    """torch.save through memory: saving to a path names the archive after the (temporary) file."""
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    with atomic_path(path) as tmp:
        tmp.write_bytes(buffer.getvalue())


def sha256(path: Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
