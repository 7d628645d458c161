"""SQL for managing stored conversations: listing, trash, restore, merge, import and export.

A session is "in the trash" when it has messages but none of them is live. Trashing a session
stamps all its live messages with one ``deleted_at`` (the transaction time), so restoring it
brings back exactly those and leaves messages deleted one by one before in the trash.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, TypedDict, cast

from pawwake.db.conversation_turns import lock_session_writes
from pawwake.db.errors import Conflict, NotFound
from pawwake.db.pool import Cursor, fetch_all, fetch_one, rows_as_dicts
from pawwake.text.messages import StoredMessage
from pawwake.text.storable import storable_json

PREVIEW_CHARS = 120
_MESSAGE_COLUMNS = ("id, session_id, role, content, model, created_at, metadata, deleted_at,"
                    " source, turn_id")


class MessageRow(StoredMessage):
    """A stored message as the conversation pages and the API manage it (``_MESSAGE_COLUMNS``)."""

    session_id: str
    model: str | None
    deleted_at: datetime | None
    source: str  # "gateway", "import", a sidecar's name
    turn_id: str | None


class SessionSummary(TypedDict):
    """A session of the conversation list: its activity, counts and token totals."""

    session_id: str
    last_activity: datetime | None
    message_count: int
    trashed_at: datetime | None
    preview: str | None  # the start of its first user message
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ImportedMessage(TypedDict):
    """A message of an import, validated (``conversations/manage.py`` ``parse_import``)."""

    role: str
    content: str
    model: str | None
    metadata: dict[str, Any]
    created_at: datetime


class ExportedRow(ImportedMessage):
    session_id: str


def _match_sql(phrases: Sequence[str], terms: Sequence[str] | None) -> tuple[str, list[Any]]:
    """A condition on ``m`` true for messages containing every phrase.

    With index terms the GIN index narrows the rows first (messages not indexed yet are still
    checked); without them it is a plain scan of the message text.
    """
    parts: list[str] = []
    params: list[Any] = []
    if terms:
        parts.append("(m.search_terms && %s::text[] OR m.search_terms IS NULL)")
        params.append(list(terms))
    for phrase in phrases:
        parts.append("strpos(lower(m.content), %s) > 0")
        params.append(phrase.lower())
    return " AND ".join(parts) or "true", params


async def list_sessions(cur: Cursor, *, trash: bool, limit: int, offset: int,
                        phrases: Sequence[str] = (), terms: Sequence[str] | None = None
                        ) -> tuple[int, list[SessionSummary]]:
    """(total sessions, one page of them newest activity first) with counts and token totals.

    Live view: sessions with live messages (counts cover live ones). Trash view: sessions with
    no live message (counts cover the trashed ones).
    """
    live = "c.deleted_at IS NULL" if not trash else "c.deleted_at IS NOT NULL"
    having = ("bool_or(c.deleted_at IS NULL)" if not trash
              else "NOT bool_or(c.deleted_at IS NULL)")
    match, match_params = _match_sql(phrases, terms)
    if phrases:
        # The matching sessions, found once (an InitPlan): as a subquery joined to the
        # messages, the planner could re-run the match over a whole session for each of its
        # messages (a semi-join), quadratic in the length of a thread.
        scope = (" WHERE c.session_id = ANY (ARRAY(SELECT DISTINCT m.session_id"
                 f" FROM conversations m WHERE {live.replace('c.', 'm.')} AND {match}))")
    else:
        scope = ""
    sessions_sql = (
        f"SELECT c.session_id, max(c.created_at) FILTER (WHERE {live}) AS last_activity,"
        f" count(*) FILTER (WHERE {live}) AS message_count,"
        f" {'max(c.deleted_at)' if trash else 'NULL::timestamptz'} AS trashed_at"
        f" FROM conversations c{scope} GROUP BY c.session_id HAVING {having}")
    # One pass over the messages: the page and (by a window) the number of sessions.
    await cur.execute(
        f"WITH s AS ({sessions_sql}), page AS (SELECT s.*, count(*) OVER () AS sessions"
        " FROM s ORDER BY last_activity DESC, session_id LIMIT %s OFFSET %s)"
        " SELECT page.*,"
        " (SELECT left(f.content, %s) FROM conversations f"
        "   WHERE f.session_id = page.session_id"
        f"   AND f.role = 'user' AND {live.replace('c.', 'f.')}"
        "   ORDER BY f.created_at, f.id LIMIT 1) AS preview,"
        " coalesce(u.prompt_tokens, 0) AS prompt_tokens,"
        " coalesce(u.completion_tokens, 0) AS completion_tokens,"
        " coalesce(u.total_tokens, 0) AS total_tokens"
        " FROM page LEFT JOIN LATERAL (SELECT sum(prompt_tokens) AS prompt_tokens,"
        "   sum(completion_tokens) AS completion_tokens, sum(total_tokens) AS total_tokens"
        "   FROM token_usage t WHERE t.session_id = page.session_id) u ON true"
        " ORDER BY page.last_activity DESC, page.session_id",
        [*match_params, limit, offset, PREVIEW_CHARS])
    rows = rows_as_dicts(cur, await cur.fetchall())
    if rows:
        total = int(rows[0]["sessions"])
    elif offset == 0:
        total = 0
    else:  # past the last page: count apart
        await cur.execute(f"SELECT count(*) FROM ({sessions_sql}) s", match_params)
        total = int((await cur.fetchone())[0])
    for row in rows:
        del row["sessions"]
        for name in ("message_count", "prompt_tokens", "completion_tokens", "total_tokens"):
            row[name] = int(row[name])
    return total, cast(list[SessionSummary], rows)


async def session_messages(cur: Cursor, session_id: str, *, include_deleted: bool
                           ) -> list[MessageRow]:
    """Messages of a session oldest first; with ``include_deleted`` the trashed ones too."""
    live = "" if include_deleted else " AND deleted_at IS NULL"
    return cast(list[MessageRow], await fetch_all(
        cur, f"SELECT {_MESSAGE_COLUMNS} FROM conversations WHERE session_id = %s{live}"
             " ORDER BY created_at, id", (session_id,)))


async def edit_message(cur: Cursor, message_id: int, content: str) -> MessageRow:
    """Replace a live message's text; raises NotFound (or Conflict when it is in the trash)."""
    await cur.execute("SELECT session_id, deleted_at FROM conversations WHERE id = %s",
                      (message_id,))
    found = await cur.fetchone()
    if found is None:
        raise NotFound(f"No such message {message_id}.")
    if found[1] is not None:
        raise Conflict("restore the message before editing it", "message_deleted")
    await cur.execute(f"UPDATE conversations SET content = %s WHERE id = %s"
                      f" RETURNING {_MESSAGE_COLUMNS}", (content, message_id))
    return cast(MessageRow, rows_as_dicts(cur, [await cur.fetchone()])[0])


async def set_message_deleted(cur: Cursor, message_id: int, deleted: bool) -> MessageRow:
    """Soft-delete or restore one message (idempotent); raises NotFound."""
    stamp = "coalesce(deleted_at, now())" if deleted else "NULL"
    await cur.execute(f"UPDATE conversations SET deleted_at = {stamp} WHERE id = %s"
                      f" RETURNING {_MESSAGE_COLUMNS}", (message_id,))
    row = await cur.fetchone()
    if row is None:
        raise NotFound(f"No such message {message_id}.")
    return cast(MessageRow, rows_as_dicts(cur, [row])[0])


async def _session_state(cur: Cursor, session_id: str) -> tuple[int, int]:
    """(live messages, all messages) of a session."""
    await cur.execute("SELECT count(*) FILTER (WHERE deleted_at IS NULL), count(*)"
                      " FROM conversations WHERE session_id = %s", (session_id,))
    live, total = await cur.fetchone()
    return int(live), int(total)


async def trash_session(cur: Cursor, session_id: str) -> int:
    """Move every live message of a session to the trash with one stamp; returns the count."""
    await lock_session_writes(cur, session_id)
    _live, total = await _session_state(cur, session_id)
    if total == 0:
        raise NotFound(f"No such session {session_id}.")
    await cur.execute("UPDATE conversations SET deleted_at = now()"
                      " WHERE session_id = %s AND deleted_at IS NULL", (session_id,))
    return cur.rowcount


async def restore_session(cur: Cursor, session_id: str) -> int:
    """Bring back the messages trashed with the session (those carrying its latest stamp)."""
    await lock_session_writes(cur, session_id)
    live, total = await _session_state(cur, session_id)
    if total == 0:
        raise NotFound(f"No such session {session_id}.")
    if live:
        raise Conflict("the session is not in the trash", "not_in_trash")
    await cur.execute(
        "UPDATE conversations SET deleted_at = NULL WHERE session_id = %(s)s AND deleted_at ="
        " (SELECT max(deleted_at) FROM conversations WHERE session_id = %(s)s)",
        {"s": session_id})
    return cur.rowcount


async def purge_session(cur: Cursor, session_id: str) -> dict[str, int]:
    """Delete a trashed session's messages and token usage for good."""
    await lock_session_writes(cur, session_id)
    live, total = await _session_state(cur, session_id)
    if total == 0:
        raise NotFound(f"No such session {session_id}.")
    if live:
        raise Conflict("only a session in the trash can be deleted permanently",
                       "purge_needs_trash")
    await cur.execute("DELETE FROM conversations WHERE session_id = %s", (session_id,))
    messages = cur.rowcount
    await cur.execute("DELETE FROM token_usage WHERE session_id = %s", (session_id,))
    usage_rows = cur.rowcount
    await cur.execute("DELETE FROM conversation_fragment_seen WHERE session_id = %s",
                      (session_id,))
    return {"messages": messages, "usage_rows": usage_rows}


async def merge_sessions(cur: Cursor, source_ids: Sequence[str], target_id: str) -> dict[str, int]:
    """Move messages and token usage of the sources into the target (one transaction)."""
    for session_id in sorted({*source_ids, target_id}):  # one lock order: no deadlock
        await lock_session_writes(cur, session_id)
    await cur.execute("SELECT DISTINCT session_id FROM conversations WHERE session_id = ANY(%s)",
                      (list(source_ids),))
    present = {row[0] for row in await cur.fetchall()}
    missing = [s for s in source_ids if s not in present]
    if missing:
        raise NotFound(f"No such session {missing[0]}.")
    await cur.execute(
        "SELECT 1 FROM conversations a JOIN conversations b ON a.turn_id = b.turn_id"
        " AND a.source = b.source AND a.id <> b.id"
        " WHERE a.session_id = ANY(%s) AND b.session_id = ANY(%s) LIMIT 1",
        (list(source_ids), [*source_ids, target_id]))
    if await cur.fetchone():
        raise Conflict("two of these sessions hold the same sidecar turn id", "same_turn_id")
    await cur.execute("UPDATE conversations SET session_id = %s WHERE session_id = ANY(%s)",
                      (target_id, list(source_ids)))
    messages = cur.rowcount
    await cur.execute("UPDATE token_usage SET session_id = %s WHERE session_id = ANY(%s)",
                      (target_id, list(source_ids)))
    usage_rows = cur.rowcount
    await cur.execute("DELETE FROM conversation_fragment_seen WHERE session_id = ANY(%s)",
                      (list(source_ids),))
    return {"messages": messages, "usage_rows": usage_rows}


async def session_totals(cur: Cursor, session_id: str) -> dict[str, int]:
    """Message count and token sums of one session (live and trashed messages)."""
    row = await fetch_one(
        cur,
        "SELECT (SELECT count(*) FROM conversations WHERE session_id = %(s)s) AS messages,"
        " coalesce(sum(prompt_tokens), 0) AS prompt_tokens,"
        " coalesce(sum(completion_tokens), 0) AS completion_tokens,"
        " coalesce(sum(total_tokens), 0) AS total_tokens"
        " FROM token_usage WHERE session_id = %(s)s", {"s": session_id})
    assert row is not None
    return {k: int(v) for k, v in row.items()}


async def insert_imported(cur: Cursor, session_id: str, rows: Sequence[ImportedMessage]
                          ) -> list[tuple[int, str]]:
    """Insert messages not stored yet (same session, role, time and text); return (id, text).

    The key is the content itself, so importing the same rows again, or an export of this
    database, inserts nothing.
    """
    await lock_session_writes(cur, session_id)
    inserted: list[tuple[int, str]] = []
    for row in rows:
        await cur.execute(
            "INSERT INTO conversations (session_id, role, content, model, created_at, metadata,"
            " source) SELECT %(s)s, %(role)s, %(content)s, %(model)s, %(at)s, %(meta)s::jsonb,"
            " 'import' WHERE NOT EXISTS (SELECT 1 FROM conversations WHERE session_id = %(s)s"
            " AND created_at = %(at)s AND role = %(role)s AND md5(content) = md5(%(content)s))"
            " RETURNING id",
            {"s": session_id, "role": row["role"], "content": row["content"],
             "model": row["model"], "at": row["created_at"],
             "meta": storable_json(row["metadata"] or {})})
        found = await cur.fetchone()
        if found is not None:
            inserted.append((int(found[0]), row["content"]))
    return inserted


async def export_messages(cur: Cursor, *, include_deleted: bool = False
                          ) -> list[ExportedRow]:
    """Every message (live ones unless asked), by session and time."""
    live = "" if include_deleted else " WHERE deleted_at IS NULL"
    return cast(list[ExportedRow], await fetch_all(
        cur, "SELECT session_id, role, content, model, created_at, metadata FROM conversations"
             f"{live} ORDER BY session_id, created_at, id"))


async def usage_by_session(cur: Cursor, limit: int, offset: int
                           ) -> tuple[int, list[dict[str, Any]]]:
    """(sessions with usage, one page of them by total tokens) split by usage type."""
    await cur.execute("SELECT count(DISTINCT coalesce(session_id, '')) FROM token_usage")
    total = int((await cur.fetchone())[0])
    await cur.execute(
        "SELECT session_id, sum(total_tokens)::bigint AS total_tokens,"
        " sum(total_tokens) FILTER (WHERE usage_type = 'chat')::bigint AS chat,"
        " sum(total_tokens) FILTER (WHERE usage_type = 'summary')::bigint AS summary,"
        " sum(total_tokens) FILTER (WHERE usage_type = 'extract')::bigint AS extract,"
        " sum(total_tokens) FILTER (WHERE usage_type = 'consolidate')::bigint AS consolidate,"
        " sum(cached_tokens)::bigint AS cache_read,"
        " sum(cache_creation_tokens)::bigint AS cache_write,"
        " max(created_at) AS last_used FROM token_usage GROUP BY session_id"
        " ORDER BY 2 DESC, session_id NULLS LAST LIMIT %s OFFSET %s", (limit, offset))
    rows = rows_as_dicts(cur, await cur.fetchall())
    for row in rows:
        for name in ("total_tokens", "chat", "summary", "extract", "consolidate",
                     "cache_read", "cache_write"):
            row[name] = int(row[name] or 0)
    return total, rows
