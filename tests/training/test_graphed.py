"""The graphed trainer's step, uncaptured on the CPU, against the plain trainer: index gather, optimizer
reset per dispatch, per-epoch learning rates, early stopping, tail batches. Capture and streams run
only on CUDA (the last test; it skips without a GPU)."""

import pytest
import torch

from asyncfl.training.graphed import GraphedTrainer, batch_sizes
from asyncfl.training.interface import LocalSettings
from asyncfl.training.plain import PlainTrainer
from asyncfl.training.runtime import configure_process
from conftest import skip_unless_cuda
from training_cases import OFFSETS, client_tasks, make_case, relative_difference


def tasks_for(start, lrs, device="cpu"):
    return client_tasks(start, lrs, len(OFFSETS) - 1, device)


def assert_same(results, reference):
    for result, expected in zip(results, reference, strict=True):
        assert result.epochs_run == expected.epochs_run and result.train_loss == expected.train_loss
        assert result.mean_epoch_loss == expected.mean_epoch_loss
        for key in expected.state:
            assert torch.equal(result.state[key], expected.state[key]), key


def test_batch_sizes_are_the_full_size_and_every_last_smaller_batch():
    """What `prepare` captures before any client trains: a client smaller than a batch is one batch."""
    assert batch_sizes([40, 64, 72, 64, 5], 16) == {16, 8, 5}
    assert batch_sizes([64, 128], 16) == {16}
    assert batch_sizes([], 16) == set()


@pytest.mark.parametrize("name,channels", [("cnn", 1), ("resnet20", 3)])
@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_same_bytes_as_the_plain_trainer(name, channels, optimizer):
    """Unequal clients (40, 64, 72, 64 samples, batch 16: tail batches of 8), lrs changing per epoch."""
    model, images, labels, start = make_case(name, channels)
    lrs = (3e-3, 2e-3, 1e-3)
    plain = PlainTrainer(model, images, labels, LocalSettings(16, optimizer, 10)).train(tasks_for(start, lrs))
    graphed = GraphedTrainer(model, images, labels, LocalSettings(16, optimizer, 10))
    assert_same(graphed.train(tasks_for(start, lrs)), plain)


def test_optimizer_state_is_fresh_for_every_dispatch():
    """The same client twice in one call, and again in a second call: three identical results."""
    model, images, labels, start = make_case("cnn", 1)
    trainer = GraphedTrainer(model, images, labels, LocalSettings(16, "adam", 10))
    task = tasks_for(start, (2e-3, 1e-3))[1]
    first, second = trainer.train([task, task])
    (third,) = trainer.train([task])
    assert_same([second, third], [first, first])


def test_early_stopping_matches_the_plain_trainer():
    """A learning rate so large that the loss climbs: patience 1 stops both trainers at the same epoch."""
    model, images, labels, start = make_case("cnn", 1)
    lrs = (0.5,) * 6
    plain = PlainTrainer(model, images, labels, LocalSettings(16, "adam", 1)).train(tasks_for(start, lrs))
    graphed = GraphedTrainer(model, images, labels, LocalSettings(16, "adam", 1)).train(tasks_for(start, lrs))
    assert_same(graphed, plain)
    assert any(result.epochs_run < len(lrs) for result in plain)


CUDA_CASES = [("cnn", 1, "adam", 3e-3), ("cnn", 1, "sgd", 1e-3), ("resnet20", 3, "adam", 3e-2)]


@pytest.mark.parametrize("name,channels,optimizer,tolerance", CUDA_CASES)
def test_captured_on_cuda_is_deterministic_batch_invariant_and_close_to_plain(name, channels, optimizer, tolerance):
    """CUDA: graphs replayed on the replicas' streams. A second trainer gives the same bytes; a client's
    result alone equals its result among others; the update is the plain trainer's up to rounding
    (capturable Adam and fused SGD compute on the device in fp32, the plain trainer's Adam its bias
    correction on the host): on one H100, 1.25e-3 for cnn with Adam and 1.2e-2 for resnet20, whose
    BatchNorm amplifies rounding as it does for the vectorised trainer (docs/performance.md "Speed")."""
    skip_unless_cuda()
    configure_process()  # as every command does: deterministic kernels, cuBLAS's fixed workspace
    model, images, labels, start = make_case(name, channels)
    model, images, labels = model.cuda(), images.cuda(), labels.cuda()
    start = {k: v.cuda() for k, v in start.items()}
    tasks = tasks_for(start, (2e-3, 1e-3), device="cuda")
    trainer = GraphedTrainer(model, images, labels, LocalSettings(16, optimizer, 10))
    together = trainer.train(tasks)
    assert_same(GraphedTrainer(model, images, labels, LocalSettings(16, optimizer, 10)).train(tasks), together)
    assert_same([trainer.train([task])[0] for task in tasks], together)
    plain = PlainTrainer(model, images, labels, LocalSettings(16, optimizer, 10)).train(tasks)
    for result, reference in zip(together, plain, strict=True):
        assert relative_difference(result, reference, start) < tolerance
