"""A cluster run's controller stops once its last job has ended: the remote executor's sleep between
status checks ends when shutdown asks (on a real cluster: tests/test_slurm_faults.py's failing job)."""

import asyncio
import time
from types import SimpleNamespace

from snakemake_interface_executor_plugins.executors.remote import RemoteExecutor

from asyncfl.planning.prompt_exit import install, sleep_until_shutdown


def test_the_remote_executors_sleep_is_replaced_once_on_the_pinned_interface():
    assert install() and install()
    assert RemoteExecutor.sleep is sleep_until_shutdown


def test_a_sleep_between_status_checks_ends_when_shutdown_asks_and_lasts_its_interval_otherwise():
    """An hour's interval (the SLURM plugin's grows to 3 min) ends once `wait` is False; a short one is
    slept whole while the executor waits, so status checks keep their pace."""

    async def stopped_mid_sleep() -> None:
        executor = SimpleNamespace(wait=True, next_seconds_between_status_checks=3600.0)
        sleeping = asyncio.create_task(sleep_until_shutdown(executor))
        await asyncio.sleep(0.05)
        assert not sleeping.done()
        executor.wait = False  # what RemoteExecutor.shutdown does before it joins the status thread
        await asyncio.wait_for(sleeping, timeout=60)  # a cap no healthy sleep reaches (it polls every second)

    asyncio.run(stopped_mid_sleep())
    started = time.monotonic()
    asyncio.run(sleep_until_shutdown(SimpleNamespace(wait=True, next_seconds_between_status_checks=0.2)))
    assert time.monotonic() - started >= 0.2
