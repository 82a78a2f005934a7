"""The clients' world beyond their speeds and links (docs/world.md "The clients' world"): who is
online when, which dispatches are lost, and when clients check in. Every part is off by default, and
off it changes no number a run computes.
"""

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

from asyncfl.settings.config import TrainConfig
from asyncfl.sim.arrivals import CheckIns
from asyncfl.sim.availability import NEVER, Availability, dispatch_fails

OFFLINE, FAILED = "offline", "failed"  # why a dispatch's result never arrived (events.csv's `lost`)


@dataclass
class World:
    """Attributes:
    config: the run's settings (its seed and `failure_probability`).
    availability: each client's online periods, or None: always online.
    checkins: the Poisson check-in times under `arrivals: poisson`, or None: a closed loop.
    """

    config: TrainConfig
    availability: Availability | None
    checkins: CheckIns | None

    @classmethod
    def of(cls, config: TrainConfig, clients: int) -> "World":
        return cls(config, Availability.of(config, clients), CheckIns.of(config))

    @property
    def loses_dispatches(self) -> bool:
        """Whether a dispatch can be lost: then the logs record losses (events.csv `lost`, metrics.csv `dropped`)."""
        return self.availability is not None or self.config.failure_probability > 0

    @property
    def open_loop(self) -> bool:
        """Clients check in by themselves (Poisson arrivals): the server never dispatches to replace one."""
        return self.checkins is not None

    @property
    def always_online(self) -> bool:
        """Every client is online at every time (availability off): the draws need no test."""
        return self.availability is None

    def online_test(self, t: float) -> Callable[[np.ndarray], np.ndarray] | None:
        """`online` at `t` for a draw to filter its candidates with; None where everyone is online."""
        return None if self.availability is None else partial(self.online, t=t)

    def next_eligible(self, clients: np.ndarray, t: float) -> float:
        """The first time from `t` at which one of `clients` may be drawn: `t` itself where every client
        is always online, else the next time one comes online (inf: none ever does)."""
        return t if self.availability is None else self.availability.first_online(clients, t)

    def is_online(self, client: int, t: float) -> bool:
        return self.availability is None or self.availability.is_online(client, t)

    def online(self, clients: np.ndarray, t: float) -> np.ndarray:
        """Those of `clients` online at `t` (all of them when availability is off)."""
        if self.availability is None:
            return clients
        return clients[self.availability.online_mask(clients, t)]

    def next_online(self, clients: np.ndarray, t: float) -> float:
        """The first time after `t` one of `clients` comes online (inf: none ever does)."""
        if self.availability is None:
            return NEVER
        return self.availability.first_online(clients, t)

    def fate(
        self, client: int, dispatch_index: int, dispatch_time: float, uploaded_at: float, arrival_time: float
    ) -> tuple[float, str]:
        """When a dispatch ends and how: at its arrival, delivered (""); when its client goes offline
        before its upload completes at `uploaded_at` (OFFLINE: a client that goes offline during the
        latency that follows has already handed the server its update, which arrives); or at its
        arrival with nothing (FAILED)."""
        if self.availability is not None:
            offline_at = self.availability.online_until(client, dispatch_time)
            if offline_at < uploaded_at:
                return offline_at, OFFLINE
        if dispatch_fails(self.config, client, dispatch_index):
            return arrival_time, FAILED
        return arrival_time, ""
