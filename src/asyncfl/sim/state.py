"""A run's state between two events: what a killed run needs to resume to the same bytes, and the
plain payload of its checkpoint (the file itself is `runs.checkpoint`'s)."""

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from asyncfl.models import ModelState
from asyncfl.planning.layout import EVALUATIONS, EVENTS, METRICS, TIMINGS
from asyncfl.runs.record import utc_now
from asyncfl.settings import random_streams
from asyncfl.settings.errors import InputError
from asyncfl.sim.compass import CompassSchedule
from asyncfl.sim.server_link import LinkBookings
from asyncfl.training.interface import LocalResult


@dataclass(frozen=True)
class Job:
    """One dispatch of one client."""

    client: int
    dispatch_index: int  # how many times this client was dispatched before: keys its random streams
    version: int  # global version the client starts from
    dispatch_time: float
    arrival_time: float
    lrs: tuple[float, ...]  # learning rate per local epoch
    lost: str = ""  # why its result never arrives (`world.OFFLINE`, `world.FAILED`; "" when it does)
    samples: int | None = None  # partial work at a deadline: the samples it trains (None: all its epochs')
    transfers: tuple[float, float] | None = None  # its download and upload seconds on a shared server link
    trained_at: float | None = None  # under client_freed: after_training, when its training ends (None: not kept)
    compute: float | None = None  # under durations: measured, its compute's virtual seconds (None: drawn)

    @property
    def key(self) -> tuple[float, int, int]:
        """Arrival order (for a lost job, the time it is lost); ties in time go to the lower client id,
        then the earlier dispatch."""
        return (self.arrival_time, self.client, self.dispatch_index)

    def versions_behind(self, aggregated_into: int) -> int:
        """τ: global versions made since this job's dispatch, when its update is aggregated into the
        model of version `aggregated_into` + 1 (0 for a client that started from the newest model)."""
        return aggregated_into - self.version


def kept(default: Any = dataclasses.MISSING, **kwargs: Any) -> Any:
    """A field the checkpoint keeps as it is, under its own name (numbers, text, model states):
    `payload` and `from_payload` list no such field by hand."""
    return field(default=default, metadata={"kept": True}, **kwargs)


@dataclass
class SimulationState:
    """Everything that changes during a run and that a checkpoint holds: the `kept` fields as they are,
    the others through their own part's form (the sampling stream's state, the jobs and results as
    their fields, the link's bookings, the server optimizer's moments, CA2FL's cache)."""

    rng: np.random.Generator  # draws the clients to dispatch
    dispatch_counts: np.ndarray  # per client: dispatches so far
    global_model: ModelState = kept()
    version: int = kept(0)  # global model version = aggregations so far
    now: float = kept(0.0)  # virtual time
    wall_seconds: float = kept(0.0)  # wall-clock seconds spent before the last resume
    dropped: int = kept(0)  # dispatches lost so far (their clients went offline, or they failed)
    discarded: int = kept(0)  # dispatches whose synchronous round closed without them (late, or abandoned)
    rejected: int = kept(0)  # asynchronous updates rejected as staler than the cap
    deadline_at: float | None = kept(None)  # when the open synchronous round ends, under a round_deadline
    waiting: int = kept(0)  # dispatches the server wants but has no online idle client for yet
    held: int = kept(0)  # slots opened since the last refill, fewer than redistribution_threshold (O)
    checkins: int = kept(0)  # Poisson check-ins handled so far, under arrivals: poisson
    busy_seconds: float = kept(0.0)  # client-seconds of the dispatches ended so far (`Dispatcher.arrived`)
    uploads: int = kept(0)  # updates whose upload completed (arrived, aggregated or not)
    evaluations: int = kept(0)  # time-grid evaluations so far, under eval_every_seconds
    started_at: str = kept(default_factory=utc_now)
    start_models: dict[int, ModelState] = kept(default_factory=dict)  # global states outstanding jobs start from
    outstanding: dict[tuple, Job] = field(default_factory=dict)  # dispatched, not yet taken by the server
    # Updates already trained for outstanding jobs: kept, so a resumed run trains the same jobs
    # together as an uninterrupted one (a batch's numerics may depend on its members).
    results: dict[tuple, LocalResult] = field(default_factory=dict)
    # Each client's own last model, for algorithms whose clients never load the global one
    client_models: dict[int, ModelState] = kept(default_factory=dict)
    link: LinkBookings | None = None  # the transfers booked on a shared server link (`server_bandwidth`)
    # Σ dispatch_counts, kept as it grows: summing C clients' counts at every dispatch cost O(C)
    dispatched: int = 0
    # the server optimizer's moments (`fl.server_optimizer`; empty without one)
    server_moments: dict[str, ModelState] = field(default_factory=dict)
    # the strategy's own memory across rounds (`Strategy.aggregate_with_memory`: CA2FL's cache of each
    # client's last update, FedStaleWeight's staleness history); checkpointed where it holds any, so other
    # runs' checkpoints are what they were
    server_memory: dict[str, Any] = field(default_factory=dict)
    # what of the memory each version in flight was sent with (`Strategy.dispatch_snapshot`), pruned with
    # the start models; checkpointed only where set
    sent_memories: dict[int, dict[str, Any]] = field(default_factory=dict)
    # FedCompass's scheduler, and the arrived updates its groups hold until they are aggregated (None and
    # empty for the other algorithms: checkpointed only where set, so other runs' checkpoints are what they were)
    compass: CompassSchedule | None = None
    waiting_updates: dict[tuple, tuple[Job, LocalResult]] = field(default_factory=dict)
    # FedASMU: each outstanding dispatch that asked for the global model mid-training, by its key: the version
    # it got and its merge weight β (`Strategy.merge_weight`); checkpointed only where set
    merges: dict[tuple, tuple[int, float]] = field(default_factory=dict)

    def count_dispatch(self, client: int) -> int:
        """The client's next dispatch index (its dispatches so far), now counted."""
        index = int(self.dispatch_counts[client])
        self.dispatch_counts[client] += 1
        self.dispatched += 1
        return index

    def aggregated(self, buffered: int) -> int:
        """Client updates aggregated so far: every dispatch not buffered (`buffered`), in flight, lost,
        discarded or rejected."""
        waiting = len(self.waiting_updates)
        return (
            self.dispatched - buffered - waiting - len(self.outstanding) - self.dropped - self.discarded - self.rejected
        )

    def advance(self, new: ModelState, own_models: list[tuple[Job, LocalResult]]) -> None:
        """The aggregation's new global model; the clients' own last models (`own_models`, for algorithms
        whose clients keep them); the start models that no outstanding job needs any more go."""
        self.global_model, self.version = new, self.version + 1
        self.client_models.update({job.client: result.state for job, result in own_models})
        self.merges = {key: merge for key, merge in self.merges.items() if key in self.outstanding}
        live = (
            {job.version for job in self.outstanding.values()}
            | {job.version for job, _ in self.waiting_updates.values()}
            | {version for version, _ in self.merges.values()}
        )
        self.start_models = {version: start for version, start in self.start_models.items() if version in live}
        self.sent_memories = {version: sent for version, sent in self.sent_memories.items() if version in live}

    @classmethod
    def fresh(
        cls,
        global_model: ModelState,
        seed: int,
        clients: int,
        own_models: dict[int, ModelState] | None = None,
        shared_link: bool = False,
        groups: bool = False,
        memory: dict[str, Any] | None = None,
    ) -> "SimulationState":
        """The state before the first dispatch; `own_models`: each client's own initial model, for
        algorithms whose clients keep their own; `shared_link`: transfers are booked on the server's link;
        `groups`: FedCompass's arrival groups are scheduled; `memory`: the strategy's initial memory."""
        return cls(
            global_model=global_model,
            rng=np.random.default_rng([seed, random_streams.SAMPLING]),
            # written now, not left to the kernel's lazy zero pages: at 10^8 clients each first touch of a
            # (huge) page cost a dispatch a millisecond over the first rounds
            dispatch_counts=np.full(clients, 0, dtype=np.int64),
            client_models=own_models or {},
            link=LinkBookings() if shared_link else None,
            compass=CompassSchedule() if groups else None,
            server_memory=memory or {},
        )

    def payload(self, logs: dict[str, str]) -> dict[str, Any]:
        """The checkpoint's content: this state and the logs' text so far, as tensors and plain data."""
        kept_fields = {name: getattr(self, name) for name in kept_names()}
        return (
            kept_fields
            | {
                "rng": self.rng.bit_generator.state,
                "dispatch_counts": self.dispatch_counts.tolist(),
                "outstanding": [dataclasses.asdict(job) for job in self.outstanding.values()],
                "results": [{"key": list(key), **dataclasses.asdict(result)} for key, result in self.results.items()],
                "logs": logs,
            }
            | ({"link": dataclasses.asdict(self.link)} if self.link is not None else {})
            | ({"server_moments": self.server_moments} if self.server_moments else {})
            | ({"sent_memories": self.sent_memories} if self.sent_memories else {})
            | ({"server_memory": self.server_memory} if self.server_memory else {})
            | ({"merges": [[*key, *merge] for key, merge in self.merges.items()]} if self.merges else {})
            | (
                {"compass": dataclasses.asdict(self.compass), "waiting_updates": self.waiting_payload()}
                if self.compass
                else {}
            )
        )

    def waiting_payload(self) -> list[dict[str, Any]]:
        """The updates FedCompass's groups hold, each its job's and its result's fields."""
        return [
            {"job": dataclasses.asdict(job), "result": dataclasses.asdict(result)}
            for job, result in self.waiting_updates.values()
        ]

    @classmethod
    def from_payload(cls, checkpoint: dict[str, Any], source: str) -> tuple["SimulationState", dict[str, str]]:
        """The state and logs that `payload` wrote; one line naming `source` when an entry is missing."""
        try:
            rng = np.random.default_rng()
            rng.bit_generator.state = checkpoint["rng"]
            dispatch_counts = np.array(checkpoint["dispatch_counts"], dtype=np.int64)
            state = cls(
                **{name: checkpoint[name] for name in kept_names()},
                rng=rng,
                dispatch_counts=dispatch_counts,
                dispatched=int(dispatch_counts.sum()),
                outstanding={job.key: job for job in (Job(**{**j, **tuples(j)}) for j in checkpoint["outstanding"])},
                results={tuple(r.pop("key")): LocalResult(**r) for r in checkpoint["results"]},
                link=LinkBookings(**checkpoint["link"]) if "link" in checkpoint else None,
                server_moments=checkpoint.get("server_moments", {}),
                server_memory=memory_of(checkpoint),
                sent_memories=dict(checkpoint.get("sent_memories", {})),
                compass=CompassSchedule.from_payload(checkpoint["compass"]) if "compass" in checkpoint else None,
                waiting_updates=waiting_of(checkpoint.get("waiting_updates", [])),
                merges=merges_of(checkpoint.get("merges", [])),
            )
            logs = {name: str(checkpoint["logs"][name]) for name in (METRICS, EVENTS, TIMINGS)}
            if EVALUATIONS in checkpoint["logs"]:
                logs[EVALUATIONS] = str(checkpoint["logs"][EVALUATIONS])
        except (KeyError, TypeError, ValueError) as error:
            raise InputError(
                f"{source} is not a readable asyncfl checkpoint (missing or malformed entry {error}); "
                "delete it to start the run afresh"
            ) from None
        return state, logs


def kept_names() -> list[str]:
    """The fields `kept()` marks, which the checkpoint holds as they are."""
    return [item.name for item in dataclasses.fields(SimulationState) if item.metadata.get("kept")]


def tuples(job: dict[str, Any]) -> dict[str, Any]:
    """A checkpointed job's tuple fields, which its payload stores as lists."""
    transfers = job.get("transfers")
    return {"lrs": tuple(job["lrs"]), "transfers": None if transfers is None else tuple(transfers)}


def memory_of(checkpoint: dict[str, Any]) -> dict[str, Any]:
    """The strategy's memory a checkpoint holds; a CA2FL checkpoint written before the memory had its
    name (2026-12-06) held its cache alone, as "cached_updates"."""
    if "cached_updates" in checkpoint:
        return {"cache": checkpoint["cached_updates"]}
    return dict(checkpoint.get("server_memory", {}))


def merges_of(entries: list[list[Any]]) -> dict[tuple, tuple[int, float]]:
    """The requests `SimulationState.payload` wrote (key, version, weight), by their jobs' keys."""
    return {(float(m[0]), int(m[1]), int(m[2])): (int(m[3]), float(m[4])) for m in entries}


def waiting_of(entries: list[dict[str, Any]]) -> dict[tuple, tuple[Job, LocalResult]]:
    """The held updates `SimulationState.waiting_payload` wrote, by their jobs' keys, in arrival order."""
    jobs = [(Job(**{**entry["job"], **tuples(entry["job"])}), LocalResult(**entry["result"])) for entry in entries]
    return {job.key: (job, result) for job, result in jobs}
