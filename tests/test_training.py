"""Local trainers: the vectorised trainer agrees with the plain reference; early stopping; evaluation."""

import pytest
import torch

from asyncfl.data import DatasetInfo
from asyncfl.models import build_model
from asyncfl.errors import InputError
from asyncfl.training import EarlyStopping, LocalTask, Numerics, PlainTrainer, VectorisedTrainer, evaluate

OFFSETS = [0, 40, 104, 176, 240]  # unequal clients: 40, 64, 72, 64 samples; batches of 16 leave partial ones


def model_info(channels: int) -> DatasetInfo:
    return DatasetInfo("t", tuple("abcdefghij"), channels, (8, 8), (0.5,) * channels, (0.25,) * channels, 255.0)


def setup(name: str, channels: int):
    torch.manual_seed(0)
    model = build_model(name, model_info(channels))
    generator = torch.Generator().manual_seed(1)
    labels = torch.randint(0, 10, (240,), generator=generator)
    images = torch.randn(240, channels, 8, 8, generator=generator) + labels.view(-1, 1, 1, 1) * 0.3
    start = {k: v.clone() for k, v in model.state_dict().items()}
    return model, images, labels, start


def relative_difference(result, reference, start) -> float:
    """‖θ_vec − θ_plain‖ / ‖θ_plain − θ_start‖ over floating entries: how far apart the two updates are."""
    keys = [k for k in start if start[k].is_floating_point()]
    apart = sum(((result.state[k].double() - reference.state[k].double()) ** 2).sum() for k in keys)
    moved = sum(((reference.state[k].double() - start[k].double()) ** 2).sum() for k in keys)
    return float((apart / moved).sqrt())


# Tolerances: float32 noise of ~1e-7 grows with every step, most under Adam (whose update is
# ±lr wherever a gradient is near zero) and BatchNorm on small batches: a 1e-7 perturbation
# of the start gives the plain trainer itself 1e-2 differences after 3 ResNet epochs.
@pytest.mark.parametrize("name,channels,optimizer,lrs,tolerance", [
    ("cnn", 1, "adam", (0.05, 0.05, 1.0, 1.0), 1e-4),  # the lr = 1 epoch makes every client stop early
    ("cnn", 1, "sgd", (0.05, 0.02, 0.02), 1e-5),
    ("resnet20", 3, "sgd", (0.02, 0.02), 1e-2),
    ("resnet20", 3, "adam", (0.003,), 5e-3),
])
def test_vectorised_agrees_with_plain(name, channels, optimizer, lrs, tolerance):
    model, images, labels, start = setup(name, channels)
    tasks = [LocalTask(start, torch.arange(OFFSETS[c], OFFSETS[c + 1]), lrs, (0, 3, c, 0)) for c in range(4)]
    plain = PlainTrainer(model, images, labels, 16, optimizer, patience=1).train(tasks)
    vectorised = VectorisedTrainer(model, images, labels, 16, optimizer, patience=1).train(tasks)
    for reference, result in zip(plain, vectorised):
        assert result.epochs_run == reference.epochs_run
        assert result.train_loss == pytest.approx(reference.train_loss, rel=1e-3)
        assert relative_difference(result, reference, start) < tolerance
        assert result.state.keys() == reference.state.keys()
        if "stem.1.num_batches_tracked" in start:  # BatchNorm buffers are per client
            assert result.state["stem.1.num_batches_tracked"] == reference.state["stem.1.num_batches_tracked"]
    if lrs[2:3] == (1.0,):
        assert all(r.epochs_run == 3 for r in plain)  # early stopping fired: the check above covered it


# The speed knobs change the numbers, so each is checked against its own plain run; bf16 keeps
# 8 bits of mantissa (relative rounding ~4e-3 on every activation), so its tolerance is wide.
@pytest.mark.parametrize("name,channels,numerics,tolerance", [
    ("cnn", 1, Numerics(channels_last=True), 1e-4),
    ("cnn", 1, Numerics("bf16"), 5e-2),
    ("cnn", 1, Numerics("bf16", channels_last=True), 5e-2),
    ("resnet20", 3, Numerics(channels_last=True), 3e-2),  # as sensitive as 1e-7 noise on the start: 1e-2
])
def test_speed_knobs_agree_across_trainers_and_repeat_exactly(name, channels, numerics, tolerance):
    model, images, labels, start = setup(name, channels)
    tasks = [LocalTask(start, torch.arange(OFFSETS[c], OFFSETS[c + 1]), (0.003,), (0, 3, c, 0)) for c in range(4)]
    plain = PlainTrainer(model, images, labels, 16, "adam", 10, numerics).train(tasks)
    fp32 = PlainTrainer(build_model(name, model_info(channels)), images, labels, 16, "adam", 10).train(tasks)
    vectorised = VectorisedTrainer(model, images, labels, 16, "adam", 10, numerics)
    first, again = vectorised.train(tasks), vectorised.train(tasks)
    for reference, result, repeat, full in zip(plain, first, again, fp32):
        assert relative_difference(result, reference, start) < tolerance
        assert relative_difference(reference, full, start) > 0  # the knob did change the arithmetic
        assert all(torch.equal(result.state[k], repeat.state[k]) for k in start)
    if numerics.channels_last:
        assert plain[0].state["convs.1.weight" if name == "cnn" else "stem.0.weight"].is_contiguous(
            memory_format=torch.channels_last)


def test_bf16_with_batchnorm_needs_the_plain_trainer():
    model, images, labels, _ = setup("resnet20", 3)
    with pytest.raises(InputError, match="bf16 with the vectorised trainer needs a model without BatchNorm"):
        VectorisedTrainer(model, images, labels, 16, "adam", 10, Numerics("bf16"))
    PlainTrainer(model, images, labels, 16, "adam", 10, Numerics("bf16"))  # supported there


def test_clients_do_not_interact():
    """A client's result is the same trained alone or beside others."""
    model, images, labels, start = setup("cnn", 1)
    tasks = [LocalTask(start, torch.arange(OFFSETS[c], OFFSETS[c + 1]), (0.01, 0.01), (0, 3, c, 0)) for c in range(4)]
    trainer = VectorisedTrainer(model, images, labels, 16, "adam", patience=10)
    together = trainer.train(tasks)
    alone = trainer.train(tasks[2:3])[0]
    assert relative_difference(alone, together[2], start) < 1e-5


def test_early_stopping_closed_form():
    stopping = EarlyStopping(patience=2)
    assert [stopping.should_stop(x) for x in (1.0, 0.9, 0.95, 0.92, 0.85, 0.9, 0.9)] == [
        False, False, False, True, False, False, True]
    never = EarlyStopping(patience=10)
    assert not any(never.should_stop(1.0) for _ in range(10))


def test_evaluate_counts_correct_predictions():
    model, images, labels, start = setup("cnn", 1)
    loss, accuracy = evaluate(model, start, images, labels, batch_size=7)
    out = model(images)
    assert accuracy == pytest.approx((out.argmax(1) == labels).float().mean().item())
    assert loss == pytest.approx(torch.nn.functional.nll_loss(out, labels).item(), rel=1e-5)
