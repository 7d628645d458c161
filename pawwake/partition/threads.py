"""Partition threads: status of the active thread, switch, create, rename, delete and the
editable rolling summary.

The active thread is the hot setting PARTITION_SESSION_ID; switching stores it through
RuntimeConfig.update so it survives restarts. Multi-step writes run in one transaction under
the thread's rotation lock and the session's write lock, so a chat turn never interleaves.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, TypedDict

from pawwake.api_error import ApiError
from pawwake.conversations.manage import session_id_of
from pawwake.db import threads as db
from pawwake.db.conversation_admin import trash_session
from pawwake.db.conversation_turns import lock_session_writes
from pawwake.db.errors import Conflict, NotFound
from pawwake.db.partition_state import load_state, lock_thread
from pawwake.db.pool import Cursor, cursor, transaction
from pawwake.partition.step import active_thread

if TYPE_CHECKING:
    from pawwake.database import Database
    from pawwake.live_settings import RuntimeConfig
    from pawwake.settings import Settings

MAX_SUMMARY = 200_000

__all__ = ["session_id_of"]


async def _lock(cur: Cursor, *thread_ids: str) -> None:
    """Rotation lock and session write lock of each thread, in a fixed order (no deadlock)."""
    for thread_id in sorted(set(thread_ids)):
        await lock_thread(cur, thread_id)
        await lock_session_writes(cur, thread_id)


def summary_text(value: Any) -> str:
    if not isinstance(value, str):
        raise ApiError("invalid_summary", "summary must be text.")
    if len(value) > MAX_SUMMARY:
        raise ApiError("invalid_summary", f"summary is limited to {MAX_SUMMARY} characters.")
    return value


async def status(database: Database, *, settings: Settings) -> dict[str, Any]:
    """What the dashboard shows: zones, rotation progress and the summary's health."""
    thread = active_thread(settings)
    x = max(1, int(settings.CACHE_PARTITION_X))
    async with cursor(database.pool) as cur:
        state = await load_state(cur, thread)
        # Counted, not read: the page stays cheap however many messages the thread holds.
        stored, live = await db.round_counts(cur, thread, state.zone_start_message_id)
    zone_a = x if live >= x else 0  # as zone_split: fewer than X live rounds, no zones
    return {
        "enabled": bool(settings.CACHE_PARTITION_ENABLED),
        "active_thread": thread, "x": x, "trigger": settings.CACHE_PARTITION_TRIGGER,
        "rounds_stored": stored, "rounds_live": live,
        "zone_a_rounds": zone_a, "zone_b_rounds": live - zone_a,
        # The request after the 2X-th live round rotates (time trigger: also the window).
        "rounds_until_rotation": max(0, 2 * x - live),
        "rotations": state.rotations,
        "summary_parts": len(state.summary_parts),
        "summary_chars": sum(len(p) for p in state.summary_parts),
        "last_summary_error": state.last_summary_error,
    }


class ThreadListed(TypedDict):
    """A thread as the threads page and the API list it."""

    thread_id: str
    messages: int
    last_activity: datetime | None
    active: bool  # the one every client continues (PARTITION_SESSION_ID)
    has_summary: bool


async def list_threads(database: Database, *, settings: Settings) -> list[ThreadListed]:
    active = active_thread(settings)
    async with cursor(database.pool) as cur:
        rows = await db.list_threads(cur)
    threads: list[ThreadListed] = [{"thread_id": r["thread_id"], "messages": r["messages"],
                "last_activity": r["last_activity"], "active": r["thread_id"] == active,
                "has_summary": r["summary_parts"] > 0} for r in rows]
    if not any(t["active"] for t in threads):
        threads.insert(0, {"thread_id": active, "messages": 0, "last_activity": None,
                           "active": True, "has_summary": False})
    return threads


async def switch(config: RuntimeConfig, thread_id: str) -> str:
    """Make ``thread_id`` the active thread (stored: it survives restarts)."""
    await config.update({"PARTITION_SESSION_ID": thread_id})
    return thread_id


async def create(database: Database, thread_id: str, inherit_from: str | None
                 ) -> dict[str, Any]:
    """A new thread's state row, optionally starting with another thread's summary parts."""
    async with transaction(database.pool) as cur:
        await _lock(cur, thread_id, *([inherit_from] if inherit_from else []))
        if await db.state_exists(cur, thread_id) or await db.any_message_count(cur, thread_id):
            raise Conflict(f"thread {thread_id} already exists", "thread_exists", thread=thread_id)
        parts: list[str] = []
        if inherit_from is not None:
            if not await db.state_exists(cur, inherit_from) \
                    and not await db.any_message_count(cur, inherit_from):
                raise NotFound(f"No such thread {inherit_from}.")
            parts = (await load_state(cur, inherit_from)).summary_parts
        await db.create_state(cur, thread_id, parts)
    return {"thread_id": thread_id, "summary_parts": len(parts),
            "inherited_from": inherit_from}


async def rename(database: Database, config: RuntimeConfig, old_id: str, new_id: str, *,
                 settings: Settings) -> dict[str, Any]:
    """Move messages, token usage and state in one transaction; follow an active rename."""
    if old_id == new_id:
        raise ApiError("same_thread_id", "new_id must differ from old_id.")
    async with transaction(database.pool) as cur:
        await _lock(cur, old_id, new_id)
        if await db.state_exists(cur, new_id) or await db.any_message_count(cur, new_id):
            raise Conflict(f"thread {new_id} already exists", "thread_exists", thread=new_id)
        counts = await db.rename_thread(cur, old_id, new_id)
        if counts["messages"] == 0 and counts["state_rows"] == 0:
            raise NotFound(f"No such thread {old_id}.")
    switched = active_thread(settings) == old_id
    if switched:
        await switch(config, new_id)
    return {"old_id": old_id, "new_id": new_id, "switched": switched, **counts}


async def delete(database: Database, thread_id: str, *, settings: Settings) -> dict[str, Any]:
    """Drop the thread's state; its messages go to the conversation trash (restorable)."""
    if thread_id == active_thread(settings):
        raise Conflict("the active thread cannot be deleted; switch to another one first",
                       "active_thread")
    async with transaction(database.pool) as cur:
        await _lock(cur, thread_id)
        state_rows = await db.delete_state(cur, thread_id)
        trashed = 0
        if await db.live_message_count(cur, thread_id):
            trashed = await trash_session(cur, thread_id)
        if not state_rows and not trashed:
            raise NotFound(f"No such thread {thread_id}.")
    return {"thread_id": thread_id, "trashed_messages": trashed, "state_deleted": bool(state_rows)}


async def get_summary(database: Database, thread_id: str) -> dict[str, Any]:
    async with cursor(database.pool) as cur:
        state = await load_state(cur, thread_id)
    return {"thread_id": thread_id, "parts": state.summary_parts,
            "summary": "\n\n".join(state.summary_parts),
            "chars": sum(len(p) for p in state.summary_parts)}


async def put_summary(database: Database, thread_id: str, summary: str) -> dict[str, Any]:
    """Replace every part with one (an empty text clears the summary)."""
    parts = [summary] if summary.strip() else []
    async with transaction(database.pool) as cur:
        await lock_thread(cur, thread_id)
        await db.set_summary(cur, thread_id, parts)
    return await get_summary(database, thread_id)


async def clear_summary(database: Database, thread_id: str) -> dict[str, Any]:
    async with transaction(database.pool) as cur:
        await lock_thread(cur, thread_id)
        if await db.state_exists(cur, thread_id):
            await db.set_summary(cur, thread_id, [])
    return await get_summary(database, thread_id)
