"""SQL for memory extraction: a session's round skeleton, candidate memories, applying items."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime
from typing import Any, TypedDict, cast

from pawwake.db.conversation_turns import lock_session_writes
from pawwake.db.conversations import NOT_INCOMPLETE
from pawwake.db.pool import Cursor, rows_as_dicts
from pawwake.text.messages import MessageSkeleton, StoredMessage
from pawwake.text.storable import storable_json

MEMORY_FIELDS = "id, content, importance, layer, is_active, superseded_by, remind_at," \
                " reminder_delivered_at, created_at, event_date"


class KnownMemory(TypedDict):
    """A memory the extraction shows the model, or changes (``MEMORY_FIELDS``)."""

    id: int
    content: str
    importance: int
    layer: int
    is_active: bool
    superseded_by: int | None
    remind_at: datetime | None
    reminder_delivered_at: datetime | None
    created_at: datetime
    event_date: date | None


async def _known(cur: Cursor) -> list[KnownMemory]:
    return cast(list[KnownMemory], rows_as_dicts(cur, await cur.fetchall()))


async def session_skeleton(cur: Cursor, session_id: str) -> list[MessageSkeleton]:
    """Roles and tool links of a session's messages (no text): enough to count rounds."""
    await cur.execute(
        "SELECT role, jsonb_build_object("
        "  'tool_calls', CASE WHEN jsonb_typeof(metadata->'tool_calls') = 'array'"
        "                THEN metadata->'tool_calls' END,"
        "  'tool_call_id', metadata->>'tool_call_id') AS metadata"
        " FROM conversations WHERE session_id = %s AND deleted_at IS NULL"
        f" AND {NOT_INCOMPLETE} ORDER BY created_at, id", (session_id,))
    return cast(list[MessageSkeleton], rows_as_dicts(cur, await cur.fetchall()))


async def session_history(cur: Cursor, session_id: str) -> list[StoredMessage]:
    await cur.execute(
        "SELECT id, role, content, metadata, created_at FROM conversations"
        f" WHERE session_id = %s AND deleted_at IS NULL AND {NOT_INCOMPLETE}"
        " ORDER BY created_at, id", (session_id,))
    return cast(list[StoredMessage], rows_as_dicts(cur, await cur.fetchall()))


async def related_active(cur: Cursor, terms: list[str], limit: int) -> list[KnownMemory]:
    """Active memories sharing the most keyword terms with ``terms`` (read-only)."""
    if not terms:
        return []
    await cur.execute(
        f"SELECT {MEMORY_FIELDS} FROM memories"
        " WHERE is_active AND search_terms && %s::text[]"
        " ORDER BY cardinality(ARRAY(SELECT unnest(search_terms) INTERSECT"
        "   SELECT unnest(%s::text[]))) DESC, created_at DESC LIMIT %s",
        (terms, terms, limit))
    return await _known(cur)


async def active_by_ids(cur: Cursor, ids: list[int]) -> list[KnownMemory]:
    """The active memories among ``ids``, in the order given (read-only)."""
    if not ids:
        return []
    await cur.execute(f"SELECT {MEMORY_FIELDS} FROM memories"
                      " WHERE is_active AND id = ANY(%s::bigint[])"
                      " ORDER BY array_position(%s::bigint[], id)", (ids, ids))
    return await _known(cur)


async def latest_active(cur: Cursor, limit: int) -> list[KnownMemory]:
    await cur.execute(f"SELECT {MEMORY_FIELDS} FROM memories WHERE is_active"
                      " ORDER BY created_at DESC, id DESC LIMIT %s", (limit,))
    return await _known(cur)


async def lock_memory(cur: Cursor, memory_id: int) -> KnownMemory | None:
    await cur.execute(f"SELECT {MEMORY_FIELDS} FROM memories WHERE id = %s FOR UPDATE",
                      (memory_id,))
    rows = await _known(cur)
    return rows[0] if rows else None


async def insert_extracted(cur: Cursor, *, content: str, importance: int, terms: list[str],
                           session_id: str, message_ids: list[int],
                           remind_at: datetime | None, keywords: Sequence[str] = (),
                           questions: Sequence[str] = ()) -> int:
    """One extracted memory, with the keywords and questions the model wrote for it."""
    await cur.execute(
        "INSERT INTO memories (content, importance, layer, source_session, source_message_ids,"
        " remind_at, search_terms, model_keywords, model_questions, described_at)"
        " VALUES (%s, %s, 1, %s, %s, %s, %s, %s::text[], %s::text[],"
        " CASE WHEN %s THEN now() END) RETURNING id",
        (content, importance, session_id, message_ids, remind_at, terms, list(keywords),
         list(questions), bool(keywords or questions)))
    return int((await cur.fetchone())[0])


async def supersede(cur: Cursor, old_id: int, new_id: int) -> None:
    await cur.execute(
        "UPDATE memories SET is_active = false, superseded_by = %s, archived_at = now(),"
        " updated_at = now() WHERE id = %s", (new_id, old_id))


async def move_reminder(cur: Cursor, memory_id: int, remind_at: datetime) -> None:
    await cur.execute(
        "UPDATE memories SET remind_at = %s, reminder_claimed_at = NULL,"
        " reminder_claim_token = NULL, reminder_delivered_at = NULL, updated_at = now()"
        " WHERE id = %s", (remind_at, memory_id))


async def window_still_live(cur: Cursor, session_id: str, message_ids: list[int]) -> bool:
    """Take the session's write lock (a purge takes it too), then say whether a message the
    extraction read is still there: not trashed, not deleted for good."""
    await lock_session_writes(cur, session_id)
    if not message_ids:
        return True
    await cur.execute("SELECT EXISTS (SELECT 1 FROM conversations WHERE id = ANY(%s)"
                      " AND deleted_at IS NULL)", (message_ids,))
    row = await cur.fetchone()
    return bool(row and row[0])


async def complete_job(cur: Cursor, job_id: int, attempt: int, result: Any) -> bool:
    """Mark the job done inside the caller's transaction, so its writes and its completion
    commit together. ``attempt`` fences out a run whose lease expired and was taken over:
    False means the job is no longer ours and the caller must roll back."""
    await cur.execute(
        "UPDATE jobs SET status = 'done', result = %s::jsonb, claimed_until = NULL,"
        " updated_at = now() WHERE id = %s AND status = 'running' AND attempts = %s",
        (storable_json(result), job_id, attempt))
    return cur.rowcount == 1
