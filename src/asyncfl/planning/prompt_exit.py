"""A Snakemake controller on a cluster that stops as soon as its last job has ended.

Between status checks a remote executor sleeps (`RemoteExecutor.sleep`), and the SLURM plugin (2.8.0)
lengthens that sleep by 10 s at every check that finds no job completed, a failed one included, up to
180 s. When the last job has ended, Snakemake's shutdown sets the executor's `wait` to False and joins
its status thread, which finishes its current sleep first: a failed run's controller exited 40–64 s
after its last job, up to 3 min (docs/cluster.md "Your cluster"). `install` makes that sleep end within
POLL_SECONDS once shutdown asks; its length, and so every status check, is unchanged.
"""

import asyncio
import inspect
import time

from snakemake_interface_executor_plugins.executors.remote import RemoteExecutor

POLL_SECONDS = 1.0  # how soon a sleeping status thread sees that shutdown asked


async def sleep_until_shutdown(executor: RemoteExecutor) -> None:
    """The executor's sleep between status checks (as long as it asks), cut short once it stops waiting."""
    deadline = time.monotonic() + executor.next_seconds_between_status_checks
    while executor.wait and (left := deadline - time.monotonic()) > 0:
        await asyncio.sleep(min(POLL_SECONDS, left))


def install() -> bool:
    """Every remote executor of this process sleeps with `sleep_until_shutdown`; False (nothing changed:
    the controller stops as slowly as before, never wrongly) where Snakemake's executor interface no
    longer has the coroutine it replaces."""
    original = RemoteExecutor.__dict__.get("sleep")
    if original is sleep_until_shutdown:
        return True
    if not inspect.iscoroutinefunction(original):
        return False
    setattr(RemoteExecutor, "sleep", sleep_until_shutdown)  # noqa: B010 (a method assigned: mypy refuses `=`)
    return True
