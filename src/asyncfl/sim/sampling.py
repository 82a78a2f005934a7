"""Drawing the clients to dispatch without a pass over all C of them (docs/design.md "Training"): the
clients a dispatch may not go to are few (those in flight, and in a synchronous round those that
reported in it: at most M + J), so the idle ones are the complement of a short sorted list, and the
idle client of a given rank is found from that list alone. What a million clients cost a dispatch is
then what a hundred cost.
"""

from collections.abc import Callable

import numpy as np


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
