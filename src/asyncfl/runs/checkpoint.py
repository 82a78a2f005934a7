"""The torch files of a run folder: the checkpoint a killed run resumes from, and model.pt.

A checkpoint is written at an aggregation (every `checkpoint_every` rounds) with `torch.save`
and read back with `weights_only=True`: tensors, numbers, strings and lists only, nothing that
unpickling could run. The file starts with a line naming the format and the SHA-256 of the
torch bytes after it, checked before they are read: a flipped byte is refused, never resumed.
What the payload holds is the simulation's business (`sim.state`); this module owns the file.
"""

import hashlib
import io
from pathlib import Path
from typing import Any

import torch

from asyncfl.files import atomic_path
from asyncfl.runs.record import as_recorded
from asyncfl.settings.errors import InputError

# 7: the state's models renamed (global_model, start_models); 6: results carry the mean epoch loss
CHECKPOINT_FORMAT = 7
CHECKPOINT_MAGIC = b"asyncfl-checkpoint"  # first line: MAGIC FORMAT SHA256\n, then torch.save's bytes


def save_torch(path: Path, obj: Any) -> None:
    """torch.save through memory, written atomically: saving to a path names the archive after the
    (temporary) file, which would make equal models differ in bytes."""
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    with atomic_path(path) as tmp:
        tmp.write_bytes(buffer.getvalue())


def save_checkpoint(path: Path, identity: dict, payload: dict[str, Any]) -> None:
    """Write the run's identity, its torch threads and `payload` atomically, behind their checksum."""
    buffer = io.BytesIO()
    torch.save({"identity": identity, "torch_threads": torch.get_num_threads(), **payload}, buffer)
    content = buffer.getvalue()
    header = b"%s %d %s\n" % (CHECKPOINT_MAGIC, CHECKPOINT_FORMAT, hashlib.sha256(content).hexdigest().encode())
    with atomic_path(path) as tmp:
        tmp.write_bytes(header + content)


def load_failure(error: Exception) -> str:
    """Why torch.load refused a file, in a few words (torch's own advice to unpickle anyway is not repeated)."""
    if "Unsupported global" in str(error):
        return "it holds Python objects besides tensors and plain data; unpickling those could run code"
    if "Weights only load failed" in str(error):
        return "corrupt, or not a torch file"
    first_line = str(error).strip().splitlines()[0][:120] if str(error).strip() else ""
    return f"{type(error).__name__}: {first_line}" if first_line else type(error).__name__


def load_checkpoint(path: Path, identity: dict, device: torch.device) -> dict[str, Any] | None:
    """The payload of the checkpoint at `path` (None when there is none), after checking its format,
    checksum, run identity and torch threads; one line naming the fix otherwise."""
    path = Path(path)
    if not path.exists():
        return None
    unreadable = f"{path} is not a readable asyncfl checkpoint"
    fix = "delete it to start the run afresh"
    header, _, content = path.read_bytes().partition(b"\n")
    fields = header.split(b" ")
    if len(fields) != 3 or fields[0] != CHECKPOINT_MAGIC or fields[1] != str(CHECKPOINT_FORMAT).encode():
        raise InputError(f"{unreadable} (another format or version of asyncfl); {fix}")
    if hashlib.sha256(content).hexdigest().encode() != fields[2]:
        raise InputError(f"{unreadable} (its bytes do not match its checksum: damaged on disk); {fix}")
    try:
        checkpoint = torch.load(io.BytesIO(content), map_location=device, weights_only=True)
    except Exception as error:  # torch reports a bad file with many types; none of them is a bug of ours
        raise InputError(f"{unreadable} ({load_failure(error)}); {fix}") from None
    recorded = checkpoint.get("identity") if isinstance(checkpoint, dict) else None
    if not isinstance(recorded, dict) or recorded != as_recorded(identity, recorded):
        raise InputError(f"{path} belongs to a run with other settings or data; {fix}, or use another --out")
    if checkpoint.get("torch_threads") != torch.get_num_threads():
        raise InputError(
            f"{path} was written with {checkpoint.get('torch_threads')} torch threads and this run has "
            f"{torch.get_num_threads()}: sums split over other threads round differently, so resume with "
            f"--threads {checkpoint.get('torch_threads')} (under Snakemake: --cores at least that), or {fix}"
        )
    return checkpoint
