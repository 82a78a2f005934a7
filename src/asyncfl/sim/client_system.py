"""The client system model: per-client compute speed and network latency, drawn once per run
(docs/design.md "Training").

The draws depend only on the seed and the number of clients, never on the algorithm,
so afl and sync runs of one seed see the same clients (paired comparison). One
dispatch of client c costs  duration = I·n_c·seconds_per_sample / speed_c · jitter + latency_c
(or seconds_per_dispatch / speed_c · jitter + latency_c, whatever the client's data), + the model's
download and upload over the client's links, or their own times, where they are on (`network`)
of virtual time; jitter (`jitter.py`: lognormal, exponential or half-normal) has its own stream per
(client, dispatch).
"""

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from asyncfl.settings import random_streams
from asyncfl.settings.classes import drawn_per_client
from asyncfl.settings.config import DISTRIBUTIONS, TrainConfig
from asyncfl.sim.jitter import jitter_factor, transfer_factors
from asyncfl.sim.network import Links, TransferTimes
from asyncfl.sim.server_link import ServerLink
from asyncfl.sim.state import Job


@dataclass(frozen=True)
class ClientSystem:
    """The clients' speeds and latencies with the settings they were drawn from and that time a dispatch.

    Attributes:
        speed: relative compute speed per client (median 1).
        latency: network latency per client, virtual seconds.
        seed: the run's seed, which keys each dispatch's jitter stream.
        local_epochs: I, epochs per dispatch.
        seconds_per_sample: virtual compute seconds per sample-epoch at speed 1.
        jitter_distribution: the shape of each dispatch's compute time around the client's (`jitter.py`).
        jitter_sigma: σ of that jitter (0: none, where the shape reads σ).
        transfer_jitter: the shape and σ of each dispatch's transfer jitter (`transfer_jitter_*`).
        delay_is_latency: d_c of the learning rate is the latency only (config `lr_delay: latency`),
            not the whole duration (which includes the transfers).
        seconds_per_dispatch: instead, a dispatch's compute seconds at speed 1 whatever its data (None:
            I·n_c·seconds_per_sample).
        links: the clients' down- and uplinks, or their transfers' own times, or None: transfers take no time.
        server: the server's link that every transfer shares (`server_link`), or None: each transfer
            has its client's link to itself.
    """

    speed: np.ndarray
    latency: np.ndarray
    seed: int
    local_epochs: int
    seconds_per_sample: float
    jitter_distribution: str
    jitter_sigma: float
    transfer_jitter: tuple[str, float]
    delay_is_latency: bool
    seconds_per_dispatch: float | None = None
    links: Links | TransferTimes | None = None
    server: ServerLink | None = None
    replayed: "ReplayedCompute | None" = None  # a measured run's compute times, replayed (`analysis/sim_vs_real`)

    @classmethod
    def draw(cls, config: TrainConfig, num_clients: int, model_bytes: int = 0) -> "ClientSystem":
        rng = np.random.default_rng([config.seed, random_streams.SYSTEM])
        speed = draw(rng, config.speed_distribution, 1.0, config.speed_sigma, num_clients)
        speed = slowed(speed, config.seed, config.slow_fraction, config.slow_factor)
        speed = classed(speed, config.seed, config.speed_classes, config.class_draw == "probability")
        latency = draw(rng, config.latency_distribution, config.latency_median, config.latency_sigma, num_clients)
        links = Links.draw(config, speed, model_bytes)
        return cls(
            speed,
            latency,
            config.seed,
            config.local_epochs,
            config.seconds_per_sample,
            config.jitter_distribution,
            config.jitter_sigma,
            (config.transfer_jitter_distribution, config.transfer_jitter_sigma),
            config.lr_delay == "latency",
            config.seconds_per_dispatch,
            links,
            ServerLink.of(config.server_bandwidth, links if isinstance(links, Links) else None),
        )

    def median_phases(self, client: int, n_samples: int) -> "Phases":
        """The phases of a dispatch of this client at its own compute time, without jitter (the jitter's
        median when lognormal, its mean when exponential, its least when half-normal)."""
        work = self.seconds_per_dispatch
        if work is None:
            work = self.local_epochs * n_samples * self.seconds_per_sample
        compute = work / self.speed[client]
        links = self.links
        down, up = (links.download(client), links.upload(client)) if links else (0.0, 0.0)
        return Phases(down, float(compute), up, float(self.latency[client]))

    def phases(
        self,
        client: int,
        n_samples: int,
        dispatch_index: int,
        samples: int | None = None,
        transfers: tuple[float, float] | None = None,
    ) -> "Phases":
        """The virtual seconds of this client's `dispatch_index`-th dispatch, phase by phase; of the
        `samples` of its epochs it trains under partial work (None: all of them); with the download and
        upload seconds its `transfers` took on a shared server link (`server_link`; None: its own link's)."""
        phases = self.median_phases(client, n_samples)
        factor = jitter_factor(self.jitter_distribution, self.jitter_sigma, self.seed, client, dispatch_index)
        if factor is not None:
            phases = replace(phases, compute=phases.compute * factor)
        if self.replayed is not None:
            phases = replace(phases, compute=self.replayed.seconds(client, dispatch_index))
        if transfers is None and self.links is not None:  # the client's own, or this dispatch's draws
            if self.links.per_dispatch:
                transfers = self.links.dispatch_times(client, dispatch_index)
            factors = transfer_factors(*self.transfer_jitter, self.seed, client, dispatch_index)
            if factors is not None:
                down, up = transfers or (phases.download, phases.upload)
                transfers = (down * factors[0], up * factors[1])
        if transfers is not None:
            phases = replace(phases, download=transfers[0], upload=transfers[1])
        return phases if samples is None else phases.cut(samples, self.local_epochs * n_samples)

    def job_phases(self, job: Job, n_samples: int) -> "Phases":
        """A made dispatch's phases: as drawn, or with its measured compute (`durations: measured`)."""
        phases = self.phases(job.client, n_samples, job.dispatch_index, job.samples, job.transfers)
        return phases if job.compute is None else replace(phases, compute=job.compute)

    def duration(self, client: int, n_samples: int, dispatch_index: int) -> float:
        """Virtual seconds from dispatch to arrival for this client's `dispatch_index`-th dispatch."""
        return self.phases(client, n_samples, dispatch_index).total

    def delay(self, client: int, duration: float) -> float:
        """d_c of the delay-aware learning rate: the whole duration, or the latency only."""
        return float(self.latency[client]) if self.delay_is_latency else duration


@dataclass(frozen=True)
class ReplayedCompute:
    """A measured run's compute times (`durations: measured`), each dispatch's training × its client's
    slowness, for its replay on the virtual clock: the simulator's prediction of that run. A dispatch the
    measured run never made (the replay's order went another way) takes its client's mean, or every
    client's where the client never trained.

    Attributes:
        measured: virtual compute seconds by (client, dispatch index).
    """

    measured: dict[tuple[int, int], float]

    @cached_property
    def means(self) -> tuple[dict[int, float], float]:
        """Each client's mean measured compute, and every client's (a replayed phase is read per event)."""
        by_client: dict[int, list[float]] = {}
        for (client, _), seconds in self.measured.items():
            by_client.setdefault(client, []).append(seconds)
        return {c: float(np.mean(s)) for c, s in by_client.items()}, float(np.mean(list(self.measured.values())))

    def seconds(self, client: int, dispatch_index: int) -> float:
        if (client, dispatch_index) in self.measured:
            return self.measured[client, dispatch_index]
        own, overall = self.means
        return own.get(client, overall)


@dataclass(frozen=True)
class Phases:
    """One dispatch's virtual seconds: the download of the global model, local compute, the upload of
    the client's model, and the client's latency (its round trip's fixed cost)."""

    download: float
    compute: float
    upload: float
    latency: float

    @property
    def total(self) -> float:
        """Dispatch to arrival: compute + latency first, so that without links (both transfers 0) a
        duration has the very bits it had before links existed."""
        return self.compute + self.latency + self.download + self.upload

    def cut(self, samples: int, total_samples: int) -> "Phases":
        """These phases when the dispatch trains `samples` of its `total_samples` (partial work): the
        transfers and the latency whole, the compute in proportion."""
        return replace(self, compute=self.compute * samples / total_samples)

    @property
    def uploaded(self) -> float:
        """Dispatch to the end of the upload: the server holds the update from then on, and the latency
        (the round trip's fixed cost) follows."""
        return self.download + self.compute + self.upload


# Each per-client distribution by its config name: `median` times a lognormal factor of σ `sigma`, or
# `median` for every client
DISTRIBUTION_DRAWS: dict[str, Callable[[np.random.Generator, float, float, int], np.ndarray]] = {
    "lognormal": lambda rng, median, sigma, size: median * rng.lognormal(0.0, sigma, size),
    "constant": lambda rng, median, sigma, size: np.full(size, median),
}
if tuple(DISTRIBUTION_DRAWS) != DISTRIBUTIONS:  # the config's choices are exactly the draws here
    raise ImportError(f"distributions {list(DISTRIBUTION_DRAWS)} differ from the config's {DISTRIBUTIONS}")


def draw(rng: np.random.Generator, distribution: str, median: float, sigma: float, size: int) -> np.ndarray:
    return DISTRIBUTION_DRAWS[distribution](rng, median, sigma, size)


def slowed(speed: np.ndarray, seed: int, fraction: float, factor: float) -> np.ndarray:
    """`speed` with ⌈fraction·C⌉ clients, drawn from their own stream, `factor` times slower: the heavy
    tail of straggler studies, on top of any spread. The count is rounded to 9 decimals first (0.3 of
    10 clients is 3, not 4). Without slow clients the speeds are returned untouched, bit for bit."""
    count = math.ceil(round(fraction * len(speed), 9))
    if count == 0:
        return speed
    slow = np.random.default_rng([seed, random_streams.SLOW_CLIENTS]).choice(len(speed), count, replace=False)
    slower = speed.copy()
    slower[slow] /= factor
    return slower


def classed(speed: np.ndarray, seed: int, speed_classes: str | None, by_probability: bool) -> np.ndarray:
    """`speed` with each device class's clients FACTOR times slower (`speed_classes`, a factor drawn
    uniformly where the class gives a range), the classes' members and factors from their own stream.
    Without classes the speeds are returned untouched, bit for bit."""
    if speed_classes is None:
        return speed
    rng = np.random.default_rng([seed, random_streams.SPEED_CLASSES])
    return speed / drawn_per_client(speed_classes, "speed_classes", rng, len(speed), by_probability)
