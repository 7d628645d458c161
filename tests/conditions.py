"""Waiting in tests for something another thread or task brings about."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

WAIT_SECONDS = 60.0  # a bound for conditions awaited in tests, not a timing goal


async def until(condition: Callable[[], object]) -> None:
    """Wait for ``condition()`` on a loaded machine; fails only if it never comes."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_SECONDS
    while not condition():
        assert loop.time() < deadline, "condition never came"
        await asyncio.sleep(0.01)


async def until_answered(check: Callable[[], Awaitable[object]], *, interval: float = 0.1
                         ) -> float:
    """Ask ``await check()`` every ``interval`` seconds until it is true (another process's
    state, read over HTTP or SQL); returns the seconds it took."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    while not await check():
        assert loop.time() - started < WAIT_SECONDS, "condition never came"
        await asyncio.sleep(interval)
    return loop.time() - started
