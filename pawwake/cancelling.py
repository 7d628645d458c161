"""Stopping a task whose cancellation may be lost.

On Python 3.11 ``asyncio.wait_for`` (aiopg waits for every statement's answer with it) drops a
cancellation that lands in the loop iteration where the answer arrives, and returns the answer
instead. A loop that lost its cancellation runs on (the saved settings re-read every 3 s)
while shutdown waits for it, so shutdown cancels again until the task ends, within a bound.
"""

from __future__ import annotations

import asyncio
from typing import Any

CANCEL_WAIT_SECONDS = 1.0  # how long a cancelled task is given to end
CANCEL_AGAIN_SECONDS = 0.05  # a task still running this long after a cancel is cancelled again


async def cancel_and_wait(task: asyncio.Future[Any],
                          seconds: float = CANCEL_WAIT_SECONDS) -> bool:
    """Cancel ``task`` and wait at most ``seconds`` for it to end, cancelling it again while
    it runs on; True when it ended. Its outcome is left on it: a cancelled or failed task's
    result is not read here."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not task.done():
        left = deadline - loop.time()
        if left <= 0:
            return False
        task.cancel()
        await asyncio.wait({task}, timeout=min(CANCEL_AGAIN_SECONDS, left))
    return True
