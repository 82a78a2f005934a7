"""The dataset's copies on a device are made once and shared by the runs of one process: the
normalised images, and each validation split's images and labels (train-many's runs stepped together
held one 19 MB Fashion-MNIST split each before)."""

import dataclasses

import numpy as np
import torch

from asyncfl.data.dataset import normalize
from asyncfl.settings.config import make_config
from asyncfl.sim.context import prepare_run
from engine_cases import contiguous_partition, tiny_dataset

CPU = torch.device("cpu")


def test_a_validation_split_is_its_samples_made_once_per_device_and_split():
    dataset = tiny_dataset(40)
    split = np.array([3, 7, 11, 30], dtype=np.int64)
    images, labels = dataset.held_out(CPU, split)
    assert torch.equal(images, normalize(dataset.train_images, dataset.info)[split])
    assert torch.equal(labels, dataset.train_labels[split])
    again = dataset.held_out(CPU, split.copy())  # the same split, another array: the same copy
    assert again[0] is images and again[1] is labels
    other = dataset.held_out(CPU, np.array([3, 7, 11, 31], dtype=np.int64))
    assert other[0] is not images and torch.equal(other[1], dataset.train_labels[[3, 7, 11, 31]])


def test_runs_of_one_partition_share_its_validation_split_and_read_its_values():
    dataset = tiny_dataset(40)
    plain = contiguous_partition([8, 8, 8, 6])
    held = np.arange(30, 40, dtype=np.int64)
    partition = dataclasses.replace(plain, validation=held)
    runs = [
        prepare_run(make_config({"seed": seed, "clients_per_round": 2}), dataset, partition, "x", None)
        for seed in (0, 1)
    ]
    first, second = (run.validation_images for run in runs)
    assert first is not None and second is not None and first.data_ptr() == second.data_ptr()
    assert torch.equal(first, dataset.normalized(CPU)[0][held])
    assert prepare_run(make_config({"clients_per_round": 2}), dataset, plain, "x", None).validation_images is None
