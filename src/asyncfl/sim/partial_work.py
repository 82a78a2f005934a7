"""Partial work at a round deadline (sync's `partial_work`; docs/design.md "Stragglers"): a client
that would arrive after its round's deadline trains only the whole local steps whose compute, with its
transfers and latency, still arrives by the deadline, and sends them. Its phases are known at
dispatch, so the cut is too: the client trains that far and no further.

A step costs its minibatch's samples at the dispatch's per-sample compute time (the compute phase
over I·n_c samples), so the cut keeps the system model's one rule for compute time.
"""

import math

from asyncfl.sim.client_system import Phases


def samples_after(steps: int, n_samples: int, batch_size: int) -> int:
    """Samples trained by the first `steps` minibatch steps of epochs of `n_samples` (each epoch's
    last minibatch the smaller remainder)."""
    epochs, steps_into_epoch = divmod(steps, math.ceil(n_samples / batch_size))
    return epochs * n_samples + min(steps_into_epoch * batch_size, n_samples)


def samples_that_fit(
    phases: Phases, dispatch_time: float, deadline: float, n_samples: int, batch_size: int, epochs: int
) -> int | None:
    """The samples of the most whole local steps that arrive by `deadline` (None: the whole dispatch
    does; 0: not even the transfers do). Found by bisection on the very arithmetic that times the
    arrival, so the cut dispatch's arrival is at or before the deadline, bit for bit."""
    total = epochs * n_samples
    if dispatch_time + phases.total <= deadline:
        return None

    def arrives(steps: int) -> bool:
        return dispatch_time + phases.cut(samples_after(steps, n_samples, batch_size), total).total <= deadline

    if not arrives(0):
        return 0
    fits, misses = 0, epochs * math.ceil(n_samples / batch_size)  # the whole dispatch misses
    while misses - fits > 1:
        middle = (fits + misses) // 2
        fits, misses = (middle, misses) if arrives(middle) else (fits, middle)
    return samples_after(fits, n_samples, batch_size)
