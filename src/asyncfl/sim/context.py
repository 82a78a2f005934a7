"""What a run reads and never changes, put together once: settings, device, model, data, trainer,
strategy and clients (docs/design.md "Training"). The engine and `asyncfl theory` build their runs here."""

import math
from dataclasses import dataclass

import numpy as np
import torch

from asyncfl.data.dataset import Dataset, DatasetInfo
from asyncfl.data.partition import Partition
from asyncfl.fl.server_optimizer import ServerOptimizer
from asyncfl.fl.strategy import Strategy
from asyncfl.models import ModelState, build_model
from asyncfl.runs.record import run_identity
from asyncfl.settings.config import TrainConfig
from asyncfl.settings.names import TIMING_ONLY
from asyncfl.settings.random_streams import client_init_seed, shuffle_key
from asyncfl.sim.checks import checked_parts
from asyncfl.sim.client_system import ClientSystem
from asyncfl.sim.network import state_bytes
from asyncfl.sim.outcomes import accounting_columns
from asyncfl.sim.state import Job
from asyncfl.sim.world import World
from asyncfl.training.graphed import graphable_run
from asyncfl.training.interface import LocalSettings, LocalTask, Merge, Trainer, TrainerPool
from asyncfl.training.runtime import choose_device, trainer_class, trainer_name
from asyncfl.training.timing_only import TimingOnlyTrainer


@dataclass(frozen=True)
class RunContext:
    """What a run reads and never changes."""

    config: TrainConfig
    identity: dict  # what a checkpoint must match to be resumed: settings, dataset, partition
    device: torch.device
    model: torch.nn.Module
    test_images: torch.Tensor
    test_labels: torch.Tensor
    train_images: torch.Tensor  # normalised, on the device: the global model's training loss and gradient
    train_labels: torch.Tensor
    # the validation split held out of the clients' samples (`holdout.Holdout`), where the partition has one
    validation_images: torch.Tensor | None
    validation_labels: torch.Tensor | None
    trainer: Trainer
    strategy: Strategy
    sizes: np.ndarray  # n_c per client
    model_bytes: int  # of the model's state dict: what one transfer moves, each way
    # Every training sample of the partition, grouped by client, on the device: the data of
    # L(θ) = Σ_c (n_c/n)·L_c(θ); client c's are all_indices[offsets[c]:offsets[c + 1]]
    all_indices: torch.Tensor
    offsets: np.ndarray
    system: ClientSystem
    world: World
    server_optimizer: ServerOptimizer | None = None  # the server's step on the aggregate (None: the aggregate)

    def client_indices(self, client: int) -> torch.Tensor:
        """The client's training indices, a view: one tensor per client would cost each of a million
        clients its own tensor object."""
        return self.all_indices[int(self.offsets[client]) : int(self.offsets[client + 1])]

    @property
    def accounting_columns(self) -> tuple[str, ...]:
        """metrics.csv's accounting columns (`outcomes.accounting_columns`)."""
        caps = self.config.max_staleness is not None
        return accounting_columns(self.strategy, caps, self.world.loses_dispatches)

    @property
    def trains(self) -> bool:
        return trains(self.config)

    @property
    def parameter_names(self) -> list[str]:
        """The model's parameters, the paper's θ (BatchNorm's statistics are buffers, not θ)."""
        return [name for name, _ in self.model.named_parameters()]

    def local_task(self, job: Job, start: ModelState, merge: Merge | None = None) -> LocalTask:
        """What the trainer needs of a job: the model it starts from, its samples, rates and shuffle
        stream, the local objective's proximal weight μ, and the fresher model it merges mid-training."""
        indices = self.client_indices(job.client)
        # partial work: the epochs it begins (`LocalTask.samples` cuts the last)
        lrs = job.lrs if job.samples is None else job.lrs[: math.ceil(job.samples / int(self.sizes[job.client]))]
        return LocalTask(
            start,
            indices,
            lrs,
            shuffle_key(self.config.seed, job.client, job.dispatch_index),
            self.config.prox_mu,
            self.strategy.optimizer_per_epoch,
            job.samples,
            merge,
        )


def trains(config: TrainConfig) -> bool:
    """Whether a run trains its clients and scores its model: not a timing-only run (`trainer: none`)."""
    return config.trainer != TIMING_ONLY


def client_initial_states(
    config: TrainConfig, info: DatasetInfo, device: torch.device, clients: int
) -> dict[int, ModelState]:
    """Each client's own initial model, seeded by `random_streams.client_init_seed`: the paper's reference
    code initialises every client's model (and the server's) separately, and its clients that never
    load the global model train on from there."""
    states = {}
    for client in range(clients):
        model = build_model(config.model, info, client_init_seed(config.seed, client)).to(device)
        states[client] = {name: value.detach().clone() for name, value in model.state_dict().items()}
    return states


def prepare_run(
    config: TrainConfig,
    dataset: Dataset,
    partition: Partition,
    partition_sha256: str,
    trainer: Trainer | None,
    tuned: dict | None = None,
    pool: TrainerPool | None = None,
) -> RunContext:
    """Check the run, build its model from the seed and put the data on the device. The process-wide
    switches are the command's (`runtime.configure_process`); `tuned`, the settings tuning chose;
    `pool`, where runs stepped together share a trainer of their kind (`lockstep.Lockstep`)."""
    device = choose_device(config.device)
    model = build_model(config.model, dataset.info, config.seed).to(device)
    model_bytes = state_bytes(model)
    strategy, system, world = checked_parts(config, dataset, partition, device, model_bytes)
    training = trains(config)
    # a timing-only run reads no image: none is copied, normalised, to the device
    images, test_images = dataset.normalized(device) if training else (torch.empty(0), torch.empty(0))
    labels = dataset.train_labels.to(device) if training else torch.empty(0, dtype=torch.long)
    if trainer is None and not training:
        trainer = TimingOnlyTrainer()
    if trainer is None:
        name = trainer_name(config.trainer, device, graphable_run(config, strategy))
        trainer = trainer_class(name, device)(model, images, labels, LocalSettings.of(config))
        if pool is not None:
            # what makes two runs' trainers interchangeable: one trains both runs' clients
            kind = (dataset.info.name, config.model, str(device), name, LocalSettings.of(config))
            trainer = pool.port(trainer, kind)
    held = None if partition.validation is None or not training else dataset.held_out(device, partition.validation)
    return RunContext(
        config,
        run_identity(config, dataset.info.name, partition_sha256, tuned),
        device,
        model,
        test_images,
        dataset.test_labels.to(device) if training else torch.empty(0, dtype=torch.long),
        images,
        labels,
        None if held is None else held[0],
        None if held is None else held[1],
        trainer,
        strategy,
        partition.sizes,
        model_bytes,
        torch.from_numpy(partition.indices).to(device),
        partition.offsets,
        system,
        world,
        ServerOptimizer.of(config, [name for name, _ in model.named_parameters()]),
    )
