"""The paper's models (Section V) and a small baseline that is not the paper's, built from dataset
metadata; each returns log-probabilities."""

from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F

from asyncfl.data.dataset import DatasetInfo
from asyncfl.settings.errors import InputError
from asyncfl.settings.names import MODELS as MODEL_NAMES

ModelState = dict[str, torch.Tensor]  # a model's state dict: parameters and buffers by name


class CNN(nn.Module):
    """3 × [conv 3×3, 32 filters, ReLU], global average pool, linear: 19,146 parameters on MNIST."""

    def __init__(self, channels: int, num_classes: int, width: int = 32):
        super().__init__()
        self.convs = nn.ModuleList(
            nn.Conv2d(channels if i == 0 else width, width, kernel_size=3, padding=1) for i in range(3)
        )
        self.head = nn.Linear(width, num_classes)
        for layer in [*self.convs, self.head]:
            nn.init.xavier_uniform_(layer.weight)
            nn.init.zeros_(layer.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for conv in self.convs:
            x = F.relu(conv(x))
        x = x.mean(dim=(2, 3))  # global average pool; unlike adaptive_avg_pool2d, vmap-able in NHWC
        return F.log_softmax(self.head(x), dim=1)


class BasicBlock(nn.Module):
    """Two 3×3 conv+BN layers with a residual; a 1×1 conv+BN projection when the shape changes."""

    def __init__(self, in_channels: int, out_channels: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False), nn.BatchNorm2d(out_channels)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet20(nn.Module):
    """He et al.'s CIFAR ResNet-20: stem, three stages of three BasicBlocks (16/32/64 channels)."""

    def __init__(self, channels: int, num_classes: int):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(channels, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        blocks, width = [], 16
        for out_width, stride in ((16, 1), (32, 2), (64, 2)):
            for i in range(3):
                blocks.append(BasicBlock(width, out_width, stride if i == 0 else 1))
                width = out_width
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Linear(64, num_classes)
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.stem(x))
        x = x.mean(dim=(2, 3))  # global average pool; unlike adaptive_avg_pool2d, vmap-able in NHWC
        return F.log_softmax(self.head(x), dim=1)


class MLP(nn.Module):
    """McMahan et al. 2017's "2NN", a federated-learning baseline that is not the paper's: the image
    flattened, two hidden layers of 200 ReLU units, linear. On 8×8 digits (55,210 parameters) a sample
    costs a small fraction of the CNN's convolutions on a CPU, and it learns digits within a few
    epochs: the quick pipeline's straggler sweep trains it
    (docs/performance.md "The quick pipeline, measured")."""

    def __init__(self, in_features: int, num_classes: int, hidden: int = 200):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, hidden) for width in (in_features, hidden))
        self.head = nn.Linear(hidden, num_classes)
        for layer in [*self.layers, self.head]:
            nn.init.xavier_uniform_(layer.weight)
            nn.init.zeros_(layer.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.flatten(1)  # in the images' logical order, whatever their memory layout
        for layer in self.layers:
            x = F.relu(layer(x))
        return F.log_softmax(self.head(x), dim=1)


# A model from the dataset's channels, classes and image size (height, width); the convolutional
# models end in a global average pool and fit any size.
ModelFactory = Callable[[int, int, tuple[int, int]], nn.Module]
MODELS: dict[str, ModelFactory] = {
    "cnn": lambda channels, classes, _size: CNN(channels, classes),
    "resnet20": lambda channels, classes, _size: ResNet20(channels, classes),
    "mlp": lambda channels, classes, size: MLP(channels * size[0] * size[1], classes),
}
if set(MODELS) != set(MODEL_NAMES):  # names.MODELS and this table must list the same models
    raise ImportError(f"models {sorted(MODELS)} do not match names.MODELS {sorted(MODEL_NAMES)}")


def has_batchnorm(model: nn.Module) -> bool:
    """Whether the model keeps BatchNorm statistics (which rule out bf16 under vmap)."""
    return any(isinstance(module, nn.modules.batchnorm._BatchNorm) for module in model.modules())


def model_name_has_batchnorm(name: str) -> bool:
    """Whether the named model keeps BatchNorm statistics, found without allocating its weights."""
    with torch.device("meta"):
        return has_batchnorm(MODELS[name](3, 10, (32, 32)))


def build_model(name: str, info: DatasetInfo, seed: int | None = None) -> nn.Module:
    """A fresh model shaped for the dataset: its input channels and its number of classes. With a `seed`,
    the initial weights are drawn from a generator seeded with it, and the process's own generator is
    left as it was (a run's model is the same whatever ran before it in the process)."""
    if name not in MODELS:
        raise InputError(f"unknown model {name!r}; choose one of {', '.join(MODELS)}")
    if seed is None:
        return MODELS[name](info.channels, info.num_classes, info.size)
    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(seed)
        return MODELS[name](info.channels, info.num_classes, info.size)
