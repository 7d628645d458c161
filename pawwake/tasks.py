"""Tracked background work: every task is kept, logged on failure and drained at shutdown."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Coroutine
from typing import Any

from aiohttp import web

from pawwake import keys

log = logging.getLogger(__name__)


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
        """Wait for running tasks; cancel what is still running after ``grace_seconds``."""
        deadline = asyncio.get_running_loop().time() + grace_seconds
        while self._tasks:  # a task may spawn another (a chat turn spawns its store)
            left = max(0.0, deadline - asyncio.get_running_loop().time())
            _done, pending = await asyncio.wait(set(self._tasks), timeout=left)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)


async def tasks_ctx(app: web.Application) -> AsyncIterator[None]:
    """cleanup_ctx, registered last: drains before the database and HTTP client close."""
    app[keys.TASKS] = BackgroundTasks()
    yield
    await app[keys.TASKS].drain()
