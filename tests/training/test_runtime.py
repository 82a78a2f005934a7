"""Which trainer a run gets: `auto` by device and by what its clients need; a named trainer as named."""

import pytest
import torch

from asyncfl.training.graphed import GraphedTrainer, graphable
from asyncfl.training.plain import PlainTrainer
from asyncfl.training.runtime import trainer_class, trainer_name
from asyncfl.training.vectorised import VectorisedTrainer

CPU, CUDA = torch.device("cpu"), torch.device("cuda")  # only the device's type is read


def test_auto_is_graphed_on_cuda_where_the_clients_fit_a_captured_step():
    """Graphed was the fastest trainer on one H100 for cnn, resnet20 and mlp (docs/performance.md)."""
    assert trainer_name("auto", CUDA) == "graphed"
    assert trainer_class("auto", CUDA) is GraphedTrainer


@pytest.mark.parametrize("prox_mu,optimizer_per_epoch", [(0.01, False), (0.0, True)])
def test_auto_is_vectorised_on_cuda_for_what_a_captured_step_lacks(prox_mu, optimizer_per_epoch):
    fits = graphable(prox_mu, optimizer_per_epoch)
    assert not fits and trainer_class("auto", CUDA, fits) is VectorisedTrainer


def test_auto_is_plain_on_the_cpu_and_a_named_trainer_is_kept():
    assert trainer_class("auto", CPU) is PlainTrainer
    assert trainer_class("auto", CPU, graphable(0.0, True)) is PlainTrainer
    assert graphable(0.0, False)
    for name in ("plain", "vectorised", "graphed"):
        assert trainer_name(name, CUDA, False) == trainer_name(name, CPU) == name
