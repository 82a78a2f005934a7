"""Every check of a run's settings against its data, device and trainer, made before any tensor work.

`config.make_config` checks each setting on its own (types, ranges, choices); what can only be
judged against the data or the machine is here, one clear line each, naming the key and the fix.
"""

import numpy as np
import torch

from asyncfl.data.dataset import Dataset
from asyncfl.data.partition import Partition
from asyncfl.fl.algorithms import make_strategy
from asyncfl.fl.strategy import Strategy
from asyncfl.models import model_name_has_batchnorm
from asyncfl.settings.config import TrainConfig
from asyncfl.settings.errors import InputError
from asyncfl.settings.names import TIMING_ONLY
from asyncfl.sim.client_system import ClientSystem, Phases
from asyncfl.sim.partial_work import samples_after
from asyncfl.sim.world import World
from asyncfl.training.graphed import graphable_run
from asyncfl.training.runtime import trainer_name


def check_run(config: TrainConfig, dataset: Dataset, partition: Partition, device: torch.device) -> None:
    """Raise InputError for the first setting that cannot work with this data on this device."""
    n = len(dataset.train_labels)
    # Any partition whose indices are valid training indices is accepted (a part of the set, too); one
    # drawn by `asyncfl partition --subset-*` also records the training set's size it was drawn from.
    made_from = partition.offsets[-1] if partition.subset_of is None else partition.subset_of
    if partition.dataset != dataset.info.name or (partition.subset_of is not None and made_from != n):
        raise InputError(
            f"{partition.source} was made for {partition.dataset} ({made_from} samples), "
            f"not {dataset.info.name} ({n}); make one with asyncfl partition"
        )
    if partition.sizes_only and config.trainer != TIMING_ONLY:
        raise InputError(
            f"{partition.source} gives its clients' sizes and no samples: only a timing-only run (trainer: none) "
            "can use it; make a partition with asyncfl partition"
        )
    if len(partition.indices) and (partition.indices.min() < 0 or partition.indices.max() >= n):
        raise InputError(
            f"{partition.source} has sample indices outside {dataset.info.name}'s {n} training samples; "
            "make it again with asyncfl partition"
        )
    held = partition.validation
    if held is not None and len(held) and (held.min() < 0 or held.max() >= n):
        raise InputError(
            f"{partition.source} holds validation indices outside {dataset.info.name}'s {n} training samples; "
            "make it again with asyncfl partition"
        )
    clients = partition.num_clients
    if not config.replacement and config.clients_per_round > clients:
        raise InputError(
            f"clients_per_round (J) = {config.clients_per_round} exceeds the {clients} clients of "
            "the partition; lower J or set replacement: true"
        )
    strategy = make_strategy(config)
    strategy.check(clients)
    trainer = trainer_name(config.trainer, device, graphable_run(config, strategy))
    if trainer == "graphed":
        if config.prox_mu:
            raise InputError(
                f"prox_mu = {config.prox_mu} needs trainer: plain or vectorised (graphed has no proximal term)"
            )
        if strategy.optimizer_per_epoch:
            raise InputError(
                f"algorithm {config.algorithm} re-creates the optimizer every epoch, which trainer: graphed does not; "
                "use trainer: plain or vectorised"
            )
        if strategy.merges_fresh_model:
            raise InputError(
                f"algorithm {config.algorithm} merges a fresher global model mid-training, which trainer: graphed "
                "does not; use trainer: plain or vectorised"
            )
    if np.any(partition.sizes == 0):
        raise InputError("the partition has clients without samples; make it with --min-size 1 or more")
    if config.precision == "tf32" and device.type != "cuda":
        raise InputError("precision tf32 is a CUDA format and this run is on the CPU; use fp32 or bf16")
    if config.precision == "bf16" and trainer == "vectorised" and model_name_has_batchnorm(config.model):
        raise InputError(
            "precision bf16 with the vectorised trainer needs a model without BatchNorm (vmap's "
            "batch-norm rule cannot mix bf16 activations with fp32 statistics); use trainer: plain "
            "or precision fp32/tf32"
        )


def check_deadline(strategy: Strategy, system: ClientSystem, sizes: np.ndarray, batch_size: int) -> None:
    """A round deadline that too few clients can meet would abandon every round: refused, with the
    fastest clients' times, before anything runs. Under partial work a client meets it with one step.
    The clients are timed until enough meet it (a million clients are not all timed to find ten)."""
    deadline = strategy.round_deadline
    if deadline is None:
        return
    needed, meeting, durations = strategy.min_reports, 0, []
    for client, size in enumerate(sizes):
        durations.append(shortest_report(strategy, system, client, int(size), batch_size).total)
        meeting += durations[-1] <= deadline
        if meeting == needed:
            return
    durations.sort()
    raise InputError(
        f"round_deadline = {deadline!r} virtual seconds is shorter than the dispatches of all but "
        f"{meeting} clients (the fastest takes {durations[0]:.4g} s), and a round "
        f"needs {needed} reports (min_report_fraction of J); raise round_deadline above {durations[needed - 1]:.4g}"
    )


def shortest_report(strategy: Strategy, system: ClientSystem, client: int, size: int, batch_size: int) -> Phases:
    """The phases of the least a client can send at its own compute time (`median_phases`): its whole
    dispatch, or under partial work its first local step."""
    phases = system.median_phases(client, size)
    if not strategy.partial_work:
        return phases
    return phases.cut(samples_after(1, size, batch_size), system.local_epochs * size)


def checked_parts(
    config: TrainConfig, dataset: Dataset, partition: Partition, device: torch.device, model_bytes: int
) -> tuple[Strategy, ClientSystem, World]:
    """Every check a run makes before it trains (its settings against the data, the partition, the
    device, its clients' durations and links, its trace), and the parts they check: the run's strategy,
    its clients' system and its world. `asyncfl train-many` makes them for every run before the first trains."""
    check_run(config, dataset, partition, device)
    strategy, system = make_strategy(config), ClientSystem.draw(config, partition.num_clients, model_bytes)
    check_deadline(strategy, system, partition.sizes, config.batch_size)
    return strategy, system, World.of(config, partition.num_clients)
