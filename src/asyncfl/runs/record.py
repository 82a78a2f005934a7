"""A finished run's record, run.json, and the check every consumer of a run folder makes before it
trusts the folder's files (README "Outputs").

run.json holds the SHA-256 of the run's outputs; a file that does not match was not written by that
run (edited, damaged, or left over from another), and figures, the theory probe and the archive
refuse it by name instead of drawing, probing or shipping it. Kept free of heavy imports: the figures
and the archive read it without torch.
"""

import hashlib
import json
from pathlib import Path
from typing import Any

from asyncfl.spec.errors import InputError
from asyncfl.spec.layout import RUN_RECORD

RERUN = "train it again (asyncfl train --force, or delete the folder and rerun snakemake)"


def read_run_record(run: Path) -> dict[str, Any]:
    """run.json of the run folder `run`, with its hashes, or one line saying what is wrong."""
    path = Path(run) / RUN_RECORD
    try:
        record = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise InputError(f"{path} not found: {run} holds no finished run; {RERUN}") from None
    except (OSError, ValueError) as error:
        raise InputError(f"{path} is not a readable run record ({type(error).__name__}); {RERUN}") from None
    hashes = record.get("sha256") if isinstance(record, dict) else None
    if not isinstance(hashes, dict) or not all(isinstance(v, str) for v in hashes.values()):
        raise InputError(f"{path} is not a run record (no sha256 of the outputs); {RERUN}")
    return record


def verify_run_files(run: Path, names: tuple[str, ...]) -> dict[str, Any]:
    """run.json of `run` after checking that each of `names` is the file the run wrote."""
    record = read_run_record(run)
    for name in names:
        path = Path(run) / name
        expected = record["sha256"].get(name)
        if expected is None:
            raise InputError(f"{Path(run) / RUN_RECORD} has no hash for {name}; {RERUN}")
        try:
            actual = hashlib.sha256(path.read_bytes()).hexdigest()
        except FileNotFoundError:
            raise InputError(f"{path} is missing beside its run.json; {RERUN}") from None
        if actual != expected:
            raise InputError(f"{path} is not the file its run wrote (SHA-256 differs from run.json); {RERUN}")
    return record
