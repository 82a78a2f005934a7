"""Open arrivals (docs/world.md "The clients' world"): under `arrivals: poisson` clients check in at
the times of a Poisson process of rate `checkin_rate` per virtual second, and the server dispatches
one at each check-in while fewer than M are in flight (M a cap, not a target: FLSim's open loop).
The times are drawn from their own stream in fixed chunks, so the k-th check-in has one time whether
or not the run resumed from a checkpoint, and whether or not the check-ins before it were looked at
one by one: a check-in that would be turned away is skipped over (`first_after`), and only the chunk
at hand is kept, so a high rate costs neither a turn of the loop per check-in nor memory.
"""

import bisect

import numpy as np

from asyncfl.settings import random_streams
from asyncfl.settings.config import TrainConfig

CHUNK = 256


class CheckIns:
    """The check-in times of a run, drawn as they are needed, in increasing index order."""

    def __init__(self, seed: int, rate: float):
        self.rng = np.random.default_rng([seed, random_streams.CHECKINS])
        self.rate = rate
        self.first = 0  # index of the chunk's first check-in
        self.times: list[float] = []  # the chunk at hand

    @classmethod
    def of(cls, config: TrainConfig) -> "CheckIns | None":
        return cls(config.seed, config.checkin_rate) if config.checkin_rate is not None else None

    def advance(self) -> None:
        last = self.times[-1] if self.times else 0.0
        self.first += len(self.times)
        self.times = (last + np.cumsum(self.rng.exponential(1.0 / self.rate, CHUNK))).tolist()

    def time(self, index: int) -> float:
        """When the `index`-th check-in (from 0) happens; never an index before the last one asked for's chunk."""
        if index < self.first:
            raise ValueError(f"check-in {index} is behind the chunk at hand (from {self.first})")
        while index >= self.first + len(self.times):
            self.advance()
        return self.times[index - self.first]

    def first_after(self, index: int, after: float, at: float) -> int:
        """The first check-in from `index` on that happens after time `after` or at or after `at`."""
        self.time(index)
        while self.times[-1] <= after and self.times[-1] < at:
            self.advance()
        local = min(bisect.bisect_right(self.times, after), bisect.bisect_left(self.times, at))
        return max(index, self.first + local)
