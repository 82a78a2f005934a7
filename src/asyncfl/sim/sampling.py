"""Drawing the clients to dispatch without a pass over all C of them
(docs/world.md "The clients' world", its cost up to a million clients): the clients a dispatch may
not go to are few (those in flight, and in a synchronous round those that reported in it: at most
M + J), so the idle ones are the complement of a short sorted list, and the idle client of a given
rank is found from that list alone. What a million clients cost a dispatch is then what a hundred cost.
"""

from collections import Counter
from collections.abc import Callable

import numpy as np

from asyncfl.sim.context import RunContext
from asyncfl.sim.state import Job, SimulationState
from asyncfl.training.interface import LocalResult


def complement_at(excluded: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """The clients of ascending rank `ranks` among those not in `excluded` (sorted, distinct), what
    `np.setdiff1d(np.arange(C), excluded)[ranks]` is, without its O(C) array: excluded[i] has
    excluded[i] − i others below it, so rank r lies past each excluded client with excluded[i] − i ≤ r."""
    return ranks + np.searchsorted(excluded - np.arange(len(excluded)), ranks, side="right")


def draw_idle(
    rng: np.random.Generator,
    clients: int,
    excluded: np.ndarray,
    count: int,
    online: Callable[[np.ndarray], np.ndarray] | None = None,
) -> np.ndarray:
    """Up to `count` of the clients 0 … `clients` − 1 outside `excluded` (sorted, distinct), uniformly
    without replacement, among those online (`online`: those of the clients given that are, in their
    order; None: every client is).

    Every client is online: one draw of min(count, idle) ranks from `rng`, the very numbers
    `rng.choice(idle, …, replace=False)` gives from the idle clients' array (its draws depend only on
    the array's length). Otherwise in batches: draw what is still wanted from the idle clients not yet
    tried, keep those online, try none twice; the clients kept are the first `count` online ones of a
    uniformly random order of the idle ones, a uniform draw from the idle online clients, having asked
    about roughly count / (their share) clients, not all of them. All are tried only when fewer than
    `count` are online."""
    chosen = []
    while count > 0:
        idle = clients - len(excluded)
        take = min(count, idle)
        if take == 0:
            break
        drawn = complement_at(excluded, rng.choice(idle, size=take, replace=False))
        if online is None:
            return drawn
        kept = online(drawn)
        chosen.append(kept)
        count -= len(kept)
        excluded = np.union1d(excluded, drawn)
    return np.concatenate(chosen) if chosen else np.zeros(0, dtype=np.int64)


class ClientPicker:
    """Who a dispatch may go to, and the draw of them, over the dispatcher's counters.

    Attributes:
        in_flight: the dispatcher's, per client in flight, its jobs out.
        buffer: the engine's arrived updates not yet aggregated.
    """

    def __init__(
        self,
        context: RunContext,
        state: SimulationState,
        in_flight: Counter[int],
        buffer: list[tuple[Job, LocalResult]],
    ):
        self.context, self.state, self.in_flight, self.buffer = context, state, in_flight, buffer

    def excluded(self) -> np.ndarray:
        """The clients a dispatch without replacement may not go to, sorted: those in flight, and in
        a synchronous round those that reported in it, since a round draws its clients without
        replacement (Algorithm 1): a lost dispatch's replacement never trains a reported client again
        from the same model. They are fewer than C (reported and in flight are fewer than J ≤ C when a
        replacement is asked for); a client whose dispatch was lost may be drawn again, having
        contributed nothing."""
        busy = list(self.in_flight)
        if self.context.config.client_freed == "after_training":  # only those still training are busy
            now = self.state.now
            busy = [
                job.client for job in self.state.outstanding.values() if job.trained_at is None or job.trained_at > now
            ]
        if self.context.strategy.synchronous:
            busy += [job.client for job, _ in self.buffer]
        return np.unique(np.array(busy, dtype=np.int64))

    def candidates(self) -> np.ndarray:
        """The clients a dispatch may go to, online or not, as one array of O(C): for the rare question
        of when the next of them comes online (every idle client is offline)."""
        everyone = np.arange(len(self.context.sizes))
        return everyone if self.context.config.replacement else np.setdiff1d(everyone, self.excluded())

    def sample(self, count: int) -> np.ndarray:
        """Uniform draw of up to `count` online clients: idle ones without replacement (`draw_idle`), any
        with it (where some are offline, after a pass over all C to find the online ones)."""
        world, now, clients, rng = self.context.world, self.state.now, len(self.context.sizes), self.state.rng
        if not self.context.config.replacement:
            return draw_idle(rng, clients, self.excluded(), count, world.online_test(now))
        if world.always_online:
            return rng.integers(clients, size=min(count, clients))
        pool = world.online(self.candidates(), now)
        take = min(count, len(pool))
        return pool[rng.integers(len(pool), size=take)] if take else pool[:0]
