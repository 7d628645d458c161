"""Read your writes in this process: a session's next request waits for its last turn's store.

A turn whose reply finished registers its ``stored`` event under its sessions (the one the
client named and the one it is stored in); the store sets it when it ends either way. The
registry is per app (``services.chat.pending``); other processes see the turn once committed.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

log = logging.getLogger(__name__)

PENDING_WAIT_SECONDS = 3.0  # a session's next request waits at most this for the last store
STORE_WAIT_SECONDS = 3.0  # the end of a stream waits at most this for its turn's commit

Pending = dict[str, asyncio.Event]  # session id -> its turn's ``stored`` event


class PendingTurn(Protocol):
    """What the registry needs of a turn (a ``PreparedChat``)."""

    @property
    def session_id(self) -> str: ...  # the session the turn is stored in
    client_session_id: str
    stored: asyncio.Event  # set once the turn is committed (or spooled), or nothing is stored
    store_scheduled: bool  # a store was started for it


def mark_pending(pending: Pending, prepared: PendingTurn) -> None:
    """This turn will be stored: the session's next request (this process) waits for it.
    Registered under the session the client named and the one the turn is stored in (a
    partition thread), as a step may have changed it."""
    for session_id in {prepared.session_id, prepared.client_session_id}:
        pending[session_id] = prepared.stored


def release_pending(pending: Pending, prepared: PendingTurn) -> None:
    """The request ends with no store scheduled: nobody needs to wait for it."""
    if not prepared.store_scheduled:
        store_ended(pending, prepared)


def store_ended(pending: Pending, prepared: PendingTurn) -> None:
    """The turn's store ended (or none will run): wake whoever waits for it."""
    prepared.stored.set()
    for session_id in {prepared.session_id, prepared.client_session_id}:
        if pending.get(session_id) is prepared.stored:
            del pending[session_id]


async def wait_pending(pending: Pending, session_id: str, seconds: float) -> None:
    """Wait (bounded) for this process's store of the session's previous turn."""
    event = pending.get(session_id)
    if event is None or event.is_set():
        return
    try:
        await asyncio.wait_for(event.wait(), seconds)
    except TimeoutError:
        log.warning("the previous turn of a session was still being stored after %.1f s",
                    seconds)


async def wait_stored(prepared: PendingTurn) -> None:
    """Wait (bounded) until the turn's transaction committed (or the turn was spooled)."""
    if not prepared.store_scheduled or prepared.stored.is_set():
        return
    try:
        await asyncio.wait_for(prepared.stored.wait(), STORE_WAIT_SECONDS)
    except TimeoutError:
        log.warning("turn not stored after %.1f s; the stream ends anyway", STORE_WAIT_SECONDS)
