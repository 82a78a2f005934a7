"""Open arrivals (docs/design.md "The clients' world"): under `arrivals: poisson` clients check in at
the times of a Poisson process of rate `checkin_rate` per virtual second, and the server dispatches
one at each check-in while fewer than M are in flight (M a cap, not a target: FLSim's open loop).
The times are drawn from their own stream in fixed chunks, so the k-th check-in has one time whether
or not the run resumed from a checkpoint.
"""

import numpy as np

from asyncfl.spec import random_streams
from asyncfl.spec.config import TrainConfig

CHUNK = 256


class CheckIns:
    """The check-in times of a run, drawn as they are needed."""

    def __init__(self, seed: int, rate: float):
        self.rng = np.random.default_rng([seed, random_streams.CHECKINS])
        self.rate = rate
        self.times: list[float] = []

    @classmethod
    def of(cls, config: TrainConfig) -> "CheckIns | None":
        return cls(config.seed, config.checkin_rate) if config.checkin_rate is not None else None

    def time(self, index: int) -> float:
        """When the `index`-th check-in (from 0) happens."""
        while len(self.times) <= index:
            last = self.times[-1] if self.times else 0.0
            gaps = self.rng.exponential(1.0 / self.rate, CHUNK)
            self.times.extend((last + np.cumsum(gaps)).tolist())
        return self.times[index]
