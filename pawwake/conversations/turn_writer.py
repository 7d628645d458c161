"""How a finished turn reaches the store, whatever the database is doing.

A turn is written at once (``turn_store``), retried on a fresh connection, and while the
database is unreachable it waits in the spool (``turn_spool``: on disk, written later in
order, exactly once). The after-success hook ``turn_writer`` also leaves a copy in the spool
when a commit is slow, so a stream that ended means a turn that is safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from pawwake.conversations.pending import PendingTurn, store_ended
from pawwake.conversations.turn_spool import StoreTurn
from pawwake.conversations.turn_store import TurnSource, TurnStore, store_turn
from pawwake.db.pool import UNAVAILABLE_ERRORS
from pawwake.llm.sse import CapturedReply

if TYPE_CHECKING:
    from pawwake.conversations.pending import Pending
    from pawwake.conversations.turn_spool import TurnSpool

log = logging.getLogger(__name__)

SPOOL_COPY_AFTER_SECONDS = 2.0  # a store still running then leaves a copy in the spool
_RETRY_DELAYS = (0.1, 0.5)  # fresh-connection retries before a turn goes to the spool


@dataclass(frozen=True)
class TurnWriting:
    """What getting a turn to the store works with: the store, the spool for turns waiting
    for the database, and this process's stores in flight (ended here)."""

    store: TurnStore
    turn_spool: TurnSpool
    pending: Pending


class StorablePending(TurnSource, PendingTurn, Protocol):
    """A request's turn: stored (``TurnSource``) and waited for (``PendingTurn``)."""


async def write_turn(turns: TurnWriting, turn: TurnSource, reply: CapturedReply,
                     *, incomplete: bool = False) -> None:
    """Store a turn; while the database is unreachable, put it in the spool instead (written
    later, in order, exactly once). While turns wait in the spool the database was away a
    moment ago: they are tried once, in order, and if it is still away this turn joins them
    at once (no retries), so an outage costs each turn a disk write, not seconds."""
    spool = turns.turn_spool
    if spool.pending:
        try:
            await spool.replay(spooled_turn_writer(turns))
        except UNAVAILABLE_ERRORS as exc:
            log.warning("database still unreachable (%s); turn kept in the spool",
                        type(exc).__name__)
            await spool.add(turn, reply, incomplete=incomplete)
            return
    for delay in (*_RETRY_DELAYS, None):
        try:
            await store_turn(turns.store, turn, reply, incomplete=incomplete)
            return
        except UNAVAILABLE_ERRORS as exc:
            if delay is None:
                log.warning("database unreachable (%s); turn kept in the spool",
                            type(exc).__name__)
                break
            await _drop_idle_connections(turns)  # after a restart they are all stale
            await asyncio.sleep(delay)
    await spool.add(turn, reply, incomplete=incomplete)


def spooled_turn_writer(turns: TurnWriting) -> StoreTurn:
    """How the spool writes a turn it kept: the same transaction as a live turn."""

    async def store(turn: Any, reply: CapturedReply, incomplete: bool) -> bool:
        return await store_turn(turns.store, turn, reply, incomplete=incomplete)

    return store


async def _drop_idle_connections(turns: TurnWriting) -> None:
    """Close the pool's idle connections so the retry opens a fresh one."""
    database = turns.store.database
    if database is not None:
        with contextlib.suppress(Exception):
            await database.pool.clear()


async def store_incomplete(turns: TurnWriting, prepared: StorablePending,
                           partial: CapturedReply) -> None:
    """Keep what the user typed (and the part of the reply it saw), flagged incomplete."""
    try:
        await write_turn(turns, prepared, partial, incomplete=True)
    finally:
        store_ended(turns.pending, prepared)


def turn_writer(turns: TurnWriting, prepared: StorablePending
                ) -> Callable[[CapturedReply], Awaitable[None]]:
    """The after-success hook that stores the turn. The client's end of stream waits for it
    (``wait_stored``): when the database has not committed it within
    ``SPOOL_COPY_AFTER_SECONDS``, a copy goes to the spool first, so a stream that ended
    means a turn that is safe, in the database or on disk, even if the process dies next.
    The copy is written later like any spooled turn and adds nothing when the store won."""

    async def store(reply: CapturedReply) -> None:
        writing = asyncio.ensure_future(write_turn(turns, prepared, reply))
        try:
            done, _ = await asyncio.wait({writing}, timeout=SPOOL_COPY_AFTER_SECONDS)
            if not done and await turns.turn_spool.add(prepared, reply, incomplete=False):
                log.warning("the database is slow to store a turn; a copy waits in the spool")
                store_ended(turns.pending, prepared)
            await writing
        except asyncio.CancelledError:
            writing.cancel()  # shutdown: the store goes with the hook, as it always did
            raise
        finally:
            store_ended(turns.pending, prepared)

    return store
