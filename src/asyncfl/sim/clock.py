"""An asyncio event loop on a virtual clock: time jumps to the next scheduled event instead of sleeping.

Clients are ordinary asyncio tasks that sleep for hours of virtual time; a run costs
only its compute. The loop's `select` never blocks: it sets the clock to the earliest
pending timer and polls. It jumps to the timer itself rather than adding the timeout the
loop asked for, because asyncio caps that timeout at one day (a duration of 1e20 s would
take 1e15 turns) and because `now + (when − now)` can round below `when`, where a turn
that adds nothing would repeat for ever. If every task waits and nothing is scheduled, the
simulation is stuck, and that is an error rather than a hang.
"""

import asyncio
import math
import selectors
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class SimulationDeadlock(RuntimeError):
    """Every task waits on another and no timer is pending."""


class JumpingSelector(selectors.DefaultSelector):
    """A selector that turns a wait of `timeout` seconds into a jump of the virtual clock."""

    def __init__(self, start: float, next_timer: Callable[[], float | None]):
        super().__init__()
        self.now = start
        self.next_timer = next_timer  # when the earliest pending timer can run, None without one

    def select(self, timeout: float | None = None) -> list:
        if timeout is None:
            raise SimulationDeadlock("every task is waiting and no event is scheduled")
        due = self.next_timer()
        # asyncio asks for no wait (timeout 0) while callbacks are ready, and also when the earliest
        # timer is due now but, far out, cannot run before the clock moves one float past it: then it jumps
        if due is not None and (timeout > 0 or due <= math.nextafter(self.now, math.inf)):
            self.now = max(self.now, due)
        return super().select(0)


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """asyncio's selector loop with `time()` read from the jumping selector."""

    def __init__(self, start: float = 0.0):
        self.clock = JumpingSelector(start, self.next_timer)
        super().__init__(self.clock)

    def next_timer(self) -> float | None:
        """The first time at which the earliest timer runs. asyncio keeps its timers in the heap
        `_scheduled` and pops cancelled ones off its head before it selects, so the head is the timer
        the loop waits for; it runs once `when < time() + clock resolution`, a sum that rounds to
        time() itself far out (from about 1e7 s), where the clock must go one float past `when`. The
        one reader of asyncio's private `_scheduled` and `_clock_resolution`: tests/sim/test_clock.py
        fails if a Python renames them."""
        scheduled = self._scheduled  # type: ignore[attr-defined]
        if not scheduled:
            return None
        due = scheduled[0].when()
        resolution = self._clock_resolution  # type: ignore[attr-defined]  # asyncio's, not in its stubs
        return due if due < due + resolution else math.nextafter(due, math.inf)

    def time(self) -> float:
        return self.clock.now


def run_virtual(main: Coroutine[Any, Any, T], start: float = 0.0) -> T:
    """Run `main` to completion on a fresh virtual-time loop starting at `start`."""
    loop = VirtualTimeLoop(start)
    try:
        return loop.run_until_complete(main)
    finally:
        try:
            cancel_pending(loop)
        finally:
            loop.close()


def cancel_pending(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel the tasks an interrupted run left pending (Ctrl-C can land in the loop's own code, between
    tasks) and let them unwind while the loop is open, as asyncio.run does: their `finally` blocks would
    otherwise run at garbage collection, on a closed loop, and print tracebacks. A run that completed
    leaves none, so this changes nothing of it."""
    pending = asyncio.all_tasks(loop)
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))


async def sleep_until(when: float) -> None:
    """Sleep until the absolute virtual time `when` (at once if it has passed)."""
    loop = asyncio.get_running_loop()
    wake = loop.create_future()
    loop.call_at(when, wake.set_result, None)
    await wake
