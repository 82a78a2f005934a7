"""When each client is online (docs/world.md "The clients' world"): alternating online and offline
periods drawn from the client's own random stream (`periods`), or a trace the user gives; and which
dispatches fail. Off by default (`availability: always`): every client is always online.

Drawn periods are known lazily: a client's are drawn the first time a run asks about it, and of them
only the chunk around the last question is kept, since a run's clock only moves forward (a question
about an earlier time draws the client's periods again from its stream's start, as figures and tests
may ask). Imports only numpy and the settings layer, so figures can draw a run's timeline from its settings.
"""

import math
from pathlib import Path

import numpy as np

from asyncfl.settings import random_streams
from asyncfl.settings.config import AVAILABILITY_MODELS, TrainConfig
from asyncfl.settings.traces import read_trace
from asyncfl.sim.periods import PERIOD_DRAWS, ClientStreams, PeriodModel, period_model

NEVER = math.inf
if ("always", *PERIOD_DRAWS, "diurnal", "trace") != AVAILABILITY_MODELS:  # the config's choices are these
    raise ImportError(f"availability models {list(PERIOD_DRAWS)} differ from the config's {AVAILABILITY_MODELS}")


class Availability:
    """Each client's online periods as the times its state flips: online at t when an odd number of
    flips at or before t follow an offline start (or an even number an online one).

    Attributes:
        model, streams: what draws a client's periods, and from which streams (None: a trace's, all known).
        starts_online: per client, whether it is online at time 0 (-1: not drawn yet).
        windows: per client asked about, [t0, its flips from t0 on …]: t0 is 0 or a flip after an even
            number of flips, and the last flip lies past the last question (a trace: all of its flips).
        online_now, known_from, known_until: per client, its state over the period [from, until) that
            a question last fell in: the engine asks about many idle clients at every dispatch, and the
            clock only moves forward, so most answers come from these arrays, not from a search.
    """

    def __init__(self, clients: int, model: PeriodModel | None, streams: ClientStreams | None):
        self.model, self.streams = model, streams
        self.starts_online = np.full(clients, -1, dtype=np.int8)
        self.windows: dict[int, np.ndarray] = {}
        self.online_now = np.full(clients, False)  # written now: lazy zero pages fault at random dispatches
        self.known_from, self.known_until = np.full(clients, NEVER), np.full(clients, -NEVER)

    @classmethod
    def of(cls, config: TrainConfig, clients: int) -> "Availability | None":
        """The run's availability (None: every client always online)."""
        if config.availability == "always":
            return None
        if config.availability == "trace":
            return cls.from_trace(read_trace(Path(str(config.availability_trace)), clients))
        return cls(clients, period_model(config, clients), ClientStreams(config.seed))

    @classmethod
    def from_trace(cls, intervals: dict[int, list[tuple[float, float]]]) -> "Availability":
        availability = cls(len(intervals), None, None)
        for client, spans in intervals.items():
            flips = [0.0]
            for start, end in spans:
                if start != 0.0 or len(flips) > 1:
                    flips.append(start)
                flips.append(end)
            availability.starts_online[client] = bool(spans) and spans[0][0] == 0.0
            availability.windows[client] = np.array(flips)
        return availability

    def window(self, client: int, t: float) -> np.ndarray:
        """The client's flips around `t`: its window, drawn on until its last flip lies past `t`."""
        window = self.windows.get(client)
        if self.model is None or self.streams is None:
            assert window is not None  # a trace's windows are all known
            return window
        if window is not None and window[0] <= t < window[-1]:
            return window
        if window is None or t < window[0]:  # not asked about yet, or about an earlier time: from the start
            rng = self.streams.opened(client)
            self.starts_online[client] = self.model.first_state(client, rng)
            window = np.array([0.0])
        else:
            rng = self.streams.resumed(client)
        while window[-1] <= t:
            periods = self.model.chunk(client, rng, float(window[-1]), bool(self.starts_online[client]))
            window = window[-1] + np.concatenate([[0.0], np.cumsum(periods)])
        self.streams.save(client, rng)
        self.windows[client] = window
        return window

    def learn(self, client: int, t: float) -> None:
        """Remember the period the client is in at `t`: its state, when it began and when it ends."""
        window = self.window(client, t)
        flipped = int(np.searchsorted(window, t, side="right"))  # ≥ 1: window[0] ≤ t
        self.known_from[client] = window[flipped - 1]
        self.known_until[client] = window[flipped] if flipped < len(window) else NEVER
        self.online_now[client] = bool(self.starts_online[client]) != bool((flipped - 1) % 2)

    def online_mask(self, clients: np.ndarray, t: float) -> np.ndarray:
        """Whether each of `clients` is online at `t`."""
        for client in clients[(t < self.known_from[clients]) | (t >= self.known_until[clients])].tolist():
            self.learn(client, t)
        return self.online_now[clients]

    def is_online(self, client: int, t: float) -> bool:
        return bool(self.online_mask(np.array([client]), t)[0])

    def first_online(self, clients: np.ndarray, t: float) -> float:
        """The first time at or after `t` one of `clients` is online (inf: none ever is again)."""
        online = self.online_mask(clients, t)
        return t if online.any() else float(self.known_until[clients].min(initial=NEVER))

    def online_until(self, client: int, t: float) -> float:
        """When the client, online at `t`, goes offline (inf: never, past a trace's end it is offline)."""
        self.online_mask(np.array([client]), t)
        return float(self.known_until[client])

    def flips_until(self, client: int, until: float) -> tuple[bool, list[float]]:
        """Whether the client starts online, and its flips from time 0 to the first past `until`: its
        whole timeline, for a figure."""
        window = self.window(client, 0.0)
        flips = window[1:].tolist()
        while self.model is not None and flips[-1] <= until:
            flips += self.window(client, flips[-1])[1:].tolist()
        return bool(self.starts_online[client]), flips


def dispatch_fails(config: TrainConfig, client: int, dispatch_index: int) -> bool:
    """Whether this dispatch fails (its result never arrives): its own stream per (client, dispatch)."""
    if config.failure_probability == 0:
        return False
    rng = np.random.default_rng([config.seed, random_streams.FAILURE, client, dispatch_index])
    return bool(rng.random() < config.failure_probability)
