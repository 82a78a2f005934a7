"""Each client's online and offline periods, drawn from its own random stream (docs/design.md "The
clients' world"): of fixed means (`availability: exponential` or `lognormal`), or following a day's
rhythm (`diurnal`). Imports only numpy and the settings layer, so figures can draw a run's timeline.

A client's stream (`random_streams.AVAILABILITY`, keyed by client) gives, in order: its diurnal phase
(diurnal only), whether it starts online, then its periods, CHUNK pairs at a time. It is opened the
first time the run asks about the client, and between two chunks only its generator's state is kept
(its four numbers, where an open generator costs a kilobyte): whatever times a run asks about, in whatever
order, and whether it resumed from a checkpoint or not, a client's periods are the same numbers, no
other draw of the run moves, and a million clients cost what those asked about cost.
"""

import math
from collections.abc import Callable
from typing import Protocol

import numpy as np

from asyncfl.settings import random_streams
from asyncfl.settings.config import TrainConfig
from asyncfl.settings.errors import InputError

CHUNK = 16  # pairs of periods drawn at a time per client: fixed, so its periods never depend on the queries
DAY = 86_400.0  # virtual seconds: the diurnal cycle's period


class ClientStreams:
    """Each client's availability stream, kept as its PCG64 state between draws.

    Attributes:
        seed: the run's seed.
        saved: per client whose stream was opened, its state after its last draw (state, increment, and
            the buffered 32-bit draw's flag and value). A dict of the clients asked about, not an array of
            all C: a run asks about few of them, and an array's pages, touched at random, each cost a
            dispatch a page fault (at 10^7 clients they made a world round 2.4× the 10^4 one) and stay
            resident (2 MB each under transparent huge pages: 4 GB at 10^8 for a few thousand clients).
        shared: the one generator that takes each client's saved state in turn.
    """

    def __init__(self, seed: int):
        self.seed = seed
        self.saved: dict[int, tuple[int, int, int, int]] = {}
        self.shared = np.random.default_rng(0)  # never draws from its own seed: a client's state is set first

    def opened(self, client: int) -> np.random.Generator:
        """The client's stream at its start."""
        return np.random.default_rng([self.seed, random_streams.AVAILABILITY, client])

    def resumed(self, client: int) -> np.random.Generator:
        """The client's stream where its last draw left it (`save`)."""
        state, inc, has_uint32, uinteger = self.saved[client]
        self.shared.bit_generator.state = {
            "bit_generator": "PCG64",
            "state": {"state": state, "inc": inc},
            "has_uint32": has_uint32,
            "uinteger": uinteger,
        }
        return self.shared

    def save(self, client: int, rng: np.random.Generator) -> None:
        """Keep the client's stream's state after a draw from `rng`."""
        state = rng.bit_generator.state
        self.saved[client] = (state["state"]["state"], state["state"]["inc"], state["has_uint32"], state["uinteger"])


class PeriodModel(Protocol):
    def first_state(self, client: int, rng: np.random.Generator) -> bool:
        """Whether the client starts online (drawn first from its stream, after anything else it needs)."""
        ...

    def chunk(self, client: int, rng: np.random.Generator, start: float, starts_online: bool) -> np.ndarray:
        """The client's next 2·CHUNK periods, in time order, from `start` (the last flip so far)."""
        ...


def exponential(rng: np.random.Generator, means: np.ndarray, sigma: float) -> np.ndarray:
    return rng.exponential(1.0, (CHUNK, 2)) * means


def lognormal(rng: np.random.Generator, means: np.ndarray, sigma: float) -> np.ndarray:
    """Lognormal periods with the given means: μ = ln(mean) − σ²/2."""
    return np.exp(rng.normal(0.0, sigma, (CHUNK, 2)) - sigma**2 / 2) * means


PERIOD_DRAWS: dict[str, Callable[[np.random.Generator, np.ndarray, float], np.ndarray]] = {
    "exponential": exponential,
    "lognormal": lognormal,
}


class SteadyPeriods:
    """Online and offline periods of means `online_mean` and `offline_mean` (`availability: exponential`
    or `lognormal`); a client starts online with the steady share on / (on + off)."""

    def __init__(self, config: TrainConfig):
        self.means = np.array([config.online_mean, config.offline_mean])
        self.share = config.online_mean / (config.online_mean + config.offline_mean)
        self.draw, self.sigma = PERIOD_DRAWS[config.availability], config.availability_sigma

    def first_state(self, client: int, rng: np.random.Generator) -> bool:
        return bool(rng.random() < self.share)

    def chunk(self, client: int, rng: np.random.Generator, start: float, starts_online: bool) -> np.ndarray:
        periods = self.draw(rng, self.means, self.sigma)
        return (periods if starts_online else periods[:, ::-1]).ravel()  # (first state, second) per pair


class DiurnalPeriods:
    """A day's rhythm (`availability: diurnal`): each client alternates online periods, exponential with
    mean `online_mean`, and offline ones that end at the time-varying rate λ_on(t) = p(t) / ((1 − p(t)) ·
    online_mean), so that its online share follows p(t) = p̄ · (1 + a·cos(2π·t/DAY − φ_c)), p̄ the share
    `online_mean` / (`online_mean` + `offline_mean`) gives (a = 0 is `exponential` exactly in
    distribution). φ_c is the client's phase: uniform within ± `diurnal_spread` hours of the population's
    (whose peak is at t = 0: the virtual clock starts at its night), drawn first from its stream. The
    amplitude a makes the population-wide peak `diurnal_swing` times its trough: the spread of phases
    flattens the population's cycle by κ = sin(h)/h (h the spread in radians), so a = (S − 1)/(S + 1)/κ.
    Offline periods are drawn by thinning (candidates at the peak rate, each kept with λ_on(t)/λ_peak),
    period by period from the client's own stream.

    Attributes:
        spread: h, the phases' half-width in radians.
        phases: per client, φ_c (NaN until its stream is opened).
        share, amplitude: p̄ and a.
        online_mean: the mean online period.
    """

    def __init__(self, config: TrainConfig, clients: int):
        self.spread = 2 * math.pi * config.diurnal_spread / 24
        flattening = math.sin(self.spread) / self.spread if self.spread else 1.0
        self.amplitude = (config.diurnal_swing - 1) / (config.diurnal_swing + 1) / flattening
        self.share = config.online_mean / (config.online_mean + config.offline_mean)
        if self.amplitude > 1:  # the share would go below 0 at night, whatever the means
            spread = f" at diurnal_spread = {config.diurnal_spread!r} h" if self.spread else ""
            raise InputError(
                f"config: availability: diurnal with diurnal_swing = {config.diurnal_swing!r}{spread} swings the "
                f"online share by {self.amplitude:.3g} × its mean, below 0 at night; lower diurnal_swing or "
                "diurnal_spread (online_mean and offline_mean cannot help)"
            )
        if self.share * (1 + self.amplitude) >= 1:
            raise InputError(
                f"config: availability: diurnal with diurnal_swing = {config.diurnal_swing!r} needs an online share at "
                f"the peak below 1, and online_mean / (online_mean + offline_mean) = {self.share:.3g} reaches "
                f"{self.share * (1 + self.amplitude):.3g} (amplitude {self.amplitude:.3g} of the mean); raise "
                "offline_mean, or lower diurnal_swing or diurnal_spread"
            )
        self.online_mean, self.phases = config.online_mean, np.full(clients, np.nan)
        self.peak_rate = self.rate_on(self.share * (1 + self.amplitude))

    def rate_on(self, share: float) -> float:
        """The offline→online rate at which a client with online periods of mean `online_mean` is online
        `share` of the time."""
        return share / ((1 - share) * self.online_mean)

    def share_at(self, client: int, t: float) -> float:
        return self.share * (1 + self.amplitude * math.cos(2 * math.pi * t / DAY - self.phases[client]))

    def first_state(self, client: int, rng: np.random.Generator) -> bool:
        self.phases[client] = rng.uniform(-self.spread, self.spread)
        return bool(rng.random() < self.share_at(client, 0.0))

    def offline_period(self, client: int, rng: np.random.Generator, start: float) -> float:
        """An offline period beginning at `start`, by thinning."""
        t = start
        while True:
            t += rng.exponential(1 / self.peak_rate)
            if rng.random() * self.peak_rate <= self.rate_on(self.share_at(client, t)):
                return t - start

    def chunk(self, client: int, rng: np.random.Generator, start: float, starts_online: bool) -> np.ndarray:
        periods, t, online = [], start, starts_online
        for _ in range(2 * CHUNK):
            period = rng.exponential(self.online_mean) if online else self.offline_period(client, rng, t)
            periods.append(period)
            t, online = t + period, not online
        return np.array(periods)


def period_model(config: TrainConfig, clients: int) -> PeriodModel:
    """The periods of `config.availability`, one of the drawn models."""
    return DiurnalPeriods(config, clients) if config.availability == "diurnal" else SteadyPeriods(config)
