"""The federated-learning simulation: a server and asyncio clients on a virtual clock (SPEC §7–§8).

One loop serves all four algorithms. Clients are dispatched with the global model of
the current version v and arrive after their virtual duration; the server takes
arrivals in (arrival time, client, dispatch index) order and aggregates every K of
them (K = J for sync and afl, 1 for fedasync, the buffer size for fedbuff), with
staleness τ = version at aggregation − version at dispatch. sync dispatches J clients
per round and waits for all (τ = 0, rounds as long as their slowest client); the
asynchronous algorithms keep M clients in flight, dispatching a fresh one after every
arrival (after the aggregation it may trigger, so it starts from the newest model).

Training is lazy: a dispatch only records a task; the first time a result is needed,
every task not yet trained is trained in one call, which lets a vectorised trainer
batch the clients in flight. Checkpoints hold the whole simulation state at an
aggregation, so a killed run resumes to byte-identical outputs.
"""

import asyncio
import dataclasses
import math
import os
import platform
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import torch

import asyncfl
from asyncfl.algorithms import (
    State,
    delay_aware_lr,
    fedasync_update,
    fedbuff_update,
    staleness_aware_average,
    staleness_weight,
    update_norm,
)
from asyncfl.clock import run_virtual, sleep_until
from asyncfl.config import TrainConfig, config_dict
from asyncfl.data import Dataset, normalize
from asyncfl.delays import ClientSystem
from asyncfl.errors import InputError
from asyncfl.files import save_torch, sha256, write_json
from asyncfl.metrics import EVENTS_COLUMNS, METRICS_COLUMNS, TIMINGS_COLUMNS, CsvLog, Progress
from asyncfl.models import build_model
from asyncfl.partition import Partition
from asyncfl.training import LocalResult, LocalTask, Numerics, Trainer, evaluate, trainer_class

SAMPLING_STREAM, SHUFFLE_STREAM = 2, 3
CHECKPOINT_FORMAT = 1


class TrainingDiverged(InputError):
    """A client's training loss became nan or inf."""


@dataclass(frozen=True)
class Job:
    """One dispatch of one client."""

    client: int
    dispatch_index: int  # how many times this client was dispatched before: keys its random streams
    version: int  # global version the client starts from
    dispatch_time: float
    arrival_time: float
    delay: float  # d_c of the learning rate
    lrs: tuple[float, ...]  # learning rate per local epoch

    @property
    def key(self) -> tuple[float, int, int]:
        """Arrival order; ties in time go to the lower client id, then the earlier dispatch."""
        return (self.arrival_time, self.client, self.dispatch_index)


def choose_device(name: str) -> torch.device:
    """auto: CUDA when a device is really there (a SLURM fake GPU sets CUDA_VISIBLE_DEVICES but has none)."""
    if name == "cuda" and not torch.cuda.is_available():
        raise InputError("device cuda requested but no CUDA device is available; use device: auto or cpu")
    return torch.device("cuda" if name != "cpu" and torch.cuda.is_available() else "cpu")


class Simulation:
    """A run's static context (data, clients, trainer, outputs) and its checkpointable state."""

    def __init__(self, config: TrainConfig, dataset: Dataset, partition: Partition, out: Path,
                 partition_sha256: str = "", trainer: Trainer | None = None):
        check_inputs(config, dataset, partition)
        self.config, self.out = config, Path(out)
        self.device = choose_device(config.device)
        self.identity = {"config": config_dict(config), "dataset": dataset.info.name, "partition_sha256": partition_sha256}
        # cuBLAS repeats its sums only with a fixed workspace, read when its first handle is made (CUDA)
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.manual_seed(config.seed)
        self.model = build_model(config.model, dataset.info).to(self.device)
        images = normalize(dataset.train_images.to(self.device), dataset.info)
        self.test_images = normalize(dataset.test_images.to(self.device), dataset.info)
        self.test_labels = dataset.test_labels.to(self.device)
        if config.precision == "tf32" and self.device.type != "cuda":
            raise InputError("precision tf32 is a CUDA format and this run is on the CPU; use fp32 or bf16")
        numerics = Numerics(config.precision, config.channels_last)
        numerics.apply_globally()
        chosen = trainer_class(config.trainer, self.device)
        self.trainer: Trainer = trainer or chosen(self.model, images, dataset.train_labels.to(self.device),
                                                  config.batch_size, config.optimizer, config.patience, numerics)
        self.sizes = partition.sizes
        self.client_indices = [torch.from_numpy(partition.client_indices(c)).to(self.device)
                               for c in range(partition.num_clients)]
        self.system = ClientSystem.draw(config, partition.num_clients)
        # Simulation state: everything a checkpoint holds.
        self.version, self.now, self.wall_seconds = 0, 0.0, 0.0
        self.started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self.global_state: State = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        self.rng = np.random.default_rng([config.seed, SAMPLING_STREAM])
        self.dispatch_counts = np.zeros(partition.num_clients, dtype=np.int64)
        self.outstanding: dict[tuple, Job] = {}  # dispatched, not yet taken by the server
        self.starts: dict[int, State] = {}  # global states that outstanding jobs start from
        # Updates already trained for outstanding jobs: checkpointed too, so a resumed run trains
        # the same jobs together as an uninterrupted one (a batch's numerics may depend on its members).
        self.results: dict[tuple, LocalResult] = {}
        # Not checkpointed: derived, or empty at every checkpoint.
        self.buffer: list[tuple[Job, LocalResult]] = []
        self.in_flight = np.zeros(partition.num_clients, dtype=np.int64)
        self.clients: set[asyncio.Task] = set()
        self.stop_reason = ""

    # ---- dispatch -------------------------------------------------------------------------------
    def sample_clients(self, count: int) -> np.ndarray:
        """Uniform draw of clients to dispatch: idle ones without replacement, any with replacement."""
        if self.config.replacement:
            return self.rng.integers(len(self.sizes), size=count)
        return self.rng.choice(np.flatnonzero(self.in_flight == 0), size=count, replace=False)

    def dispatch(self, client: int) -> None:
        config = self.config
        index = int(self.dispatch_counts[client])
        self.dispatch_counts[client] += 1
        duration = self.system.duration(config, client, int(self.sizes[client]), index)
        delay = self.system.delay(config, client, duration)
        if config.lr_time == "round":
            lrs = (delay_aware_lr(config.gamma0, self.version, config.alpha_lr, delay),) * config.local_epochs
        else:
            lrs = tuple(delay_aware_lr(config.gamma0, e, config.alpha_lr, delay) for e in range(config.local_epochs))
        job = Job(client, index, self.version, self.now, self.now + duration, delay, lrs)
        self.starts.setdefault(self.version, self.global_state)
        self.outstanding[job.key] = job
        self.spawn(job)

    def spawn(self, job: Job) -> None:
        self.in_flight[job.client] += 1
        task = asyncio.get_running_loop().create_task(self.client(job))
        self.clients.add(task)
        task.add_done_callback(self.clients.discard)

    async def client(self, job: Job) -> None:
        """A client: busy for its virtual duration, then hands its update to the server."""
        await sleep_until(job.arrival_time)
        self.inbox.put_nowait((job.key, job))

    # ---- training -------------------------------------------------------------------------------
    def result(self, job: Job) -> LocalResult:
        """The job's local update; trains every outstanding untrained job together the first time."""
        if job.key not in self.results:
            pending = [j for j in [job, *self.outstanding.values()] if j.key not in self.results]
            tasks = [LocalTask(self.starts[j.version], self.client_indices[j.client], j.lrs,
                               (self.config.seed, SHUFFLE_STREAM, j.client, j.dispatch_index)) for j in pending]
            self.results.update(zip((j.key for j in pending), self.trainer.train(tasks)))
        return self.results.pop(job.key)

    # ---- the server -----------------------------------------------------------------------------
    async def serve(self, progress: Progress) -> None:
        config = self.config
        self.inbox: asyncio.PriorityQueue = asyncio.PriorityQueue()
        for job in self.outstanding.values():  # a resumed run's clients in flight
            self.spawn(job)
        if self.version == 0 and not self.outstanding:
            first = config.clients_per_round if config.algorithm == "sync" else config.concurrency_or_default
            for client in self.sample_clients(first):
                self.dispatch(int(client))
        try:
            while True:
                _, job = await self.inbox.get()
                self.now = job.arrival_time
                del self.outstanding[job.key]
                self.in_flight[job.client] -= 1
                result = self.result(job)
                if not math.isfinite(result.train_loss):
                    raise TrainingDiverged(
                        f"round {self.version + 1}, client {job.client}: training loss is {result.train_loss}; "
                        f"rows up to round {self.version} are kept in {self.out}; lower gamma0 or check the data"
                    )
                self.buffer.append((job, result))
                aggregated = len(self.buffer) == config.arrivals_per_round
                if aggregated and self.aggregate(progress):
                    return
                if config.algorithm != "sync":
                    self.dispatch(int(self.sample_clients(1)[0]))
                elif aggregated:
                    for client in self.sample_clients(config.clients_per_round):
                        self.dispatch(int(client))
                if aggregated and self.version % config.checkpoint_every == 0:
                    self.save_checkpoint()
        finally:
            for task in self.clients:
                task.cancel()
            await asyncio.gather(*self.clients, return_exceptions=True)

    def aggregate(self, progress: Progress) -> bool:
        """Fold the buffered updates into the global model; log the round; True when the run is over."""
        config = self.config
        jobs = [job for job, _ in self.buffer]
        results = [result for _, result in self.buffer]
        states = [r.state for r in results]
        sizes = [int(self.sizes[j.client]) for j in jobs]
        taus = [self.version - j.version for j in jobs]
        s = [staleness_weight(config.staleness, tau, config.staleness_a, config.staleness_b) for tau in taus]
        old = self.global_state
        if config.algorithm == "fedasync":
            new, alpha_t = fedasync_update(old, states[0], config.fedasync_alpha, s[0])
            coefficients = [alpha_t]
        elif config.algorithm == "fedbuff":
            new, coefficients = fedbuff_update(old, states, [self.starts[j.version] for j in jobs], s, config.server_lr)
        else:  # sync is FedAvg: τ = 0, so s = 1, and the aggregate replaces the model
            new, coefficients = staleness_aware_average(old, states, sizes, s, config.mixing if config.algorithm == "afl" else 1.0)
        norm = update_norm(new, old)
        self.global_state, self.version = new, self.version + 1
        self.buffer.clear()
        live = {j.version for j in self.outstanding.values()}
        self.starts = {v: state for v, state in self.starts.items() if v in live}

        if self.version >= config.rounds:
            self.stop_reason = "rounds"
        elif config.kappa > 0 and norm <= config.kappa:
            self.stop_reason = "kappa"
        elif config.max_virtual_time is not None and self.now >= config.max_virtual_time:
            self.stop_reason = "max_virtual_time"
        test_loss = test_accuracy = None
        if self.version % config.eval_every == 0 or self.stop_reason:
            test_loss, test_accuracy = evaluate(self.model, new, self.test_images, self.test_labels)
        train_loss = sum(n * r.train_loss for n, r in zip(sizes, results)) / sum(sizes)
        self.metrics.append([{
            "round": self.version, "virtual_time": self.now, "train_loss": train_loss, "test_loss": test_loss,
            "test_accuracy": test_accuracy, "mean_staleness": sum(taus) / len(taus), "max_staleness": max(taus),
            "update_norm": norm, "lr": sum(j.lrs[0] for j in jobs) / len(jobs),
        }])
        self.events.append([{
            "round": self.version, "client": j.client, "dispatch_version": j.version, "dispatch_time": j.dispatch_time,
            "arrival_time": j.arrival_time, "staleness": tau, "weight": w, "lr": j.lrs[0], "epochs_run": r.epochs_run,
            "n_samples": n, "train_loss": r.train_loss,
        } for j, r, tau, w, n in zip(jobs, results, taus, coefficients, sizes)])
        self.timings.append([{"round": self.version, "wall_seconds": self.elapsed()}])
        progress.update(self.version, self.now, train_loss, test_accuracy)
        return bool(self.stop_reason)

    # ---- running, checkpoints, outputs ----------------------------------------------------------
    def elapsed(self) -> float:
        return round(self.wall_seconds + time.perf_counter() - self.started, 3)

    def run(self) -> dict:
        """Run (or resume) to the end; write model.pt and run.json; return run.json's content."""
        self.out.mkdir(parents=True, exist_ok=True)
        self.started = time.perf_counter()
        logs = self.load_checkpoint() or {}
        self.metrics = CsvLog(self.out / "metrics.csv", METRICS_COLUMNS, logs.get("metrics"))
        self.events = CsvLog(self.out / "events.csv", EVENTS_COLUMNS, logs.get("events"))
        self.timings = CsvLog(self.out / "timings.csv", TIMINGS_COLUMNS, logs.get("timings"))
        progress = Progress(self.config.rounds, self.version)
        try:
            run_virtual(self.serve(progress), start=self.now)
        finally:
            progress.close()
        save_torch(self.out / "model.pt", self.global_state)
        summary = {
            **self.identity, "asyncfl_version": asyncfl.__version__,
            "versions": {"python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__},
            "device": str(self.device), "hostname": platform.node(), "rounds_completed": self.version,
            "stop_reason": self.stop_reason, "virtual_time": self.now, "wall_seconds": self.elapsed(),
            "started_at": self.started_at, "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "sha256": {name: sha256(self.out / name) for name in ("model.pt", "metrics.csv", "events.csv")},
        }
        write_json(self.out / "run.json", summary)
        (self.out / "checkpoint.pt").unlink(missing_ok=True)
        return summary

    def save_checkpoint(self) -> None:
        checkpoint = {
            "format": CHECKPOINT_FORMAT, "identity": self.identity, "version": self.version, "now": self.now,
            "wall_seconds": self.elapsed(), "started_at": self.started_at, "global_state": self.global_state, "starts": self.starts,
            "rng": self.rng.bit_generator.state, "dispatch_counts": self.dispatch_counts.tolist(),
            "outstanding": [dataclasses.asdict(job) for job in self.outstanding.values()],
            "results": [{"key": list(key), **dataclasses.asdict(result)} for key, result in self.results.items()],
            "logs": {"metrics": self.metrics.text(), "events": self.events.text(), "timings": self.timings.text()},
        }
        save_torch(self.out / "checkpoint.pt", checkpoint)

    def load_checkpoint(self) -> dict | None:
        """Restore the state of the last checkpoint in `out`, if any; return the logs' text at that point."""
        path = self.out / "checkpoint.pt"
        if not path.exists():
            return None
        checkpoint = torch.load(path, map_location=self.device, weights_only=True)
        if checkpoint.get("format") != CHECKPOINT_FORMAT or checkpoint["identity"] != self.identity:
            raise InputError(f"{path} belongs to a run with other settings or data; "
                             "delete it to start afresh, or use another --out")
        self.version, self.now, self.wall_seconds = checkpoint["version"], checkpoint["now"], checkpoint["wall_seconds"]
        self.started_at = checkpoint["started_at"]
        self.global_state, self.starts = checkpoint["global_state"], checkpoint["starts"]
        self.rng.bit_generator.state = checkpoint["rng"]
        self.dispatch_counts = np.array(checkpoint["dispatch_counts"], dtype=np.int64)
        jobs = [Job(**{**job, "lrs": tuple(job["lrs"])}) for job in checkpoint["outstanding"]]
        self.outstanding = {job.key: job for job in jobs}
        self.results = {tuple(r.pop("key")): LocalResult(**r) for r in checkpoint["results"]}
        print(f"resuming {self.out} from its checkpoint at round {self.version}", flush=True)
        return checkpoint["logs"]


def check_inputs(config: TrainConfig, dataset: Dataset, partition: Partition) -> None:
    """Settings that only make sense against the data: one clear line each."""
    if partition.dataset != dataset.info.name or partition.offsets[-1] != len(dataset.train_labels):
        raise InputError(f"the partition was made for {partition.dataset} ({partition.offsets[-1]} samples), "
                         f"not {dataset.info.name} ({len(dataset.train_labels)}); make one with asyncfl partition")
    clients = partition.num_clients
    if not config.replacement:
        if config.clients_per_round > clients:
            raise InputError(f"clients_per_round (J) = {config.clients_per_round} exceeds the {clients} clients of "
                             "the partition; lower J or set replacement: true")
        if config.algorithm != "sync" and config.concurrency_or_default > clients:
            raise InputError(f"concurrency (M) = {config.concurrency_or_default} exceeds the {clients} clients; "
                             "lower it or set replacement: true")
    if np.any(partition.sizes == 0):
        raise InputError("the partition has clients without samples; make it with --min-size 1 or more")
