"""SQL for partition_state: one row per thread (summary parts, zone start, summary failures)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pawwake.db.conversations import NOT_INCOMPLETE
from pawwake.db.pool import rows_as_dicts
from pawwake.text.storable import storable_json

_LOCK_THREAD = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"


@dataclass
class PartitionState:
    """A thread's rotation state; a thread without a row starts empty."""

    thread_id: str
    summary_parts: list[str] = field(default_factory=list)
    zone_start_message_id: int | None = None
    rotations: int = 0
    last_summary_error: str | None = None
    summary_retry_after: datetime | None = None


async def lock_thread(cur: Any, thread_id: str) -> None:
    """Serialise rotations of one thread until the transaction ends (across processes)."""
    await cur.execute(_LOCK_THREAD, ("partition:" + thread_id,))


async def load_state(cur: Any, thread_id: str) -> PartitionState:
    await cur.execute(
        "SELECT summary_parts, zone_start_message_id, rotations, last_summary_error,"
        " summary_retry_after FROM partition_state WHERE thread_id = %s", (thread_id,))
    rows = rows_as_dicts(cur, await cur.fetchall())
    if not rows:
        return PartitionState(thread_id=thread_id)
    row = rows[0]
    parts = row["summary_parts"] if isinstance(row["summary_parts"], list) else []
    return PartitionState(thread_id=thread_id, summary_parts=[str(p) for p in parts],
                          zone_start_message_id=row["zone_start_message_id"],
                          rotations=row["rotations"],
                          last_summary_error=row["last_summary_error"],
                          summary_retry_after=row["summary_retry_after"])


async def save_state(cur: Any, state: PartitionState) -> None:
    """Insert or replace the thread's row (one statement)."""
    await cur.execute(
        "INSERT INTO partition_state (thread_id, summary_parts, zone_start_message_id,"
        " rotations, last_summary_error, summary_retry_after, updated_at)"
        " VALUES (%s, %s::jsonb, %s, %s, %s, %s, now())"
        " ON CONFLICT (thread_id) DO UPDATE SET summary_parts = EXCLUDED.summary_parts,"
        " zone_start_message_id = EXCLUDED.zone_start_message_id,"
        " rotations = EXCLUDED.rotations, last_summary_error = EXCLUDED.last_summary_error,"
        " summary_retry_after = EXCLUDED.summary_retry_after, updated_at = now()",
        (state.thread_id, storable_json(state.summary_parts),
         state.zone_start_message_id, state.rotations, state.last_summary_error,
         state.summary_retry_after))


# Where the zone start row sits in the thread's order; a vanished start row (never expected:
# rounds start at user rows) means no filter.
_SINCE = (" AND (created_at, id) >= (SELECT COALESCE(max(created_at), '-infinity'),"
          " COALESCE(max(id), 0) FROM conversations WHERE id = %s)")

# The N-th and (N+1)-th newest live user messages from the zone start on: a backward scan of
# conversations_session_live that stops after N + 1 user rows, whatever the thread's size.
_ROUND_BOUNDS = ("SELECT created_at, id FROM conversations"
                 " WHERE session_id = %s AND role = 'user' AND deleted_at IS NULL"
                 f" AND {NOT_INCOMPLETE}{{since}}"
                 " ORDER BY created_at DESC, id DESC OFFSET %s LIMIT 2")


async def thread_messages(cur: Any, thread_id: str, since_id: int | None
                          ) -> list[dict[str, Any]]:
    """The thread's live messages from the zone start on, oldest first."""
    sql = ("SELECT id, role, content, metadata, created_at FROM conversations"
           f" WHERE session_id = %s AND deleted_at IS NULL AND {NOT_INCOMPLETE}")
    params: list[Any] = [thread_id]
    if since_id is not None:
        sql += _SINCE
        params.append(since_id)
    await cur.execute(sql + " ORDER BY created_at, id", params)
    return rows_as_dicts(cur, await cur.fetchall())


async def recent_thread_messages(cur: Any, thread_id: str, since_id: int | None,
                                 max_rounds: int) -> tuple[list[dict[str, Any]], bool]:
    """(live messages from the zone start on, but only the newest ``max_rounds`` rounds;
    True when older live rounds were left out).

    A thread stored without partition state (or imported) can hold thousands of messages
    past its zone start: reading them all on every request is what this bounds.
    """
    params: list[Any] = [thread_id]
    if since_id is not None:
        params.append(since_id)
    await cur.execute(_ROUND_BOUNDS.format(since=_SINCE if since_id is not None else ""),
                      [*params, max(1, max_rounds) - 1])
    bounds = await cur.fetchall()
    if len(bounds) < 2:
        return await thread_messages(cur, thread_id, since_id), False
    created_at, first_id = bounds[0]
    await cur.execute(
        "SELECT id, role, content, metadata, created_at FROM conversations"
        f" WHERE session_id = %s AND deleted_at IS NULL AND {NOT_INCOMPLETE}"
        " AND (created_at, id) >= (%s, %s)"
        " ORDER BY created_at, id", (thread_id, created_at, first_id))
    return rows_as_dicts(cur, await cur.fetchall()), True
