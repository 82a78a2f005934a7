"""The client system model: per-client compute speed and network latency, drawn once per run
(README "Training").

The draws depend only on the seed and the number of clients, never on the algorithm,
so afl and sync runs of one seed see the same clients (paired comparison). One
dispatch of client c costs  duration = I·n_c·seconds_per_sample / speed_c · jitter + latency_c
of virtual time; jitter (lognormal, median 1) has its own stream per (client, dispatch).
"""

from dataclasses import dataclass

import numpy as np

from asyncfl.spec import random_streams
from asyncfl.spec.config import TrainConfig


@dataclass(frozen=True)
class ClientSystem:
    speed: np.ndarray  # relative compute speed per client (median 1)
    latency: np.ndarray  # network latency per client, virtual seconds

    @classmethod
    def draw(cls, config: TrainConfig, num_clients: int) -> "ClientSystem":
        rng = np.random.default_rng([config.seed, random_streams.SYSTEM])
        speed = draw(rng, config.speed_distribution, 1.0, config.speed_sigma, num_clients)
        latency = draw(rng, config.latency_distribution, config.latency_median, config.latency_sigma, num_clients)
        return cls(speed, latency)

    def duration(self, config: TrainConfig, client: int, n_samples: int, dispatch_index: int) -> float:
        """Virtual seconds from dispatch to arrival for this client's `dispatch_index`-th dispatch."""
        compute = config.local_epochs * n_samples * config.seconds_per_sample / self.speed[client]
        if config.jitter_sigma > 0:
            rng = np.random.default_rng([config.seed, random_streams.JITTER, client, dispatch_index])
            compute *= rng.lognormal(0.0, config.jitter_sigma)
        return float(compute + self.latency[client])

    def delay(self, config: TrainConfig, client: int, duration: float) -> float:
        """d_c of the delay-aware learning rate: the whole duration, or the latency only."""
        return duration if config.lr_delay == "duration" else float(self.latency[client])


def draw(rng: np.random.Generator, distribution: str, median: float, sigma: float, size: int) -> np.ndarray:
    if distribution == "constant":
        return np.full(size, median)
    return median * rng.lognormal(0.0, sigma, size)
