"""What asyncfl trusts of the files it reads and what it refuses to write over (docs/outputs.md "Outputs").

Inputs are read only from regular files of bounded size: a device (`/dev/zero`), a pipe with no
writer or a file of gigabytes given as a configuration would otherwise exhaust memory or block
forever. Outputs go only where nothing or a regular file stands: an atomic write renames its result
onto the final name, and a rename onto `/dev/null` would replace the device for the whole machine.
JSON is strict (no NaN or Infinity, which strict parsers reject), and a record can vouch for itself
with a SHA-256 of its own canonical content. Kept free of heavy imports: the workflow imports it
while it plans the DAG.
"""

import hashlib
import json
import math
import os
import stat
from pathlib import Path
from typing import Any

from asyncfl.settings.errors import InputError
from asyncfl.settings.numbers import finite

MAX_SETTINGS_BYTES = 4 << 20  # a configuration or sweep file: real ones are a few KB
MAX_RECORD_BYTES = 64 << 20  # run.json, a partition's statistics (a million clients' class counts fit)
SELF_HASH = "record_sha256"  # the key under which a record holds the hash of the rest of itself
MAX_NAME_BYTES = 255  # of one path component, on every filesystem asyncfl is used on


def read_input(path: Path, limit: int = MAX_SETTINGS_BYTES) -> bytes:
    """The bytes of the regular file `path`, at most `limit` of them, or one line saying why not."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise InputError(f"{path} not found") from None
    except OSError as error:
        raise InputError(f"cannot read {path}: {error.strerror}") from None
    if stat.S_ISDIR(info.st_mode):
        raise InputError(f"{path} is a folder; give a file")
    if not stat.S_ISREG(info.st_mode):  # opening a FIFO blocks; a device reads forever
        raise InputError(f"{path} is not a regular file (a device, pipe or socket); give a file")
    if info.st_size > limit:
        raise InputError(f"{path} has {info.st_size} bytes, more than the {limit >> 20} MiB such a file may have")
    with open(path, "rb") as stream:
        content = stream.read(limit + 1)
    if len(content) > limit:  # it grew after the stat
        raise InputError(f"{path} has more than the {limit >> 20} MiB such a file may have")
    return content


def check_output(path: Path, what: str = "") -> None:
    """Refuse, in one line, an output path where a folder or special file stands: only a regular
    file (or a symbolic link, which a rename replaces without following) may be written over."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except OSError:
        return  # an unreadable or too long path: the write itself reports it, naming `path`
    label = f"{what} {path}" if what else str(path)
    if stat.S_ISDIR(mode):
        raise InputError(f"{label} is a folder; give the path of a file to write")
    if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
        raise InputError(
            f"{label} is a device, pipe or socket, which asyncfl never replaces; give the path of a regular file"
        )


def strict_json_loads(content: bytes | str) -> Any:
    """JSON as the standard defines it, with finite numbers: NaN, Infinity and a number too large for a
    double (1e309, which Python would read as inf) are refused (ValueError)."""

    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not JSON")

    def finite(text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            raise ValueError(f"{text} is beyond a double's range")
        return value

    return json.loads(content, parse_constant=refuse, parse_float=finite)


def strict_json_dumps(data: Any, **options: Any) -> str:
    """JSON text of `data`; a NaN or infinite number is a ValueError, never written as NaN or Infinity."""
    return json.dumps(data, allow_nan=False, **options)


def record_digest(record: dict[str, Any]) -> str:
    """SHA-256 of a record's canonical JSON without its own SELF_HASH entry."""
    rest = {key: value for key, value in record.items() if key != SELF_HASH}
    canonical = strict_json_dumps(rest, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def sealed(record: dict[str, Any]) -> dict[str, Any]:
    """`record` with SELF_HASH set to its digest: a record that vouches for its own content."""
    return {**record, SELF_HASH: record_digest(record)}


def is_sealed(record: Any) -> bool:
    """Whether `record` is a mapping whose SELF_HASH matches its content (edited by hand: no)."""
    return isinstance(record, dict) and record.get(SELF_HASH) == record_digest(record)


def finite_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and finite(value)
