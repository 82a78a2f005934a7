"""check_run: every setting that cannot work with the data, device or trainer is refused in one line."""

import dataclasses

import numpy as np
import pytest
import torch

from asyncfl.data.partition import Partition
from asyncfl.settings.config import make_config
from asyncfl.settings.errors import InputError
from asyncfl.sim.checks import check_run
from engine_cases import contiguous_partition, tiny_dataset

CPU, CUDA = torch.device("cpu"), torch.device("cuda")  # check_run only reads the device's type


@pytest.mark.parametrize(
    "settings,device,message",
    [
        ({"clients_per_round": 4}, CPU, "clients_per_round \\(J\\) = 4 exceeds the 3 clients"),
        (
            {"algorithm": "afl", "clients_per_round": 2, "concurrency": 5},
            CPU,
            "concurrency \\(M\\) = 5 exceeds the 3 clients",
        ),
        ({"algorithm": "fedbuff", "clients_per_round": 2, "concurrency": 4}, CPU, "concurrency \\(M\\) = 4"),
        ({"precision": "tf32", "clients_per_round": 2}, CPU, "precision tf32 is a CUDA format"),
        (  # FedProx's term is not in a captured step: auto is vectorised on CUDA, which cannot mix bf16 and BatchNorm
            {"precision": "bf16", "model": "resnet20", "prox_mu": 0.01, "clients_per_round": 2},
            CUDA,
            "bf16 with the vectorised trainer needs a model without BatchNorm",
        ),
        (
            {"precision": "bf16", "model": "resnet20", "trainer": "vectorised", "clients_per_round": 2},
            CPU,
            "bf16 with the vectorised trainer needs a model without BatchNorm",
        ),
        ({"prox_mu": 0.01, "trainer": "graphed", "clients_per_round": 2}, CPU, "prox_mu = 0.01 needs trainer"),
        (
            {"algorithm": "afl_as_coded", "trainer": "graphed", "clients_per_round": 2},
            CPU,
            "afl_as_coded re-creates the optimizer every epoch",
        ),
    ],
)
def test_settings_that_cannot_work_are_refused(settings, device, message):
    with pytest.raises(InputError, match=message):
        check_run(make_config(settings), tiny_dataset(24), contiguous_partition([8, 8, 8]), device)


@pytest.mark.parametrize(
    "settings,device",
    [
        ({"clients_per_round": 4, "replacement": True}, CPU),  # with replacement J may exceed C
        ({"precision": "bf16", "model": "resnet20", "clients_per_round": 2}, CPU),  # auto is plain on the CPU
        ({"precision": "bf16", "clients_per_round": 2, "trainer": "vectorised"}, CUDA),  # the cnn has no BatchNorm
        ({"precision": "tf32", "clients_per_round": 2}, CUDA),
        ({"prox_mu": 0.01, "trainer": "vectorised", "clients_per_round": 2}, CPU),
        ({"algorithm": "afl_as_coded", "clients_per_round": 2}, CPU),
        ({"precision": "bf16", "model": "resnet20", "clients_per_round": 2}, CUDA),  # auto: graphed, no vmap
        ({"prox_mu": 0.01, "clients_per_round": 2}, CUDA),  # auto: vectorised, which has the proximal term
        ({"algorithm": "afl_as_coded", "clients_per_round": 2}, CUDA),  # auto: vectorised, an optimizer per epoch
    ],
)
def test_settings_that_work_pass(settings, device):
    check_run(make_config(settings), tiny_dataset(24), contiguous_partition([8, 8, 8]), device)


def test_partition_of_another_dataset_is_refused():
    other = Partition(np.arange(24, dtype=np.int64), np.array([0, 8, 16, 24]), "mnist")
    with pytest.raises(InputError, match="made for mnist"):
        check_run(make_config({}), tiny_dataset(24), other, CPU)


def test_empty_clients_are_refused():
    with pytest.raises(InputError, match="clients without samples"):
        check_run(make_config({"clients_per_round": 2}), tiny_dataset(24), contiguous_partition([12, 0, 12]), CPU)


def test_a_partition_of_part_of_the_training_set_is_accepted():
    """Any partition whose indices are valid training indices trains (here 12 of 24 samples)."""
    part = Partition(np.arange(0, 24, 2, dtype=np.int64), np.array([0, 4, 8, 12]), "tiny", subset_of=24)
    check_run(make_config({"clients_per_round": 2}), tiny_dataset(24), part, CPU)
    check_run(make_config({"clients_per_round": 2}), tiny_dataset(24), dataclasses.replace(part, subset_of=None), CPU)


def test_a_subset_drawn_from_another_size_of_the_dataset_is_refused():
    part = Partition(np.arange(12, dtype=np.int64), np.array([0, 4, 8, 12]), "tiny", subset_of=60000)
    with pytest.raises(InputError, match="made for tiny \\(60000 samples\\), not tiny \\(24\\)"):
        check_run(make_config({"clients_per_round": 2}), tiny_dataset(24), part, CPU)
