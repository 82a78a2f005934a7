"""A finished run's record, run.json, and the check every consumer of a run folder makes before it
trusts the folder's files (docs/outputs.md "Outputs").

run.json holds the SHA-256 of the run's outputs and of its own content; a file that does not match
was not written by that run (edited, damaged, or left over from another), and figures, the theory
probe and the archive refuse it by name instead of drawing, probing or shipping it. What a run is
(algorithm, J, seed, dataset, partition) is read from its record, never from the folder's name.
Imports nothing heavy (the settings and planning layers, `files` and the standard library): figures and the archive
check runs without torch.
"""

import hashlib
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from asyncfl.files import sha256, write_json
from asyncfl.planning.layout import RUN_RECORD
from asyncfl.settings.config import DEFAULTS, TrainConfig, config_dict
from asyncfl.settings.errors import InputError
from asyncfl.settings.integrity import MAX_RECORD_BYTES, SELF_HASH, is_sealed, read_input, sealed, strict_json_loads

RERUN = "train it again (asyncfl train --force, or delete the folder and rerun snakemake)"
# What a run folder holds, and how its files read; a record of another format is refused, never half-read.
# 2: events.csv's aggregation coefficient is the column `coefficient` (it was `weight`, a name it shared
# with the staleness weight s(τ))
RUN_FOLDER_FORMAT = 2
FORMAT_KEY = "run_folder_format"


TUNED = "tuned"  # run.json's key of the settings a tuning stage chose; a run without it was not tuned


def run_identity(config: TrainConfig, dataset: str, partition_sha256: str, tuned: dict | None = None) -> dict:
    """What makes two runs the same run: a checkpoint or a finished run.json must match it (an
    availability trace by its content, not its path). `tuned`: the settings a tuning stage chose for
    the run (`train-many --chosen`), recorded as such under "tuned" (absent for a run not tuned)."""
    identity = {"config": config_dict(config), "dataset": dataset, "partition_sha256": partition_sha256}
    if tuned:
        identity[TUNED] = tuned
    if config.availability_trace is not None:
        trace = Path(config.availability_trace)
        if not trace.is_file():
            raise InputError(f"availability_trace {trace} is not a file; give the path of a client,start,end CSV")
        identity["availability_trace_sha256"] = sha256(trace)
    return identity


def as_recorded(identity: dict, recorded: dict) -> dict:
    """`identity` as a run made before some of its settings existed recorded it: a setting the record's
    config lacks is left out where `identity` has it at its default, since a setting added to asyncfl
    changes no byte at its default (docs/outputs.md "Run folders"); a run or checkpoint made by an older
    asyncfl is then the same run, not another to train again."""
    config, old = identity.get("config"), recorded.get("config")
    if not isinstance(config, dict) or not isinstance(old, dict):
        return identity
    added = {key for key in config.keys() - old.keys() if key in DEFAULTS and config[key] == DEFAULTS[key]}
    return {**identity, "config": {key: value for key, value in config.items() if key not in added}}


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def write_run_record(run: Path, summary: dict[str, Any], hashes: dict[str, str]) -> dict[str, Any]:
    """Write run.json from the run's `summary` and its outputs' `hashes`, in this folder format and
    sealed with its own hash (docs/outputs.md "Outputs"); return what was written."""
    record = sealed({**summary, FORMAT_KEY: RUN_FOLDER_FORMAT, "sha256": hashes})
    write_json(Path(run) / RUN_RECORD, record)
    return record


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
    if record.get(FORMAT_KEY) != RUN_FOLDER_FORMAT:
        raise InputError(
            f"{path} is a run folder of format {record.get(FORMAT_KEY, 1)}, written by an older asyncfl; this one "
            f'reads format {RUN_FOLDER_FORMAT} (docs/outputs.md "Run folders"); {RERUN}'
        )
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
