"""The clients' links: a dispatch downloads the global model and uploads the client's (docs/world.md
"The clients' world"), each taking the model's exact size over the client's bandwidth (`Links`), or a
time of its own whatever the model's size (`TransferTimes`: `download_seconds`, `upload_seconds`).

Per-client values are drawn once per run from their own random streams (`random_streams`), so runs of
different algorithms with one seed see the same links, and adding links shifts no other draw. Under
`transfer_draws: per_dispatch`, each dispatch draws its own within its client's class's range, from the
dispatch's own stream. Off (no bandwidth, no times), transfers take no time and a dispatch costs what it
always did.
"""

from dataclasses import dataclass

import numpy as np
import torch

from asyncfl.settings import random_streams
from asyncfl.settings.classes import ClassRanges, class_ranges
from asyncfl.settings.config import TrainConfig
from asyncfl.settings.errors import InputError
from asyncfl.settings.populations import PRESETS

MEGABIT = 1e6
# A transfer longer than this (about 30 years of virtual time) is a setting's mistake, not a world: past
# it the clock loses the precision to tell a dispatch's phases apart, or overflows to inf and never ends
MAX_TRANSFER_SECONDS = 1e9


def dispatch_fractions(seed: int, client: int, dispatch_index: int) -> tuple[float, float]:
    """Where within its client's ranges one dispatch's download and upload fall, uniform in [0, 1)."""
    down, up = np.random.default_rng([seed, random_streams.TRANSFERS, client, dispatch_index]).random(2)
    return float(down), float(up)


def within(ranges: ClassRanges, client: int, fraction: float) -> float:
    low = float(ranges.low[client])
    return low + (float(ranges.high[client]) - low) * fraction


def links_given(config: TrainConfig) -> tuple[str, str]:
    """What set the clients' links, as the user gave it (a population's classes named as its), and what
    to change where they are too slow: never a setting the run does not have."""
    if config.link_classes is not None:
        preset = PRESETS["population"].get(config.population or "", {}).get("link_classes")
        if preset == config.link_classes:
            given = f"population {config.population}'s link_classes = {config.link_classes!r} (Mbit/s)"
            return given, "raise upload_fraction, or give link_classes yourself with faster classes"
        return f"link_classes = {config.link_classes!r} (Mbit/s)", "raise the slowest class or upload_fraction"
    if config.bandwidth_follows_speed:
        given = f"bandwidth_median = {config.bandwidth_median!r} Mbit/s following each client's speed"
        return given, "raise bandwidth_median or upload_fraction, or narrow the clients' speeds"
    given = f"bandwidth_median = {config.bandwidth_median!r} Mbit/s, bandwidth_sigma = {config.bandwidth_sigma!r}"
    return given, "raise bandwidth_median or upload_fraction, or lower bandwidth_sigma"


@dataclass(frozen=True)
class Links:
    """Each client's downlink and uplink, in bits per second, and the model's size in bits.

    Attributes:
        down: per client, bandwidth_median × a lognormal factor of σ bandwidth_sigma (median 1), or
            × the client's compute speed where `bandwidth_follows_speed` (slow devices, slow links),
            or uniform within its link class's range (`link_classes`).
        up: `upload_fraction` of the downlink (measured mobile links upload slower than they download).
        model_bits: 8 × the bytes of the model's state dict, every parameter and buffer.
        per_dispatch: the link classes' ranges each dispatch draws its downlink in (`transfer_draws:
            per_dispatch`; the uplink the same fraction of it), and the run's seed; None: `down` always.
    """

    down: np.ndarray
    up: np.ndarray
    model_bits: int
    per_dispatch: tuple[ClassRanges, float, int] | None = None

    @classmethod
    def draw(cls, config: TrainConfig, speed: np.ndarray, model_bytes: int) -> "Links | TransferTimes | None":
        """The run's links: bandwidths, times of their own, or None (transfers take no time)."""
        if config.download_seconds is not None or config.upload_seconds is not None:
            return TransferTimes.draw(config, len(speed))
        per_dispatch = None
        if config.link_classes is not None:
            rng = np.random.default_rng([config.seed, random_streams.LINK_CLASSES])
            ranges = class_ranges(
                config.link_classes, "link_classes", rng, len(speed), config.class_draw == "probability"
            )
            down = ranges.value * MEGABIT
            if config.transfer_draws == "per_dispatch":
                per_dispatch = (ranges, config.upload_fraction, config.seed)
        elif config.bandwidth_median is None:
            return None
        elif config.bandwidth_follows_speed:
            down = config.bandwidth_median * MEGABIT * speed
        else:
            rng = np.random.default_rng([config.seed, random_streams.NETWORK])
            down = config.bandwidth_median * MEGABIT * rng.lognormal(0.0, config.bandwidth_sigma, len(speed))
        links = cls(down, down * config.upload_fraction, 8 * model_bytes, per_dispatch)
        lowest = down if per_dispatch is None else per_dispatch[0].low * MEGABIT
        slowest = float(np.max(links.model_bits / (lowest * config.upload_fraction), initial=0.0))
        if not slowest <= MAX_TRANSFER_SECONDS:
            given, fix = links_given(config)
            raise InputError(
                f"config: with {given} and upload_fraction = {config.upload_fraction!r}, the slowest client's upload "
                f"of the {model_bytes}-byte model would take {slowest:.3g} virtual s (at most "
                f"{MAX_TRANSFER_SECONDS:g}); {fix}"
            )
        return links

    def download(self, client: int) -> float:
        return float(self.model_bits / self.down[client])

    def upload(self, client: int) -> float:
        return float(self.model_bits / self.up[client])

    def dispatch_times(self, client: int, dispatch_index: int) -> tuple[float, float]:
        """One dispatch's download and upload seconds, drawn for it (`per_dispatch` set)."""
        assert self.per_dispatch is not None, "a dispatch draws its own times under transfer_draws: per_dispatch"
        ranges, upload_fraction, seed = self.per_dispatch
        down = within(ranges, client, dispatch_fractions(seed, client, dispatch_index)[0]) * MEGABIT
        return self.model_bits / down, self.model_bits / (down * upload_fraction)


@dataclass(frozen=True)
class TransferTimes:
    """Each client's download and upload seconds, whatever the model's size (`download_seconds`,
    `upload_seconds`: client classes, each from its own stream); a direction not given takes none.

    Attributes:
        down, up: per client, its class's range and the value drawn once within it; None: 0 s.
        seed: the run's seed, which keys each dispatch's own draws (`per_dispatch`).
        per_dispatch: each dispatch draws its times uniformly within its client's classes' ranges.
    """

    down: ClassRanges | None
    up: ClassRanges | None
    seed: int
    per_dispatch: bool

    @classmethod
    def draw(cls, config: TrainConfig, clients: int) -> "TransferTimes":
        by_probability = config.class_draw == "probability"
        drawn = []
        for key, stream in (("download_seconds", random_streams.DOWNLOADS), ("upload_seconds", random_streams.UPLOADS)):
            text = getattr(config, key)
            rng = np.random.default_rng([config.seed, stream])
            drawn.append(None if text is None else class_ranges(text, key, rng, clients, by_probability))
        return cls(drawn[0], drawn[1], config.seed, config.transfer_draws == "per_dispatch")

    def download(self, client: int) -> float:
        return 0.0 if self.down is None else float(self.down.value[client])

    def upload(self, client: int) -> float:
        return 0.0 if self.up is None else float(self.up.value[client])

    def dispatch_times(self, client: int, dispatch_index: int) -> tuple[float, float]:
        """One dispatch's download and upload seconds, drawn for it within its client's ranges."""
        down, up = dispatch_fractions(self.seed, client, dispatch_index)
        return (
            0.0 if self.down is None else within(self.down, client, down),
            0.0 if self.up is None else within(self.up, client, up),
        )


def state_bytes(model: torch.nn.Module) -> int:
    """The exact bytes of a model's state dict: what a dispatch sends down and a client sends back."""
    return sum(tensor.numel() * tensor.element_size() for tensor in model.state_dict().values())
