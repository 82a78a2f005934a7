"""A run's state between two events, and its checkpoint: what a killed run needs to resume to the same bytes.

A checkpoint is written at an aggregation (every `checkpoint_every` rounds) with `torch.save`
and read back with `weights_only=True`: tensors, numbers, strings and lists only, nothing that
unpickling could run. The file starts with a line naming the format and the SHA-256 of the
torch bytes after it, checked before they are read: a flipped byte is refused, never resumed.
"""

import dataclasses
import hashlib
import io
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import torch

from asyncfl.files import atomic_path
from asyncfl.models import State
from asyncfl.spec import random_streams
from asyncfl.spec.config import TrainConfig, config_dict
from asyncfl.spec.errors import InputError
from asyncfl.spec.layout import EVENTS, METRICS, TIMINGS
from asyncfl.training.interface import LocalResult

CHECKPOINT_FORMAT = 6  # 6: results carry the mean epoch loss
CHECKPOINT_MAGIC = b"asyncfl-checkpoint"  # first line: MAGIC FORMAT SHA256\n, then torch.save's bytes


@dataclass(frozen=True)
class Job:
    """One dispatch of one client."""

    client: int
    dispatch_index: int  # how many times this client was dispatched before: keys its random streams
    version: int  # global version the client starts from
    dispatch_time: float
    arrival_time: float
    lrs: tuple[float, ...]  # learning rate per local epoch

    @property
    def key(self) -> tuple[float, int, int]:
        """Arrival order; ties in time go to the lower client id, then the earlier dispatch."""
        return (self.arrival_time, self.client, self.dispatch_index)

    def staleness(self, aggregated_into: int) -> int:
        """τ: global versions made since this job's dispatch, when its update is aggregated into the
        model of version `aggregated_into` + 1 (0 for a client that started from the newest model)."""
        return aggregated_into - self.version


def run_identity(config: TrainConfig, dataset: str, partition_sha256: str) -> dict:
    """What makes two runs the same run: a checkpoint or a finished run.json must match it."""
    return {"config": config_dict(config), "dataset": dataset, "partition_sha256": partition_sha256}


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass
class RunState:
    """Everything that changes during a run and that a checkpoint holds."""

    global_state: State
    rng: np.random.Generator  # draws the clients to dispatch
    dispatch_counts: np.ndarray  # per client: dispatches so far
    version: int = 0  # global model version = aggregations so far
    now: float = 0.0  # virtual time
    wall_seconds: float = 0.0  # wall-clock seconds spent before the last resume
    started_at: str = field(default_factory=utc_now)
    starts: dict[int, State] = field(default_factory=dict)  # global states that outstanding jobs start from
    outstanding: dict[tuple, Job] = field(default_factory=dict)  # dispatched, not yet taken by the server
    # Updates already trained for outstanding jobs: kept, so a resumed run trains the same jobs
    # together as an uninterrupted one (a batch's numerics may depend on its members).
    results: dict[tuple, LocalResult] = field(default_factory=dict)
    # Each client's own last model, for algorithms whose clients never load the global one
    client_models: dict[int, State] = field(default_factory=dict)

    def advance(self, new: State, own_models: list[tuple[Job, LocalResult]]) -> None:
        """The aggregation's new global model; the clients' own last models (`own_models`, for algorithms
        whose clients keep them); the start models that no outstanding job needs any more go."""
        self.global_state, self.version = new, self.version + 1
        self.client_models.update({job.client: result.state for job, result in own_models})
        live = {job.version for job in self.outstanding.values()}
        self.starts = {version: start for version, start in self.starts.items() if version in live}

    @classmethod
    def fresh(
        cls, global_state: State, seed: int, clients: int, own_models: dict[int, State] | None = None
    ) -> "RunState":
        """The state before the first dispatch; `own_models`: each client's own initial model, for
        algorithms whose clients keep their own."""
        return cls(
            global_state,
            np.random.default_rng([seed, random_streams.SAMPLING]),
            np.zeros(clients, dtype=np.int64),
            client_models=own_models or {},
        )


def save_checkpoint(path: Path, identity: dict, state: RunState, logs: dict[str, str]) -> None:
    """Write the state and the logs' text so far, atomically, behind their checksum."""
    buffer = io.BytesIO()
    torch.save(
        {
            "identity": identity,
            "torch_threads": torch.get_num_threads(),
            "version": state.version,
            "now": state.now,
            "wall_seconds": state.wall_seconds,
            "started_at": state.started_at,
            "global_state": state.global_state,
            "starts": state.starts,
            "client_models": state.client_models,
            "rng": state.rng.bit_generator.state,
            "dispatch_counts": state.dispatch_counts.tolist(),
            "outstanding": [dataclasses.asdict(job) for job in state.outstanding.values()],
            "results": [{"key": list(key), **dataclasses.asdict(result)} for key, result in state.results.items()],
            "logs": logs,
        },
        buffer,
    )
    payload = buffer.getvalue()
    header = b"%s %d %s\n" % (CHECKPOINT_MAGIC, CHECKPOINT_FORMAT, hashlib.sha256(payload).hexdigest().encode())
    with atomic_path(path) as tmp:
        tmp.write_bytes(header + payload)


def load_failure(error: Exception) -> str:
    """Why torch.load refused a file, in a few words (torch's own advice to unpickle anyway is not repeated)."""
    if "Unsupported global" in str(error):
        return "it holds Python objects besides tensors and plain data; unpickling those could run code"
    if "Weights only load failed" in str(error):
        return "corrupt, or not a torch file"
    first_line = str(error).strip().splitlines()[0][:120] if str(error).strip() else ""
    return f"{type(error).__name__}: {first_line}" if first_line else type(error).__name__


def load_checkpoint(path: Path, identity: dict, device: torch.device) -> tuple[RunState, dict[str, str]] | None:
    """The state and logs of the checkpoint at `path`, or None when there is none."""
    path = Path(path)
    if not path.exists():
        return None
    unreadable = f"{path} is not a readable asyncfl checkpoint"
    fix = "delete it to start the run afresh"
    header, _, payload = path.read_bytes().partition(b"\n")
    fields = header.split(b" ")
    if len(fields) != 3 or fields[0] != CHECKPOINT_MAGIC or fields[1] != str(CHECKPOINT_FORMAT).encode():
        raise InputError(f"{unreadable} (another format or version of asyncfl); {fix}")
    if hashlib.sha256(payload).hexdigest().encode() != fields[2]:
        raise InputError(f"{unreadable} (its bytes do not match its checksum: damaged on disk); {fix}")
    try:
        checkpoint = torch.load(io.BytesIO(payload), map_location=device, weights_only=True)
    except Exception as error:  # torch reports a bad file with many types; none of them is a bug of ours
        raise InputError(f"{unreadable} ({load_failure(error)}); {fix}") from None
    if not isinstance(checkpoint, dict) or checkpoint.get("identity") != identity:
        raise InputError(f"{path} belongs to a run with other settings or data; {fix}, or use another --out")
    if checkpoint.get("torch_threads") != torch.get_num_threads():
        raise InputError(
            f"{path} was written with {checkpoint.get('torch_threads')} torch threads and this run has "
            f"{torch.get_num_threads()}: sums split over other threads round differently, so resume with "
            f"--threads {checkpoint.get('torch_threads')} (under Snakemake: --cores at least that), or {fix}"
        )
    try:
        rng = np.random.default_rng()
        rng.bit_generator.state = checkpoint["rng"]
        state = RunState(
            global_state=checkpoint["global_state"],
            rng=rng,
            dispatch_counts=np.array(checkpoint["dispatch_counts"], dtype=np.int64),
            version=checkpoint["version"],
            now=checkpoint["now"],
            wall_seconds=checkpoint["wall_seconds"],
            started_at=checkpoint["started_at"],
            starts=checkpoint["starts"],
            client_models=checkpoint["client_models"],
            outstanding={
                job.key: job for job in (Job(**{**j, "lrs": tuple(j["lrs"])}) for j in checkpoint["outstanding"])
            },
            results={tuple(r.pop("key")): LocalResult(**r) for r in checkpoint["results"]},
        )
        logs = {name: str(checkpoint["logs"][name]) for name in (METRICS, EVENTS, TIMINGS)}
    except (KeyError, TypeError, ValueError) as error:
        raise InputError(f"{unreadable} (missing or malformed entry {error}); {fix}") from None
    return state, logs
