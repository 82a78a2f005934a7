"""A finished run's record, run.json, and the check every consumer of a run folder makes before it
trusts the folder's files (docs/outputs.md "Outputs").

run.json holds the SHA-256 of the run's outputs and of its own content; a file that does not match
was not written by that run (edited, damaged, or left over from another), and figures, the theory
probe and the archive refuse it by name instead of drawing, probing or shipping it. What a run is
(algorithm, J, seed, dataset, partition) is read from its record, never from the folder's name.
Imports nothing heavy itself (the spec layer and the standard library).
"""

import hashlib
from pathlib import Path
from typing import Any

from asyncfl.spec.errors import InputError
from asyncfl.spec.integrity import MAX_RECORD_BYTES, SELF_HASH, is_sealed, read_input, strict_json_loads
from asyncfl.spec.layout import RUN_RECORD

RERUN = "train it again (asyncfl train --force, or delete the folder and rerun snakemake)"


def read_run_record(run: Path) -> dict[str, Any]:
    """run.json of the run folder `run`, checked against its own hash, or one line saying what is wrong."""
    path = Path(run) / RUN_RECORD
    if not path.exists():
        raise InputError(f"{path} not found: {run} holds no finished run; {RERUN}")
    try:
        record = strict_json_loads(read_input(path, MAX_RECORD_BYTES))
    except InputError as error:
        raise InputError(f"{error}; {RERUN}") from None
    except ValueError as error:
        raise InputError(f"{path} is not a readable run record ({type(error).__name__}); {RERUN}") from None
    if not isinstance(record, dict) or SELF_HASH not in record:
        raise InputError(
            f"{path} has no {SELF_HASH} (written before run records vouched for themselves, or not a run "
            f"record); {RERUN}"
        )
    if not is_sealed(record):
        raise InputError(f"{path} does not match its own {SELF_HASH}: it was edited or damaged; {RERUN}")
    hashes, config = record.get("sha256"), record.get("config")
    if not isinstance(hashes, dict) or not all(isinstance(v, str) for v in hashes.values()):
        raise InputError(f"{path} is not a run record (no sha256 of the outputs); {RERUN}")
    if not isinstance(config, dict):
        raise InputError(f"{path} is not a run record (no config); {RERUN}")
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


def check_run_identity(run: Path, record: dict[str, Any], **expected: Any) -> None:
    """Refuse a run whose record says it is another run than the one asked for: `expected` maps
    config keys (algorithm, clients_per_round, seed) or record keys (dataset, experiment) to values."""
    config = record["config"]
    for key, value in expected.items():
        recorded = config.get(key, record.get(key))
        if recorded != value:
            raise InputError(
                f"{Path(run) / RUN_RECORD} records {key} = {recorded!r}, not the {value!r} this folder stands for "
                "(a run copied or moved into another run's folder?); put the run back where it belongs or "
                "train this one"
            )
