"""SQL for sidecar turns: the session write lock, finding a stored turn, tagging its rows."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, TypedDict, cast

from pawwake.db.array_literals import TextArray
from pawwake.db.pool import Cursor, rows_as_dicts

# The session's write lock, for statements that take it in the same round trip as their own
# work (their parameters carry ``lock_key``).
SESSION_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended(%(lock_key)s, 0))"


def session_lock_key(session_id: str) -> str:
    return "conversations:" + session_id


async def lock_session_writes(cur: Cursor, session_id: str) -> None:
    """Serialise writers of one session until the transaction ends (the gateway's chat
    writer takes the same lock, so sidecar and chat turns never interleave)."""
    await cur.execute(SESSION_LOCK, {"lock_key": session_lock_key(session_id)})


async def find_turn(cur: Cursor, source: str, session_id: str, turn_id: str) -> int | None:
    """The id of the message that carries ``turn_id`` (deleted or not), or None."""
    await cur.execute(
        "SELECT id FROM conversations WHERE source = %s AND session_id = %s AND turn_id = %s",
        (source, session_id, turn_id))
    row = await cur.fetchone()
    return row[0] if row else None


async def tag_turn(cur: Cursor, message_id: int, turn_id: str) -> None:
    await cur.execute("UPDATE conversations SET turn_id = %s WHERE id = %s",
                      (turn_id, message_id))


async def set_search_terms(cur: Cursor, terms_by_id: Sequence[tuple[int, list[str]]]) -> None:
    """Store index terms of messages in one statement."""
    if not terms_by_id:
        return
    rows = ", ".join(["(%s::bigint, %s::text[])"] * len(terms_by_id))
    params: list[Any] = []
    for message_id, terms in terms_by_id:
        params += [message_id, TextArray(terms)]
    await cur.execute(
        "UPDATE conversations c SET search_terms = v.terms FROM (VALUES " + rows + ")"
        " AS v(id, terms) WHERE c.id = v.id", params)


class TurnRow(TypedDict):
    """A stored message of one sidecar turn, as its reply replacement reads it."""

    id: int
    role: str
    content: str
    deleted_at: datetime | None


async def turn_rows(cur: Cursor, first_id: int) -> list[TurnRow]:
    """The rows of the turn whose first message is ``first_id``, in order; empty when the
    turn did not record its length (stored before it did)."""
    await cur.execute("SELECT session_id, source, (metadata->'turn'->>'messages')::int"
                      " FROM conversations WHERE id = %s", (first_id,))
    head = await cur.fetchone()
    if head is None or head[2] is None or head[2] < 1:
        return []
    # Rows of one turn are inserted by one statement under the session's write lock: the
    # session's next ``count`` rows from ``first_id`` on are exactly the turn's.
    await cur.execute(
        "SELECT id, role, content, deleted_at FROM conversations"
        " WHERE session_id = %s AND source = %s AND id >= %s ORDER BY id LIMIT %s",
        (head[0], head[1], first_id, head[2]))
    rows = cast(list[TurnRow], rows_as_dicts(cur, await cur.fetchall()))
    return rows if len(rows) == head[2] else []


async def set_content(cur: Cursor, message_id: int, content: str) -> None:
    await cur.execute("UPDATE conversations SET content = %s WHERE id = %s",
                      (content, message_id))
