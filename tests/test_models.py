"""The models (the paper's two and the MLP baseline): sizes, shapes, log-probabilities, and that they learn."""

import pytest
import torch
from torch.nn import functional as F

from asyncfl.data.dataset import DatasetInfo
from asyncfl.models import build_model
from asyncfl.settings.errors import InputError


def info(channels: int, size: int, num_classes: int = 10) -> DatasetInfo:
    return DatasetInfo(
        "test",
        tuple(map(str, range(num_classes))),
        channels,
        (size, size),
        (0.5,) * channels,
        (0.25,) * channels,
        255.0,
    )


def count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def test_parameter_counts():
    assert count(build_model("cnn", info(1, 28))) == 19_146  # the paper's number
    # stem 464 + stage1 14,016 + stage2 51,648 + stage3 205,696 + head 650 (projection shortcuts)
    assert count(build_model("resnet20", info(3, 32))) == 272_474
    # McMahan et al.'s 2NN: (in + 1)·200 + 201·200 + 201·10, its input the flattened image
    assert count(build_model("mlp", info(1, 28))) == 785 * 200 + 201 * 200 + 201 * 10 == 199_210
    assert count(build_model("mlp", info(1, 8))) == 55_210


@pytest.mark.parametrize("name", ["cnn", "resnet20", "mlp"])
@pytest.mark.parametrize("channels,size", [(1, 8), (1, 28), (3, 32)])
def test_log_probabilities_for_every_input_size(name, channels, size):
    torch.manual_seed(0)
    model = build_model(name, info(channels, size, num_classes=7))
    out = model(torch.randn(4, channels, size, size))
    assert out.shape == (4, 7)
    assert torch.allclose(out.exp().sum(dim=1), torch.ones(4), atol=1e-5)


def test_cnn_init_is_xavier_with_zero_bias():
    model = build_model("cnn", info(1, 28))
    conv = model.convs[1]
    bound = (6 / (32 * 9 + 32 * 9)) ** 0.5
    assert conv.weight.abs().max() <= bound and conv.weight.abs().max() > 0.9 * bound
    assert all(torch.all(layer.bias == 0) for layer in [*model.convs, model.head])


def test_mlp_reads_images_in_their_logical_order_whatever_the_layout():
    """channels_last stores an image's pixels channel-innermost; the MLP's flatten must not see that."""
    torch.manual_seed(0)
    model = build_model("mlp", info(3, 8))
    images = torch.randn(4, 3, 8, 8)
    assert torch.equal(model(images), model(images.contiguous(memory_format=torch.channels_last)))


@pytest.mark.parametrize("name", ["cnn", "resnet20", "mlp"])
def test_one_adam_step_lowers_the_loss(name):
    torch.manual_seed(0)
    model = build_model(name, info(3, 32))
    images, labels = torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    before = F.nll_loss(model(images), labels)
    optimizer.zero_grad()
    before.backward()
    optimizer.step()
    assert F.nll_loss(model(images), labels).item() < before.item()


def test_unknown_model_is_named():
    with pytest.raises(InputError, match="unknown model 'vgg'"):
        build_model("vgg", info(1, 28))
