"""Which trainer a run gets: `auto` by device and by what its clients need; a named trainer as named."""

import pytest
import torch

from asyncfl.fl.algorithms import make_strategy
from asyncfl.settings.config import make_config
from asyncfl.training.graphed import GraphedTrainer, graphable_run
from asyncfl.training.plain import PlainTrainer
from asyncfl.training.runtime import trainer_class, trainer_name
from asyncfl.training.vectorised import VectorisedTrainer

CPU, CUDA = torch.device("cpu"), torch.device("cuda")  # only the device's type is read


def test_auto_is_graphed_on_cuda_where_the_clients_fit_a_captured_step():
    """Graphed was the fastest trainer on one H100 for cnn, resnet20 and mlp (docs/performance.md)."""
    assert trainer_name("auto", CUDA) == "graphed"
    assert trainer_class("auto", CUDA) is GraphedTrainer


def graphable(values: dict) -> bool:
    config = make_config(values)
    return graphable_run(config, make_strategy(config))


@pytest.mark.parametrize(
    "values",
    [
        {"prox_mu": 0.01},  # FedProx's term
        {"algorithm": "afl_as_coded"},  # a fresh optimizer every epoch
        {"algorithm": "fedasmu"},  # a fresher model merged mid-training
    ],
)
def test_auto_is_vectorised_on_cuda_for_what_a_captured_step_lacks(values):
    fits = graphable(values)
    assert not fits and trainer_class("auto", CUDA, fits) is VectorisedTrainer


def test_auto_is_plain_on_the_cpu_and_a_named_trainer_is_kept():
    assert trainer_class("auto", CPU) is PlainTrainer
    assert trainer_class("auto", CPU, graphable({"prox_mu": 0.01})) is PlainTrainer
    assert graphable({})
    for name in ("plain", "vectorised", "graphed"):
        assert trainer_name(name, CUDA, False) == trainer_name(name, CPU) == name
