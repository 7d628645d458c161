"""SQL for the conversations table: stored chat messages, one row per message.

``metadata`` keeps what a replay to the provider needs besides the text: ``tool_calls``,
``tool_call_id``, ``name``, ``reasoning_content`` and ``extras`` (other provider keys), and
``incomplete`` on a turn the client left before its end (kept, shown, never learned from or
replayed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from pawwake.db.conversation_turns import SESSION_LOCK, session_lock_key
from pawwake.db.pool import Cursor, fetch_all, rows_as_dicts
from pawwake.text.messages import TailMessage
from pawwake.text.storable import storable_json

INCOMPLETE = "incomplete"  # metadata flag of a turn the client left before its end
# SQL condition: the row is not part of an incomplete turn.
NOT_INCOMPLETE = "(metadata->>'incomplete') IS NULL"


@dataclass(frozen=True)
class NewMessage:
    """A message to insert; ``created_at`` None means the moment of the insert."""

    role: str
    content: str
    model: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: datetime | None = None
    turn_id: str | None = None  # the idempotency key of the turn this row closes


# The session's last stored user message: where the tail a new turn is compared with starts.
_LAST_USER = ("SELECT created_at, id FROM conversations"
              " WHERE session_id = %(sid)s AND role = 'user' AND deleted_at IS NULL"
              " ORDER BY created_at DESC, id DESC LIMIT 1")
# A row subquery, not a join: it keeps the row comparison an index condition, so only the
# tail is read however long the session is.
_SESSION_TAIL = (
    "SELECT c.id, c.role, c.content, c.metadata FROM conversations c"
    " WHERE c.session_id = %(sid)s AND c.deleted_at IS NULL"
    f" AND (c.created_at, c.id) >= ({_LAST_USER})"
    " ORDER BY c.created_at, c.id LIMIT %(limit)s")
# Tool traffic of the same tail (no row limit: a long agent loop stays one round); a session
# with no user message yet is all tail.
_TOOL_TAIL = (
    "SELECT c.role, c.metadata FROM conversations c"
    " WHERE c.session_id = %(sid)s AND c.deleted_at IS NULL AND c.role IN ('assistant', 'tool')"
    " AND (c.created_at, c.id) >= (SELECT COALESCE(max(created_at), '-infinity'),"
    f" COALESCE(max(id), 0) FROM ({_LAST_USER}) AS last_user)")


async def session_tail(cur: Cursor, session_id: str, *, limit: int | None = None,
                       lock: bool = False) -> list[TailMessage]:
    """The session's last stored user message and every message after it, oldest first.

    That is one round, read whole by default (``limit`` None): the turn planner replaces or
    skips rows anywhere in it, and an agent loop can make it hundreds of messages long.
    ``lock=True`` first takes the session's write lock, in the same round trip.
    """
    sql = _SESSION_TAIL
    if lock:
        sql = SESSION_LOCK + "; " + sql
    await cur.execute(sql, {"sid": session_id, "limit": limit,
                            "lock_key": session_lock_key(session_id)})
    return cast(list[TailMessage], rows_as_dicts(cur, await cur.fetchall()))


async def stored_tool_call_ids(cur: Cursor, session_id: str, call_ids: Sequence[str]
                               ) -> dict[str, set[str]]:
    """Which of ``call_ids`` the session tail holds, as assistant calls and as tool results.

    Only the tail from the last stored user message on is read (what ``session_tail`` gives
    the turn planner): tool traffic the client sends belongs to its newest user message, so
    earlier rounds cannot hold it, and a provider that numbers its calls per reply
    (``call_0`` every time) does not make a new result look stored. A thread of any length
    is thus never scanned whole on a tool turn.
    """
    found: dict[str, set[str]] = {"assistant": set(), "tool": set()}
    if not call_ids:
        return found
    await cur.execute(
        f"WITH tail AS ({_TOOL_TAIL})"
        " SELECT 'assistant', call->>'id' FROM tail CROSS JOIN LATERAL"
        " jsonb_array_elements(CASE WHEN jsonb_typeof(tail.metadata->'tool_calls') = 'array'"
        " THEN tail.metadata->'tool_calls' ELSE '[]'::jsonb END) AS call"
        " WHERE tail.role = 'assistant' AND call->>'id' = ANY(%(ids)s)"
        " UNION ALL"
        " SELECT 'tool', metadata->>'tool_call_id' FROM tail"
        " WHERE role = 'tool' AND metadata->>'tool_call_id' = ANY(%(ids)s)",
        {"sid": session_id, "ids": list(call_ids)})
    for role, call_id in await cur.fetchall():
        found[role].add(call_id)
    return found


# Text per INSERT statement: building (quoting) one statement runs on the event loop, so a
# huge sidecar turn is written in several statements of bounded size, in order.
INSERT_BATCH_CHARS = 256_000


async def insert_messages(cur: Cursor, session_id: str, messages: Sequence[NewMessage],
                          *, source: str = "gateway") -> list[int]:
    """Insert messages in order (one statement per bounded batch); return their ids."""
    ids: list[int] = []
    for batch in _batches(messages):
        rows = []
        params: list[Any] = []
        for message in batch:
            # clock_timestamp(), not now(): rows sort in the order writers got the session
            # lock, even when an earlier transaction was still waiting for it.
            rows.append("(%s, %s, %s, %s, %s::jsonb, COALESCE(%s, clock_timestamp()), %s, %s)")
            params += [session_id, message.role, message.content, message.model,
                       storable_json(message.metadata), message.created_at, source,
                       message.turn_id]
        await cur.execute(
            "INSERT INTO conversations (session_id, role, content, model, metadata, created_at,"
            " source, turn_id) VALUES " + ", ".join(rows) + " RETURNING id", params)
        ids += [row[0] for row in await cur.fetchall()]
    return ids


def _batches(messages: Sequence[NewMessage]) -> list[list[NewMessage]]:
    batches: list[list[NewMessage]] = []
    size = 0
    for message in messages:
        length = len(message.content or "")
        if not batches or (size + length > INSERT_BATCH_CHARS and batches[-1]):
            batches.append([])
            size = 0
        batches[-1].append(message)
        size += length
    return batches


async def delete_messages(cur: Cursor, ids: Sequence[int]) -> int:
    """Remove messages for good (a re-rolled reply is replaced, not kept in the trash)."""
    if not ids:
        return 0
    await cur.execute("DELETE FROM conversations WHERE id = ANY(%s)", (list(ids),))
    return cur.rowcount


async def clear_incomplete(cur: Cursor, ids: Sequence[int]) -> None:
    """A later complete turn answered these rows: they count as ordinary messages again."""
    if ids:
        await cur.execute("UPDATE conversations SET metadata = metadata - 'incomplete'"
                          " WHERE id = ANY(%s)", (list(ids),))


async def session_messages(cur: Cursor, session_id: str) -> list[dict[str, Any]]:
    """Every live message of a session, oldest first."""
    return await fetch_all(
        cur,
        "SELECT id, session_id, role, content, model, created_at, metadata FROM conversations"
        " WHERE session_id = %s AND deleted_at IS NULL ORDER BY created_at, id",
        (session_id,))
