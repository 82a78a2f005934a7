"""The virtual clock: hours of simulated waiting cost no real time; order is deterministic."""

import asyncio
import math
import os
import subprocess
import sys

import pytest

from asyncfl.sim.clock import SimulationDeadlock, VirtualTimeLoop, run_virtual, sleep_until


def test_time_jumps_to_the_next_event():
    log = []

    async def client(name: str, duration: float):
        await asyncio.sleep(duration)
        log.append((name, asyncio.get_running_loop().time()))

    async def main():
        await asyncio.gather(client("slow", 7200.0), client("fast", 3600.0), client("now", 0.0))
        return asyncio.get_running_loop().time()

    end = run_virtual(main())  # two simulated hours, not slept (a sleeping clock would hang this test)
    assert end == 7200.0
    assert log == [("now", 0.0), ("fast", 3600.0), ("slow", 7200.0)]


def test_sleep_until_absolute_times_and_the_past():
    async def main():
        await sleep_until(12.5)
        first = asyncio.get_running_loop().time()
        await sleep_until(3.0)  # already passed: returns at once
        return first, asyncio.get_running_loop().time()

    assert run_virtual(main(), start=10.0) == (12.5, 12.5)


EQUAL_TIMES = """
import asyncio
from asyncfl.sim.clock import run_virtual, sleep_until

async def main():
    order = []

    async def client(i):
        await sleep_until(5.0)
        order.append(i)

    await asyncio.gather(*(client(i) for i in range(20)))
    return order

print(run_virtual(main()))
"""


@pytest.mark.subprocess
def test_equal_times_keep_one_order_in_every_process():
    """Timers due at one instant wake in an order that no process state changes: two processes with
    different hash seeds (which reorder sets and dicts of strings) see the same order, a permutation of
    all clients. The engine does not rely on it (it serves arrivals by (time, client, dispatch)), but
    any code that did would get the same bytes."""
    orders = []
    for hash_seed in ("0", "1"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        result = subprocess.run([sys.executable, "-c", EQUAL_TIMES], capture_output=True, text=True, env=env)
        assert result.returncode == 0, result.stderr
        orders.append(result.stdout)
    assert orders[0] == orders[1] and sorted(eval(orders[0])) == list(range(20))


def test_a_stuck_simulation_is_an_error_not_a_hang():
    async def main():
        await asyncio.get_running_loop().create_future()  # nobody will ever set it

    with pytest.raises(SimulationDeadlock):
        run_virtual(main())


def test_far_future_timers_are_reached_in_one_jump_each():
    """asyncio caps a wait at one day, and far out time() + resolution rounds to time(): the clock still
    reaches timers at 1e20 s and beyond, in as many loop turns as there are timers."""
    turns = []

    async def main():
        loop = asyncio.get_running_loop()
        for when in (1e6, 1e20, 1.7e21, 1e300):
            await sleep_until(when)
            turns.append(loop.time() >= when)
        return loop.time()

    assert run_virtual(main()) >= 1e300 and turns == [True] * 4


def test_an_interrupt_lets_pending_tasks_unwind_on_an_open_loop():
    """Ctrl-C can land in the loop's own code, not in a task: the tasks it leaves pending are cancelled
    and their `finally` blocks run while the loop is still open (as asyncio.run does), not later at
    garbage collection on a closed loop, where they print tracebacks after the one-line message."""
    unwound = []

    def interrupt():
        raise KeyboardInterrupt

    async def worker():
        try:
            await asyncio.sleep(100)
        finally:
            await asyncio.sleep(0)  # cleanup that needs the loop, as the engine's dispatcher.stop() does
            unwound.append(True)

    async def main():
        task = asyncio.create_task(worker())
        asyncio.get_running_loop().call_soon(interrupt)
        await task

    with pytest.raises(KeyboardInterrupt):
        run_virtual(main())
    assert unwound == [True]


def test_a_timer_due_now_far_out_runs():
    """Far out (3e9 s) a timer due exactly now cannot run until the clock moves one float past it, and
    asyncio asks for no wait: the clock used to stand still and the loop spin (a world of clients that
    come online once in 1e9 s)."""

    async def twice() -> tuple[float, float]:
        await sleep_until(3e9)
        first = asyncio.get_running_loop().time()
        await sleep_until(first)
        return first, asyncio.get_running_loop().time()

    first, second = run_virtual(twice())
    assert first >= 3e9 and second == math.nextafter(first, math.inf)


def test_the_asyncio_internals_the_clock_reads_are_there():
    """`VirtualTimeLoop.next_timer` is the one reader of asyncio's private timer heap (`_scheduled`, its
    head the next timer) and `_clock_resolution`: a Python whose asyncio renames them fails here, not
    as a hang."""
    loop = VirtualTimeLoop(5.0)
    try:
        assert isinstance(loop._clock_resolution, float) and loop._clock_resolution > 0
        assert loop._scheduled == [] and loop.next_timer() is None
        handle = loop.call_at(9.0, lambda: None)
        loop.call_at(7.0, lambda: None)
        assert loop._scheduled[0].when() == 7.0 and loop.next_timer() == 7.0
        handle.cancel()
    finally:
        loop.close()
