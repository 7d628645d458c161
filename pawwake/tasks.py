"""Tracked background work: every task is kept, logged on failure and drained at shutdown.

Shutdown has a budget: SIGTERM must end the process within SHUTDOWN_GRACE_SECONDS (the
streams' grace, ``replies_in_flight``) plus ``SHUTDOWN_SECONDS`` whatever is running (a host
sends SIGKILL soon after: Render about 30 s). Open requests get ``REQUEST_GRACE_SECONDS`` twice
(``pawwake.py``; aiohttp waits that long for a handler to finish, cancels it, then waits that
long again), then background tasks and jobs get ``DRAIN_GRACE_SECONDS`` together, then the
resources close (a second or so). What is still running then is cancelled: after-reply work
is short, and jobs are durable (a cancelled job is claimed again after its lease).

Shutdown stops tasks with ``cancelling.cancel_and_wait``: a cancellation can be lost.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from pawwake.cancelling import cancel_and_wait

if TYPE_CHECKING:
    from pawwake.jobs import JobRunner


log = logging.getLogger(__name__)

SHUTDOWN_SECONDS = 10.0
REQUEST_GRACE_SECONDS = 1.5
DRAIN_GRACE_SECONDS = 3.0


class BackgroundTasks:
    """A set of running tasks that the app waits for before its resources close."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background task %s failed", task.get_name(), exc_info=task.exception())

    @property
    def pending(self) -> int:
        return len(self._tasks)

    async def drain(self, grace_seconds: float = 30.0) -> None:
        """Wait for running tasks, also those spawned while draining (a chat turn spawns its
        store); cancel what is still running after ``grace_seconds`` and wait at most
        ``CANCEL_WAIT_SECONDS`` more for it to end."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace_seconds
        while self._tasks:
            left = max(0.0, deadline - loop.time())
            _done, pending = await asyncio.wait(set(self._tasks), timeout=left)
            if pending:
                ended = await asyncio.gather(*(cancel_and_wait(task) for task in pending))
                stuck = [task for task, stopped in zip(pending, ended, strict=True)
                         if not stopped]
                if stuck:
                    log.warning("%d background task(s) did not stop: %s", len(stuck),
                                ", ".join(sorted(task.get_name() for task in stuck)))
                    return


@asynccontextmanager
async def running_beside(work: Coroutine[Any, Any, Any], *, name: str) -> AsyncIterator[None]:
    """``work`` runs as a task while the block does (a warm-up, a loop the app keeps going)
    and is cancelled, and waited for, when the block ends."""
    task = asyncio.create_task(work, name=name)
    try:
        yield
    finally:
        if not await cancel_and_wait(task):
            log.warning("%s did not stop when cancelled", name)
        elif not task.cancelled():
            task.result()  # its failure, if it failed


@asynccontextmanager
async def draining(tasks: BackgroundTasks, jobs: JobRunner) -> AsyncIterator[None]:
    """Entered last: background tasks and job workers get one shared grace, side by side,
    before the database and HTTP client close."""
    yield
    started = time.monotonic()
    await asyncio.gather(tasks.drain(DRAIN_GRACE_SECONDS),
                         jobs.stop(grace_seconds=DRAIN_GRACE_SECONDS))
    log.info("background work stopped in %.1f s", time.monotonic() - started)
