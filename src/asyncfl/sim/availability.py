"""When each client is online (docs/design.md "The clients' world"): alternating online and offline
periods drawn from the client's own random stream, or a trace the user gives; and which dispatches
fail. Off by default (`availability: always`): every client is always online.

A client's periods are drawn ahead of time, in fixed chunks, in order, from its own stream
(`random_streams.AVAILABILITY`, keyed by client): whatever times a run asks about, and whether it
resumed from a checkpoint or not, a client's periods are the same numbers, and no other draw of the
run moves. The first period is online with the stationary probability on/(on + off). Imports only
numpy and the spec layer, so figures can draw a run's timeline from its settings.
"""

import bisect
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np

from asyncfl.spec import random_streams
from asyncfl.spec.config import AVAILABILITY_MODELS, TrainConfig
from asyncfl.spec.traces import read_trace

CHUNK = 64  # periods drawn at a time per client: fixed, so a client's periods never depend on the queries
NEVER = math.inf


def exponential(rng: np.random.Generator, means: np.ndarray, sigma: float) -> np.ndarray:
    return rng.exponential(1.0, (CHUNK, 2)) * means


def lognormal(rng: np.random.Generator, means: np.ndarray, sigma: float) -> np.ndarray:
    """Lognormal periods with the given means: μ = ln(mean) − σ²/2."""
    return np.exp(rng.normal(0.0, sigma, (CHUNK, 2)) - sigma**2 / 2) * means


PERIOD_DRAWS: dict[str, Callable[[np.random.Generator, np.ndarray, float], np.ndarray]] = {
    "exponential": exponential,
    "lognormal": lognormal,
}
if ("always", *PERIOD_DRAWS, "trace") != AVAILABILITY_MODELS:  # the config's choices are exactly these
    raise ImportError(f"availability models {list(PERIOD_DRAWS)} differ from the config's {AVAILABILITY_MODELS}")


class Availability:
    """Each client's online periods as the times its state flips: online at t when an odd number of
    flips at or before t follow an offline start (or an even number an online one).

    Attributes:
        flips: per client, the sorted times where it goes online or offline (extended as asked).
        starts_online: per client, whether it is online at time 0.
        online_now, known_from, known_until: per client, its state over the period [from, until) that
            a query last fell in: the engine asks about all idle clients at every dispatch, and the
            clock only moves forward, so most answers come from these arrays, not from a search.
    """

    def __init__(self, flips: list[list[float]], starts_online: list[bool], draw: Callable[[int], np.ndarray] | None):
        self.flips, self.starts_online, self.draw = flips, starts_online, draw
        clients = len(flips)
        self.online_now = np.zeros(clients, dtype=bool)
        self.known_from, self.known_until = np.full(clients, NEVER), np.full(clients, -NEVER)

    @classmethod
    def of(cls, config: TrainConfig, clients: int) -> "Availability | None":
        """The run's availability (None: every client always online)."""
        if config.availability == "always":
            return None
        if config.availability == "trace":
            return cls.from_trace(read_trace(Path(str(config.availability_trace)), clients))
        means = np.array([config.online_mean, config.offline_mean])
        generators = [np.random.default_rng([config.seed, random_streams.AVAILABILITY, c]) for c in range(clients)]
        share = config.online_mean / (config.online_mean + config.offline_mean)
        starts_online = [bool(g.random() < share) for g in generators]
        period = PERIOD_DRAWS[config.availability]

        def draw(client: int) -> np.ndarray:
            periods = period(generators[client], means, config.availability_sigma)
            return periods if starts_online[client] else periods[:, ::-1]  # (first state, second) per pair

        return cls([[] for _ in range(clients)], starts_online, draw)

    @classmethod
    def from_trace(cls, intervals: dict[int, list[tuple[float, float]]]) -> "Availability":
        clients = len(intervals)
        flips: list[list[float]] = [[] for _ in range(clients)]
        starts_online = [False] * clients
        for client, spans in intervals.items():
            for start, end in spans:
                if start == 0.0 and not flips[client]:
                    starts_online[client] = True
                else:
                    flips[client].append(start)
                flips[client].append(end)
        return cls(flips, starts_online, None)

    def cover(self, client: int, t: float) -> None:
        """Draw the client's periods until they reach past `t` (a trace is as long as it is)."""
        flips = self.flips[client]
        while self.draw is not None and (not flips or flips[-1] <= t):
            last = flips[-1] if flips else 0.0
            flips.extend((last + np.cumsum(self.draw(client).ravel())).tolist())

    def is_online(self, client: int, t: float) -> bool:
        self.cover(client, t)
        flipped = bisect.bisect_right(self.flips[client], t)
        return self.starts_online[client] != bool(flipped % 2)

    def online_mask(self, clients: np.ndarray, t: float) -> np.ndarray:
        """Whether each of `clients` is online at `t` (as `is_online`, for many clients at once)."""
        stale = clients[(t < self.known_from[clients]) | (t >= self.known_until[clients])]
        for client in stale.tolist():
            self.cover(client, t)
            flips = self.flips[client]
            flipped = bisect.bisect_right(flips, t)
            self.known_from[client] = flips[flipped - 1] if flipped else -NEVER
            self.known_until[client] = flips[flipped] if flipped < len(flips) else NEVER
            self.online_now[client] = self.starts_online[client] != bool(flipped % 2)
        return self.online_now[clients]

    def first_online(self, clients: np.ndarray, t: float) -> float:
        """The first time at or after `t` one of `clients` is online (inf: none ever is again)."""
        online = self.online_mask(clients, t)
        return t if online.any() else float(self.known_until[clients].min(initial=NEVER))

    def online_until(self, client: int, t: float) -> float:
        """When the client, online at `t`, goes offline (inf: never, past a trace's end it is offline)."""
        self.cover(client, t)
        flips = self.flips[client]
        index = bisect.bisect_right(flips, t)
        return flips[index] if index < len(flips) else NEVER


def dispatch_fails(config: TrainConfig, client: int, dispatch_index: int) -> bool:
    """Whether this dispatch fails (its result never arrives): its own stream per (client, dispatch)."""
    if config.failure_probability == 0:
        return False
    rng = np.random.default_rng([config.seed, random_streams.FAILURE, client, dispatch_index])
    return bool(rng.random() < config.failure_probability)
