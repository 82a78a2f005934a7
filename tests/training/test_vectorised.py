"""The vectorised trainer agrees with the plain reference, under every speed knob, and clients do not interact."""

import pytest
import torch

from asyncfl.models import build_model
from asyncfl.training.interface import LocalSettings
from asyncfl.training.numerics import Numerics
from asyncfl.training.plain import PlainTrainer
from asyncfl.training.vectorised import VectorisedTrainer
from training_cases import client_tasks, make_case, model_info, relative_difference


# Tolerances: float32 noise of ~1e-7 grows with every step, most under Adam (whose update is
# ±lr wherever a gradient is near zero) and BatchNorm on small batches: a 1e-7 perturbation
# of the start gives the plain trainer itself 1e-2 differences after 3 ResNet epochs.
@pytest.mark.parametrize(
    "name,channels,optimizer,lrs,tolerance",
    [
        ("cnn", 1, "adam", (0.05, 0.05, 1.0, 1.0), 1e-4),  # the lr = 1 epoch makes every client stop early
        ("cnn", 1, "sgd", (0.05, 0.02, 0.02), 1e-5),
        ("resnet20", 3, "sgd", (0.02, 0.02), 1e-2),
        ("resnet20", 3, "adam", (0.003,), 3e-2),  # 5e-3 on AVX-512 CPUs, 1.7e-2 measured on AMD EPYC without it
    ],
)
def test_vectorised_agrees_with_plain(name, channels, optimizer, lrs, tolerance):
    model, images, labels, start = make_case(name, channels)
    tasks = client_tasks(start, lrs, 4)
    plain = PlainTrainer(model, images, labels, LocalSettings(16, optimizer, 1)).train(tasks)
    vectorised = VectorisedTrainer(model, images, labels, LocalSettings(16, optimizer, 1)).train(tasks)
    for reference, result in zip(plain, vectorised, strict=True):
        assert result.epochs_run == reference.epochs_run
        assert result.train_loss == pytest.approx(reference.train_loss, rel=1e-3)
        assert result.mean_epoch_loss == pytest.approx(reference.mean_epoch_loss, rel=1e-3)
        assert relative_difference(result, reference, start) < tolerance
        assert result.state.keys() == reference.state.keys()
        if "stem.1.num_batches_tracked" in start:  # BatchNorm buffers are per client
            assert result.state["stem.1.num_batches_tracked"] == reference.state["stem.1.num_batches_tracked"]
    if lrs[2:3] == (1.0,):
        assert all(r.epochs_run == 3 for r in plain)  # early stopping fired: the check above covered it


# The speed knobs change the numbers, so each is checked against its own plain run; bf16 keeps
# 8 bits of mantissa (relative rounding ~4e-3 on every activation), so its tolerance is wide.
@pytest.mark.parametrize(
    "name,channels,numerics,tolerance",
    [
        ("cnn", 1, Numerics(channels_last=True), 1e-4),
        ("cnn", 1, Numerics("bf16"), 5e-2),
        ("cnn", 1, Numerics("bf16", channels_last=True), 5e-2),
        ("resnet20", 3, Numerics(channels_last=True), 3e-2),  # as sensitive as 1e-7 noise on the start: 1e-2
    ],
)
def test_speed_knobs_agree_across_trainers_and_repeat_exactly(name, channels, numerics, tolerance):
    model, images, labels, start = make_case(name, channels)
    tasks = client_tasks(start, (0.003,), 4)
    plain = PlainTrainer(model, images, labels, LocalSettings(16, "adam", 10, numerics)).train(tasks)
    fp32 = PlainTrainer(build_model(name, model_info(channels)), images, labels, LocalSettings(16, "adam", 10)).train(
        tasks
    )
    vectorised = VectorisedTrainer(model, images, labels, LocalSettings(16, "adam", 10, numerics))
    first, again = vectorised.train(tasks), vectorised.train(tasks)
    for reference, result, repeat, full in zip(plain, first, again, fp32, strict=True):
        assert relative_difference(result, reference, start) < tolerance
        assert relative_difference(reference, full, start) > 0  # the knob did change the arithmetic
        assert all(torch.equal(result.state[k], repeat.state[k]) for k in start)
    if numerics.channels_last:
        assert (
            plain[0]
            .state["convs.1.weight" if name == "cnn" else "stem.0.weight"]
            .is_contiguous(memory_format=torch.channels_last)
        )


def test_clients_do_not_interact():
    """A client's result is the same trained alone or beside others."""
    model, images, labels, start = make_case("cnn", 1)
    tasks = client_tasks(start, (0.01, 0.01), 4)
    trainer = VectorisedTrainer(model, images, labels, LocalSettings(16, "adam", 10))
    together = trainer.train(tasks)
    alone = trainer.train(tasks[2:3])[0]
    assert relative_difference(alone, together[2], start) < 1e-5
