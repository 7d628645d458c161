"""SQL for partition threads: listing sessions, copying, renaming and clearing thread state."""

from __future__ import annotations

from datetime import datetime
from typing import TypedDict, cast

from pawwake.db.conversation_turns import SESSION_LOCK, session_lock_key
from pawwake.db.pool import Cursor, rows_as_dicts
from pawwake.text.storable import storable_json


class ThreadRow(TypedDict):
    """A session with live messages, or a thread that only has its partition state."""

    thread_id: str
    messages: int
    last_activity: datetime | None
    has_state: bool
    summary_parts: int


async def list_threads(cur: Cursor) -> list[ThreadRow]:
    """Every session with live messages, plus threads that only have a state row."""
    await cur.execute(
        "WITH m AS (SELECT session_id, count(*) AS messages, max(created_at) AS last_activity"
        " FROM conversations WHERE deleted_at IS NULL GROUP BY session_id)"
        " SELECT COALESCE(m.session_id, s.thread_id) AS thread_id,"
        " COALESCE(m.messages, 0) AS messages, m.last_activity,"
        " s.thread_id IS NOT NULL AS has_state,"
        " COALESCE(jsonb_array_length(s.summary_parts), 0) AS summary_parts"
        " FROM m FULL JOIN partition_state s ON s.thread_id = m.session_id"
        " ORDER BY m.last_activity DESC NULLS LAST, 1")
    return cast(list[ThreadRow], rows_as_dicts(cur, await cur.fetchall()))


async def state_exists(cur: Cursor, thread_id: str) -> bool:
    await cur.execute("SELECT 1 FROM partition_state WHERE thread_id = %s", (thread_id,))
    return await cur.fetchone() is not None


async def round_counts(cur: Cursor, thread_id: str, since_id: int | None) -> tuple[int, int]:
    """(rounds stored, rounds from the zone start on), counted on the live-session index.

    A user message opens a round, so counting live user rows gives what grouping the whole
    thread would, in the thread's (created_at, id) order; a vanished zone start row counts
    every round as live, as ``partition_state.thread_messages`` reads it.
    """
    await cur.execute(
        "SELECT count(*), count(*) FILTER (WHERE (c.created_at, c.id) >= (s.created_at, s.id))"
        " FROM conversations c, (SELECT COALESCE(max(created_at), '-infinity') AS created_at,"
        " COALESCE(max(id), 0) AS id FROM conversations WHERE id = %s) AS s"
        " WHERE c.session_id = %s AND c.role = 'user' AND c.deleted_at IS NULL",
        (since_id, thread_id))
    stored, live = await cur.fetchone()
    return int(stored), int(live)


async def live_message_count(cur: Cursor, thread_id: str) -> int:
    await cur.execute("SELECT count(*) FROM conversations"
                      " WHERE session_id = %s AND deleted_at IS NULL", (thread_id,))
    return int((await cur.fetchone())[0])


async def any_message_count(cur: Cursor, thread_id: str) -> int:
    await cur.execute("SELECT count(*) FROM conversations WHERE session_id = %s", (thread_id,))
    return int((await cur.fetchone())[0])


async def create_state(cur: Cursor, thread_id: str, summary_parts: list[str]) -> None:
    await cur.execute("INSERT INTO partition_state (thread_id, summary_parts, version)"
                      " VALUES (%s, %s::jsonb, 1)",
                      (thread_id, storable_json(summary_parts)))


async def rename_thread(cur: Cursor, old_id: str, new_id: str) -> dict[str, int]:
    """Move messages (trashed ones too), token usage and the state row to ``new_id``."""
    counts: dict[str, int] = {}
    await cur.execute("UPDATE conversations SET session_id = %s WHERE session_id = %s",
                      (new_id, old_id))
    counts["messages"] = cur.rowcount
    await cur.execute("UPDATE token_usage SET session_id = %s WHERE session_id = %s",
                      (new_id, old_id))
    counts["usage_rows"] = cur.rowcount
    await cur.execute("UPDATE partition_state SET thread_id = %s, version = version + 1,"
                      " updated_at = now()"
                      " WHERE thread_id = %s", (new_id, old_id))
    counts["state_rows"] = cur.rowcount
    # Turns begun under an earlier name follow too; the new name is a live thread again.
    await cur.execute("UPDATE thread_renames SET new_id = %s WHERE new_id = %s", (new_id, old_id))
    await cur.execute("INSERT INTO thread_renames (old_id, new_id) VALUES (%s, %s)"
                      " ON CONFLICT (old_id) DO UPDATE SET new_id = EXCLUDED.new_id,"
                      " renamed_at = now()", (old_id, new_id))
    await cur.execute("DELETE FROM thread_renames WHERE old_id = %s", (new_id,))
    return counts


async def renamed_since(cur: Cursor, thread_id: str, since: datetime, *, lock: bool = False
                        ) -> str | None:
    """The thread's current name when it was renamed after ``since``, else None.
    ``lock=True`` first takes the thread's write lock (``lock_session_writes``), in the same
    round trip."""
    sql = ("SELECT new_id FROM thread_renames"
           " WHERE old_id = %(thread)s AND renamed_at > %(since)s")
    if lock:
        sql = SESSION_LOCK + "; " + sql
    await cur.execute(sql, {"thread": thread_id, "since": since,
                            "lock_key": session_lock_key(thread_id)})
    row = await cur.fetchone()
    return str(row[0]) if row else None


async def delete_state(cur: Cursor, thread_id: str) -> int:
    await cur.execute("DELETE FROM partition_state WHERE thread_id = %s", (thread_id,))
    return cur.rowcount


async def set_summary(cur: Cursor, thread_id: str, parts: list[str]) -> None:
    """Replace the summary parts (creating the row if needed); clears a summary error."""
    await cur.execute(
        "INSERT INTO partition_state AS s (thread_id, summary_parts, version)"
        " VALUES (%s, %s::jsonb, 1)"
        " ON CONFLICT (thread_id) DO UPDATE SET summary_parts = EXCLUDED.summary_parts,"
        " last_summary_error = NULL, rotating_until = NULL,"
        " version = s.version + 1,"
        " updated_at = now()",
        (thread_id, storable_json(parts)))

