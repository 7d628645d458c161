"""Waiting in tests for something another thread or task brings about."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

WAIT_SECONDS = 60.0  # a bound for conditions awaited in tests, not a timing goal


async def until(condition: Callable[[], object]) -> None:
    """Wait for ``condition()`` on a loaded machine; fails only if it never comes."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_SECONDS
    while not condition():
        assert loop.time() < deadline, "condition never came"
        await asyncio.sleep(0.01)
