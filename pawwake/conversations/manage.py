"""Managing stored conversations: list and search, edit, trash and restore, merge, import, export.

Used by the /api routes and the dashboard alike. Every multi-step write is one transaction, and
every write that changes message text keeps the recall index current.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pawwake.api_error import ApiError
from pawwake.database import require_database
from pawwake.db import conversation_admin as db
from pawwake.db.errors import Conflict, NotFound
from pawwake.db.pool import cursor, transaction
from pawwake.local_time import MAX_YEAR, MIN_YEAR, moment_in_range
from pawwake.recall import index as conversation_index
from pawwake.text.storable import storable_text

if TYPE_CHECKING:
    from pawwake.database import Database
    from pawwake.recall.faces import ConversationRecall
    from pawwake.settings import Settings

log = logging.getLogger(__name__)

ROLES = ("system", "user", "assistant", "tool")
MAX_SESSION_ID = 200
MAX_CONTENT = 200_000
MAX_IMPORT_MESSAGES = 20_000
MAX_PAGE = 200
MAX_BATCH = 500

__all__ = ["Conflict", "NotFound"]


def session_id_of(value: Any, name: str = "session_id") -> str:
    """A session id as given, or ApiError (400)."""
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_SESSION_ID:
        raise ApiError(f"invalid_{name}",
                      f"{name} must be a non-empty string of at most {MAX_SESSION_ID} characters.")
    return value


def content_of(value: Any) -> str:
    if isinstance(value, str):
        value = storable_text(value)  # what is stored: "\x00" alone is empty, not content
    if not isinstance(value, str) or not value.strip():
        raise ApiError("invalid_content", "content must be non-empty text.")
    if len(value) > MAX_CONTENT:
        raise ApiError("invalid_content", f"content is limited to {MAX_CONTENT} characters.")
    return value


async def _search_terms(recall: ConversationRecall, settings: Settings, phrases: list[str]
                        ) -> list[str] | None:
    """Index terms of the search phrases when recall keeps an index, else None (scan)."""
    if not settings.CONVERSATION_RECALL_ENABLED:
        return None
    terms = await conversation_index.terms_for(recall, phrases)
    return sorted({t for group in terms for t in group}) or None


async def list_conversations(recall: ConversationRecall, *, settings: Settings, query: str = "",
                             trash: bool = False, limit: int = 20, offset: int = 0
                             ) -> dict[str, Any]:
    """One page of sessions, newest activity first, optionally only those containing a phrase.

    Every whitespace-separated part of ``query`` must appear in one message. The keyword index
    narrows the candidates; when it finds nothing (a partial word, say) the text is scanned.
    """
    pool = require_database(recall.database).pool
    phrases = [p for p in query.split() if p]
    terms = await _search_terms(recall, settings, phrases) if phrases and not trash else None
    async with cursor(pool) as cur:
        total, rows = await db.list_sessions(cur, trash=trash, limit=limit, offset=offset,
                                             phrases=phrases, terms=terms)
    if terms and total == 0:
        async with cursor(pool) as cur:
            total, rows = await db.list_sessions(cur, trash=trash, limit=limit, offset=offset,
                                                 phrases=phrases)
    return {"total": total, "limit": limit, "offset": offset, "trash": trash, "query": query,
            "items": rows}


async def session_messages(database: Database, session_id: str, *,
                           include_deleted: bool = False) -> list[db.MessageRow]:
    async with cursor(database.pool) as cur:
        rows = await db.session_messages(cur, session_id, include_deleted=True)
    if not rows:
        raise NotFound(f"No such session {session_id}.")
    if include_deleted or all(row["deleted_at"] is not None for row in rows):
        return rows  # a trashed session shows its trashed messages
    return [row for row in rows if row["deleted_at"] is None]


async def edit_message(recall: ConversationRecall, message_id: int, content: str, *,
                       settings: Settings) -> db.MessageRow:
    """Change a message's text and re-index it in the same transaction."""
    async with transaction(require_database(recall.database).pool) as cur:
        row = await db.edit_message(cur, message_id, content)
        await conversation_index.reindex_messages(recall, cur, [(message_id, content)],
                                                  settings=settings)
    return row


async def set_message_deleted(database: Database, message_id: int, deleted: bool
                              ) -> db.MessageRow:
    async with transaction(database.pool) as cur:
        return await db.set_message_deleted(cur, message_id, deleted)


async def trash_session(database: Database, session_id: str) -> int:
    async with transaction(database.pool) as cur:
        return await db.trash_session(cur, session_id)


async def restore_session(database: Database, session_id: str) -> int:
    async with transaction(database.pool) as cur:
        return await db.restore_session(cur, session_id)


async def restore_sessions(database: Database, session_ids: list[str]) -> int:
    """Restore several trashed sessions in one transaction (all or none)."""
    async with transaction(database.pool) as cur:
        return sum([await db.restore_session(cur, s) for s in dict.fromkeys(session_ids)])


async def purge_session(database: Database, session_id: str) -> dict[str, int]:
    async with transaction(database.pool) as cur:
        return await db.purge_session(cur, session_id)


async def batch_delete(database: Database, session_ids: list[str], *, permanent: bool
                       ) -> dict[str, Any]:
    """Trash (or purge from the trash) several sessions in one transaction.

    Unknown sessions are reported, not fatal; purging a session that is not in the trash
    aborts the whole batch with Conflict.
    """
    done: list[str] = []
    missing: list[str] = []
    messages = usage_rows = 0
    async with transaction(database.pool) as cur:
        for session_id in dict.fromkeys(session_ids):
            try:
                if permanent:
                    counts = await db.purge_session(cur, session_id)
                    messages += counts["messages"]
                    usage_rows += counts["usage_rows"]
                else:
                    messages += await db.trash_session(cur, session_id)
            except NotFound:
                missing.append(session_id)
                continue
            done.append(session_id)
    result: dict[str, Any] = {"sessions": len(done), "messages": messages, "missing": missing,
                              "permanent": permanent}
    if permanent:
        result["usage_rows"] = usage_rows
    return result


async def merge_sessions(database: Database, source_ids: list[str], target_id: str
                         ) -> dict[str, Any]:
    """Move the sources' messages and token usage into the target; returns moved counts and
    the target's totals afterwards."""
    sources = [s for s in dict.fromkeys(source_ids) if s != target_id]
    if not sources:
        raise ApiError("invalid_source_ids", "Give at least one source session other than the "
                                            "target.")
    async with transaction(database.pool) as cur:
        moved = await db.merge_sessions(cur, sources, target_id)
        totals = await db.session_totals(cur, target_id)
    log.info("merged %d sessions into one (%d messages)", len(sources), moved["messages"])
    return {"target_id": target_id, "source_ids": sources, "moved": moved, "target": totals}


def _parse_time(value: Any, where: str) -> datetime:
    if not isinstance(value, str):
        raise ApiError("invalid_created_at", f"{where}: created_at must be an ISO 8601 time.")
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ApiError("invalid_created_at",
                      f"{where}: created_at must be an ISO 8601 time.") from None
    when = when if when.tzinfo else when.replace(tzinfo=UTC)
    if not moment_in_range(when):
        raise ApiError("invalid_created_at", f"{where}: created_at must lie between the years"
                                            f" {MIN_YEAR} and {MAX_YEAR} (UTC).")
    return when


def _parse_message(item: Any, where: str) -> db.ImportedMessage:
    if not isinstance(item, dict):
        raise ApiError("invalid_message", f"{where}: each message must be an object.")
    unknown = sorted(set(item) - {"session_id", "role", "content", "created_at", "metadata",
                                  "model"})
    if unknown:
        raise ApiError("unknown_field", f"{where}: unknown field {unknown[0]}.")
    if item.get("role") not in ROLES:
        raise ApiError("invalid_role", f"{where}: role must be one of {', '.join(ROLES)}.")
    content = item.get("content")
    if not isinstance(content, str) or len(content) > MAX_CONTENT:
        raise ApiError("invalid_content", f"{where}: content must be text of at most "
                                         f"{MAX_CONTENT} characters.")
    metadata = item.get("metadata", {})
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise ApiError("invalid_metadata", f"{where}: metadata must be an object.")
    model = item.get("model")
    if model is not None and not isinstance(model, str):
        raise ApiError("invalid_model", f"{where}: model must be text.")
    return {"role": item["role"], "content": content, "model": model, "metadata": metadata,
            "created_at": _parse_time(item.get("created_at"), where)}


def parse_import(body: Any) -> dict[str, list[db.ImportedMessage]]:
    """Validate a whole import before anything is written: messages grouped by session."""
    if not isinstance(body, list) or not body:
        raise ApiError("invalid_body", "Send a non-empty JSON array.")
    by_session: dict[str, list[db.ImportedMessage]] = defaultdict(list)
    count = 0
    for number, item in enumerate(body):
        where = f"item {number}"
        if not isinstance(item, dict):
            raise ApiError("invalid_message", f"{where}: must be an object.")
        session_id = session_id_of(item.get("session_id"))
        if "messages" in item:
            if set(item) != {"session_id", "messages"} or not isinstance(item["messages"], list):
                raise ApiError("invalid_session", f"{where}: a session is {{session_id, "
                                                 "messages: [...]}}.")
            messages = [_parse_message(m, f"{where} message {i}")
                        for i, m in enumerate(item["messages"])]
        else:
            messages = [_parse_message({k: v for k, v in item.items() if k != "session_id"},
                                       where)]
        count += len(messages)
        if count > MAX_IMPORT_MESSAGES:
            raise ApiError("too_many_messages",
                          f"An import holds at most {MAX_IMPORT_MESSAGES} messages.")
        by_session[session_id].extend(messages)
    for rows in by_session.values():
        rows.sort(key=lambda r: r["created_at"])
    return dict(by_session)


async def import_conversations(recall: ConversationRecall, body: Any, *, settings: Settings
                               ) -> dict[str, int]:
    """Store validated messages not stored yet, in one transaction, and index them."""
    sessions = parse_import(body)
    total = sum(len(rows) for rows in sessions.values())
    async with transaction(require_database(recall.database).pool) as cur:
        inserted: list[tuple[int, str]] = []
        for session_id, rows in sessions.items():
            inserted += await db.insert_imported(cur, session_id, rows)
        if inserted:
            await conversation_index.reindex_messages(recall, cur, inserted, settings=settings)
    return {"sessions": len(sessions), "received": total, "imported": len(inserted),
            "skipped": total - len(inserted)}


async def export_conversations(database: Database) -> list[dict[str, Any]]:
    """Live messages as ``[{session_id, messages: [...]}]``, the shape import accepts."""
    sessions: dict[str, list[dict[str, Any]]] = {}
    async with cursor(database.pool) as cur:
        rows = await db.export_messages(cur)
    for row in rows:
        sessions.setdefault(row["session_id"], []).append({
            "role": row["role"], "content": row["content"], "model": row["model"],
            "created_at": row["created_at"].isoformat(), "metadata": row["metadata"] or {}})
    return [{"session_id": sid, "messages": messages} for sid, messages in sessions.items()]


async def usage_by_session(database: Database, limit: int, offset: int
                           ) -> tuple[int, list[dict[str, Any]]]:
    """(sessions with usage, one page of them by total tokens) split by usage type."""
    async with cursor(database.pool) as cur:
        return await db.usage_by_session(cur, limit, offset)
