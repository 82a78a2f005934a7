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
from asyncfl.spec.errors import InputError
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
if ("always", *PERIOD_DRAWS, "diurnal", "trace") != AVAILABILITY_MODELS:  # the config's choices are these
    raise ImportError(f"availability models {list(PERIOD_DRAWS)} differ from the config's {AVAILABILITY_MODELS}")
DAY = 86_400.0  # virtual seconds: the diurnal cycle's period


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

    def __init__(
        self, flips: list[list[float]], starts_online: list[bool], draw: Callable[[int, float], np.ndarray] | None
    ):
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
        generators = [np.random.default_rng([config.seed, random_streams.AVAILABILITY, c]) for c in range(clients)]
        if config.availability == "diurnal":
            return Diurnal.of(config, generators).availability()
        means = np.array([config.online_mean, config.offline_mean])
        share = config.online_mean / (config.online_mean + config.offline_mean)
        starts_online = [bool(g.random() < share) for g in generators]
        period = PERIOD_DRAWS[config.availability]

        def draw(client: int, start: float) -> np.ndarray:
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
            flips.extend((last + np.cumsum(self.draw(client, last).ravel())).tolist())

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


class Diurnal:
    """A day's rhythm (`availability: diurnal`): each client alternates online periods, exponential with
    mean `online_mean`, and offline ones that end at the time-varying rate λ_on(t) = p(t) / ((1 − p(t)) ·
    online_mean), so that its online share follows p(t) = p̄ · (1 + a·cos(2π·t/DAY − φ_c)), p̄ the share
    `online_mean` / (`online_mean` + `offline_mean`) gives (a = 0 is `exponential` exactly in
    distribution). φ_c is the client's phase: uniform within ± `diurnal_spread` hours of the population's
    (whose peak is at t = 0: the virtual clock starts at its night), drawn first from its stream. The
    amplitude a makes the population-wide peak `diurnal_swing` times its trough: the spread of phases
    flattens the population's cycle by κ = sin(h)/h (h the spread in radians), so a = (S − 1)/(S + 1)/κ.
    Offline periods are drawn by thinning (candidates at the peak rate, each kept with λ_on(t)/λ_peak),
    period by period from the client's own stream, so a client's periods never depend on the queries.

    Attributes:
        generators: per client, its availability stream.
        phases: per client, φ_c in radians.
        share, amplitude: p̄ and a.
        online_mean: the mean online period.
    """

    def __init__(self, generators: list[np.random.Generator], phases: np.ndarray, share: float, amplitude: float,
                 online_mean: float):  # fmt: skip
        self.generators, self.phases, self.share = generators, phases, share
        self.amplitude, self.online_mean = amplitude, online_mean
        self.peak_rate = self.rate_on(self.share * (1 + amplitude))

    @classmethod
    def of(cls, config: TrainConfig, generators: list[np.random.Generator]) -> "Diurnal":
        spread = 2 * math.pi * config.diurnal_spread / 24
        flattening = math.sin(spread) / spread if spread else 1.0
        amplitude = (config.diurnal_swing - 1) / (config.diurnal_swing + 1) / flattening
        share = config.online_mean / (config.online_mean + config.offline_mean)
        if amplitude > 1 or share * (1 + amplitude) >= 1:
            raise InputError(
                f"config: availability: diurnal with diurnal_swing = {config.diurnal_swing!r} needs an online share at "
                f"the peak below 1, and online_mean / (online_mean + offline_mean) = {share:.3g} reaches "
                f"{share * (1 + amplitude):.3g} (amplitude {amplitude:.3g} of the mean); raise offline_mean, or lower "
                "diurnal_swing or diurnal_spread"
            )
        phases = np.array([g.uniform(-spread, spread) for g in generators])
        return cls(generators, phases, share, amplitude, config.online_mean)

    def rate_on(self, share: float) -> float:
        """The offline→online rate at which a client with online periods of mean `online_mean` is online
        `share` of the time."""
        return share / ((1 - share) * self.online_mean)

    def share_at(self, client: int, t: float) -> float:
        return self.share * (1 + self.amplitude * math.cos(2 * math.pi * t / DAY - self.phases[client]))

    def offline_period(self, client: int, start: float) -> float:
        """An offline period beginning at `start`, by thinning."""
        rng, t = self.generators[client], start
        while True:
            t += rng.exponential(1 / self.peak_rate)
            if rng.random() * self.peak_rate <= self.rate_on(self.share_at(client, t)):
                return t - start

    def availability(self) -> Availability:
        starts_online = [bool(g.random() < self.share_at(c, 0.0)) for c, g in enumerate(self.generators)]

        def draw(client: int, start: float) -> np.ndarray:
            periods, t, online = [], start, starts_online[client]
            for _ in range(2 * CHUNK):
                period = (
                    self.generators[client].exponential(self.online_mean) if online else self.offline_period(client, t)
                )
                periods.append(period)
                t, online = t + period, not online
            return np.array(periods)

        return Availability([[] for _ in self.generators], starts_online, draw)


def dispatch_fails(config: TrainConfig, client: int, dispatch_index: int) -> bool:
    """Whether this dispatch fails (its result never arrives): its own stream per (client, dispatch)."""
    if config.failure_probability == 0:
        return False
    rng = np.random.default_rng([config.seed, random_streams.FAILURE, client, dispatch_index])
    return bool(rng.random() < config.failure_probability)
