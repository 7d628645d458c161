"""Replies in flight, so that a shutdown (a redeploy's SIGTERM) lets them finish for a while
and then ends each one still open in its own protocol's words instead of cutting it.

The chat turns of every protocol register here while they run. ``wind_down`` is called once
the listening socket is closed (aiohttp stops accepting first): it waits up to the grace for
the turns to finish, then asks the rest to end for shutdown, and waits a moment for them to
write their last event and hand their incomplete turn to the store.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

log = logging.getLogger(__name__)

END_WAIT_SECONDS = 2.0  # for the turns told to end: write the event, hand over the turn
SHUTDOWN_CODE = "server_shutdown"  # the error code each protocol's last event carries
SHUTDOWN_MESSAGE = ("The gateway is shutting down (a restart or redeploy) and cut this reply "
                    "short; send the request again.")


class EndedForShutdown(Exception):
    """Set on a relay's upstream reader when the grace is over: the relay loop stops there
    and ends the client's stream (nothing is checked per chunk)."""


class EndsForShutdown(Protocol):
    def end_for_shutdown(self) -> None:
        """Stop relaying: end the client's stream (or answer) in the protocol's own words."""


class RepliesInFlight:
    """The turns running now; ``stopping`` once shutdown began."""

    def __init__(self) -> None:
        self._turns: set[EndsForShutdown] = set()
        self._empty = asyncio.Event()
        self._empty.set()
        self.stopping = False

    def __len__(self) -> int:
        return len(self._turns)

    def add(self, turn: EndsForShutdown) -> None:
        self._turns.add(turn)
        self._empty.clear()

    def discard(self, turn: EndsForShutdown) -> None:
        self._turns.discard(turn)
        if not self._turns:
            self._empty.set()

    async def wind_down(self, grace_seconds: float) -> None:
        """Let the replies in flight finish for ``grace_seconds``, then end the rest."""
        self.stopping = True
        if not self._turns:
            return
        log.info("shutdown: %d repl%s in flight, waiting up to %g s for them to finish",
                 len(self._turns), "y" if len(self._turns) == 1 else "ies", grace_seconds)
        if await self._emptied(grace_seconds):
            log.info("shutdown: every reply in flight finished")
            return
        left = list(self._turns)
        log.warning("shutdown: ending %d repl%s still running after %g s", len(left),
                    "y" if len(left) == 1 else "ies", grace_seconds)
        for turn in left:
            turn.end_for_shutdown()
        if not await self._emptied(END_WAIT_SECONDS):
            log.warning("shutdown: %d repl%s did not end in %g s", len(self._turns),
                        "y" if len(self._turns) == 1 else "ies", END_WAIT_SECONDS)

    async def _emptied(self, seconds: float) -> bool:
        try:
            async with asyncio.timeout(seconds):
                await self._empty.wait()
        except TimeoutError:
            return False
        return True
