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
        yield tmp
        os.replace(tmp, path)
    except OSError as error:  # name the file the user asked for, not its temporary sibling
        raise OSError(error.errno, error.strerror, str(path)) from None
    finally:
        tmp.unlink(missing_ok=True)


def append_text(path: Path, text: str, start: bool = False) -> None:
    """Append `text` to a log file (or start it with `text`) whole or not at all: a failed write
    (a full disk) is cut back to the previous end, so no torn line stays behind."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if start else os.O_APPEND)
    try:
        descriptor = os.open(path, flags, 0o644)
    except OSError as error:
        raise OSError(error.errno, error.strerror, str(path)) from None
    try:
        end = os.lseek(descriptor, 0, os.SEEK_END)
        data = text.encode()
        try:
            while data:
                data = data[os.write(descriptor, data) :]
        except OSError as error:
            if os.path.isfile(path):
                os.ftruncate(descriptor, end)
            raise OSError(error.errno, error.strerror, str(path)) from None
    finally:
        os.close(descriptor)


def write_json(path: Path, data: Any) -> None:
    """Write JSON with sorted keys, so equal data gives equal bytes."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


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
