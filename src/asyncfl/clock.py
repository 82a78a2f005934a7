"""An asyncio event loop on a virtual clock: time jumps to the next scheduled event instead of sleeping.

Clients are ordinary asyncio tasks that sleep for hours of virtual time; a run costs
only its compute. The loop's `select` never blocks: it advances the clock by the
timeout the loop asked for (the gap to the earliest timer) and polls. If every task
waits and nothing is scheduled, the simulation is stuck, and that is an error rather
than a hang.
"""

import asyncio
import selectors
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class SimulationDeadlock(RuntimeError):
    """Every task waits on another and no timer is pending."""


class JumpingSelector(selectors.DefaultSelector):
    """A selector that turns a wait of `timeout` seconds into a jump of the virtual clock."""

    def __init__(self, start: float):
        super().__init__()
        self.now = start

    def select(self, timeout: float | None = None) -> list:
        if timeout is None:
            raise SimulationDeadlock("every task is waiting and no event is scheduled")
        self.now += max(timeout, 0.0)
        return super().select(0)


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """asyncio's selector loop with `time()` read from the jumping selector."""

    def __init__(self, start: float = 0.0):
        self.clock = JumpingSelector(start)
        super().__init__(self.clock)

    def time(self) -> float:
        return self.clock.now


def run_virtual(main: Coroutine[Any, Any, T], start: float = 0.0) -> T:
    """Run `main` to completion on a fresh virtual-time loop starting at `start`."""
    loop = VirtualTimeLoop(start)
    try:
        return loop.run_until_complete(main)
    finally:
        loop.close()


async def sleep_until(when: float) -> None:
    """Sleep until the absolute virtual time `when` (at once if it has passed)."""
    loop = asyncio.get_running_loop()
    wake = loop.create_future()
    loop.call_at(when, wake.set_result, None)
    await wake
