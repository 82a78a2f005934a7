"""The validation split: held out of the clients' samples before partitioning, stratified, seeded on its
own stream, recorded in the partition's files, and what choices read instead of the test set."""

import json

import numpy as np
import pandas as pd
import pytest
import torch

from asyncfl.analysis.panels import comparison_target
from asyncfl.cli import main
from asyncfl.data.dataset import normalize
from asyncfl.data.holdout import Holdout
from asyncfl.data.loading import load_dataset
from asyncfl.data.partition import DirichletSplit, load_partition
from asyncfl.models import build_model
from asyncfl.settings.errors import InputError
from asyncfl.training.evaluation import evaluate

LABELS = np.repeat(np.arange(4), [40, 60, 80, 20])


def validated(clients: int = 5, alpha: float = 0.5, seed: int = 0, fraction: float = 0.2):
    return DirichletSplit(clients, alpha, seed).partition_subset(LABELS, "x", None, Holdout(fraction))[0]


def test_the_split_is_apart_from_the_clients_samples_and_with_them_is_the_training_set():
    partition = validated()
    assert partition.validation is not None
    assert not np.intersect1d(partition.validation, partition.indices).size
    assert np.array_equal(np.sort(np.concatenate([partition.validation, partition.indices])), np.arange(len(LABELS)))


def test_the_split_is_stratified():
    partition = validated(fraction=0.25)
    assert np.bincount(LABELS[partition.validation], minlength=4).tolist() == [10, 15, 20, 5]


def test_the_split_depends_on_the_seed_alone():
    first = validated(seed=3).validation
    assert np.array_equal(first, validated(seed=3, clients=8, alpha=5.0).validation)  # not on C or α
    assert not np.array_equal(first, validated(seed=4).validation)


@pytest.mark.parametrize(
    ("fraction", "message"),
    [
        (0.0, r"must be in \(0, 1\)"),
        (1.0, r"must be in \(0, 1\)"),
        (0.02, r"leaves class 3 \(20 samples\) with no validation sample"),
        (0.98, r"leaves class 3 \(20 samples\) with no training sample"),
    ],
)
def test_a_fraction_that_empties_a_side_of_a_class_is_one_line(fraction, message):
    with pytest.raises(InputError, match=message) as error:
        validated(fraction=fraction)
    assert "\n" not in str(error.value)


def test_the_files_record_the_split_and_a_run_reports_its_metrics(tmp_path):
    """`asyncfl partition --validation-fraction` writes the split; a run on it logs the global model's
    validation metrics beside the test ones, as evaluated on exactly the held-out samples."""
    npz = tmp_path / "part.npz"
    argv = ["partition", "--dataset", "digits", "--clients", "5", "--alpha", "0.5", "--seed", "0",
            "--validation-fraction", "0.2", "--out", str(npz)]  # fmt: skip
    assert main(argv) == 0
    partition = load_partition(npz)
    stats = json.loads(npz.with_suffix(".json").read_text())
    assert stats["validation"]["samples"] == len(partition.validation) == sum(stats["validation"]["class_counts"])
    assert stats["num_samples"] + len(partition.validation) == 1437  # digits' training set
    out = tmp_path / "run"
    train = ["train", "--dataset", "digits", "--partition", str(npz), "--out", str(out), "--rounds", "3",
             "--local-epochs", "1", "--model", "mlp", "--clients-per-round", "2"]  # fmt: skip
    assert main(train) == 0
    last = pd.read_csv(out / "metrics.csv").iloc[-1]
    dataset = load_dataset("digits", None)
    model = build_model("mlp", dataset.info, 0)
    state = torch.load(out / "model.pt", weights_only=True)
    held = torch.from_numpy(partition.validation)
    images = normalize(dataset.train_images[held], dataset.info)
    loss, accuracy = evaluate(model, state, images, dataset.train_labels[held])
    assert (last.validation_loss, last.validation_accuracy) == (loss, accuracy)


def test_a_partition_whose_split_overlaps_its_clients_is_refused(tmp_path):
    npz = tmp_path / "part.npz"
    partition = validated()
    np.savez(npz, indices=partition.indices, offsets=partition.offsets, dataset=np.array("x"),
             validation=np.concatenate([partition.validation, partition.indices[:1]]))  # fmt: skip
    with pytest.raises(InputError, match="validation split overlaps its clients' samples"):
        load_partition(npz)


def test_the_comparison_target_never_reads_the_test_set_where_runs_have_a_validation_split():
    last = pd.DataFrame(
        {
            "algorithm": ["afl", "afl", "sync", "sync"],
            "test_accuracy": [0.8, 0.9, 0.7, 0.6],
            "validation_accuracy": [0.5, 0.7, 0.9, 0.9],
        }  # fmt: skip
    )
    target, validated_ = comparison_target(last)
    assert validated_ and target == pytest.approx(0.9 * 0.9)
    perturbed = last.assign(test_accuracy=[0.1, 0.2, 0.99, 0.3])  # other test labels, other test accuracies
    assert comparison_target(perturbed) == (target, True)
    assert comparison_target(last.drop(columns="validation_accuracy"))[0] == pytest.approx(0.9 * 0.85)
