"""The clients' links: a dispatch downloads the global model and uploads the client's, each taking
the model's exact size over the client's bandwidth (docs/design.md "The clients' world").

Bandwidths are drawn once per run from their own random stream (`random_streams.NETWORK`), so
runs of different algorithms with one seed see the same links, and adding links shifts no other
draw. Off (`bandwidth_median: null`), transfers take no time and a dispatch costs what it always did.
"""

from dataclasses import dataclass

import numpy as np
import torch

from asyncfl.spec import random_streams
from asyncfl.spec.classes import drawn_per_client
from asyncfl.spec.config import TrainConfig
from asyncfl.spec.errors import InputError

MEGABIT = 1e6
# A transfer longer than this (about 30 years of virtual time) is a setting's mistake, not a world: past
# it the clock loses the precision to tell a dispatch's phases apart, or overflows to inf and never ends
MAX_TRANSFER_SECONDS = 1e9


@dataclass(frozen=True)
class Links:
    """Each client's downlink and uplink, in bits per second, and the model's size in bits.

    Attributes:
        down: per client, bandwidth_median × a lognormal factor of σ bandwidth_sigma (median 1), or
            × the client's compute speed where `bandwidth_follows_speed` (slow devices, slow links),
            or uniform within its link class's range (`link_classes`).
        up: `upload_fraction` of the downlink (measured mobile links upload slower than they download).
        model_bits: 8 × the bytes of the model's state dict, every parameter and buffer.
    """

    down: np.ndarray
    up: np.ndarray
    model_bits: int

    @classmethod
    def draw(cls, config: TrainConfig, speed: np.ndarray, model_bytes: int) -> "Links | None":
        if config.link_classes is not None:
            down = class_bandwidths(config.link_classes, config.seed, len(speed)) * MEGABIT
        elif config.bandwidth_median is None:
            return None
        elif config.bandwidth_follows_speed:
            down = config.bandwidth_median * MEGABIT * speed
        else:
            rng = np.random.default_rng([config.seed, random_streams.NETWORK])
            down = config.bandwidth_median * MEGABIT * rng.lognormal(0.0, config.bandwidth_sigma, len(speed))
        links = cls(down, down * config.upload_fraction, 8 * model_bytes)
        slowest = max((links.upload(c) for c in range(len(down))), default=0.0)
        if not slowest <= MAX_TRANSFER_SECONDS:
            raise InputError(
                f"config: with bandwidth_median = {config.bandwidth_median!r} Mbit/s, upload_fraction = "
                f"{config.upload_fraction!r} and bandwidth_sigma = {config.bandwidth_sigma!r}, the slowest client's "
                f"upload of the {model_bytes}-byte model would take {slowest:.3g} virtual s (at most "
                f"{MAX_TRANSFER_SECONDS:g}); raise bandwidth_median or upload_fraction, or lower bandwidth_sigma"
            )
        return links

    def download(self, client: int) -> float:
        return float(self.model_bits / self.down[client])

    def upload(self, client: int) -> float:
        return float(self.model_bits / self.up[client])


def class_bandwidths(link_classes: str, seed: int, clients: int) -> np.ndarray:
    """Per client, its downlink in Mbit/s: uniform within its link class's range (`link_classes`), the
    classes' members and bandwidths from their own stream."""
    rng = np.random.default_rng([seed, random_streams.LINK_CLASSES])
    return drawn_per_client(link_classes, "link_classes", rng, clients)


def state_bytes(model: torch.nn.Module) -> int:
    """The exact bytes of a model's state dict: what a dispatch sends down and a client sends back."""
    return sum(tensor.numel() * tensor.element_size() for tensor in model.state_dict().values())
