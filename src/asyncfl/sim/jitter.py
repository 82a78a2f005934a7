"""Each dispatch's compute time around its client's own (`jitter_distribution`, `jitter_sigma`;
docs/world.md "The clients' world"): a factor drawn from the dispatch's own stream
(`random_streams.JITTER`, keyed by client and dispatch), so a dispatch's duration depends on nothing
the run did before it, and runs of every algorithm with one seed see the same factors.

The three shapes are those of published simulators of asynchronous FL:
- `lognormal`: median 1 (the client's time is the typical one), σ `jitter_sigma`; σ = 0 draws
  nothing, which keeps every duration the bits it had before jitter existed.
- `exponential`: mean 1, memoryless: each client is an exponential server of its own rate, the model
  of queueing analyses of asynchronous FL (e.g. Alahyane et al. 2025, "Optimizing Asynchronous
  Federated Learning: A Delicate Trade-Off Between Model-Parameter Staleness and Update Frequency").
  Its spread is fixed (standard deviation = mean), so it takes no σ.
- `half_normal`: 1 + |N(0, σ)|: the client's time is its fastest and a half-normal tail of scale σ
  times it comes on top, FLSim's `PerUserHalfNormalDurationDistribution` (minimum + HalfNormal(sd);
  facebookresearch/FLSim, `flsim/utils/timing/training_duration_distribution.py`), the simulator in
  which FedBuff (Nguyen et al. 2022) was built.
"""

from collections.abc import Callable

import numpy as np

from asyncfl.settings import random_streams
from asyncfl.settings.config import JITTER_DISTRIBUTIONS

# Each shape's factor of the client's compute time, from the dispatch's generator and σ
JITTER_FACTORS: dict[str, Callable[[np.random.Generator, float], float]] = {
    "lognormal": lambda rng, sigma: float(rng.lognormal(0.0, sigma)),
    "exponential": lambda rng, sigma: float(rng.exponential(1.0)),
    "half_normal": lambda rng, sigma: 1.0 + abs(float(rng.normal(0.0, sigma))),
}
if tuple(JITTER_FACTORS) != JITTER_DISTRIBUTIONS:  # the config's choices are exactly the shapes here
    raise ImportError(f"jitter shapes {list(JITTER_FACTORS)} differ from the config's {JITTER_DISTRIBUTIONS}")


def draws_nothing(distribution: str, sigma: float) -> bool:
    """σ = 0 and a shape that reads σ: no factor, the time is the client's own, exactly."""
    return sigma == 0 and distribution != "exponential"


def jitter_factor(distribution: str, sigma: float, seed: int, client: int, dispatch_index: int) -> float | None:
    """The factor of this dispatch's compute time, or None where it has none (`draws_nothing`)."""
    if draws_nothing(distribution, sigma):
        return None
    rng = np.random.default_rng([seed, random_streams.JITTER, client, dispatch_index])
    return JITTER_FACTORS[distribution](rng, sigma)


def transfer_factors(
    distribution: str, sigma: float, seed: int, client: int, dispatch_index: int
) -> tuple[float, float] | None:
    """The factors of this dispatch's download and upload times (`transfer_jitter_*`), in that order from
    the dispatch's own stream (`random_streams.TRANSFER_JITTER`), or None where there are none."""
    if draws_nothing(distribution, sigma):
        return None
    rng = np.random.default_rng([seed, random_streams.TRANSFER_JITTER, client, dispatch_index])
    return JITTER_FACTORS[distribution](rng, sigma), JITTER_FACTORS[distribution](rng, sigma)
