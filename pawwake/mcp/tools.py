"""The MCP tools' behaviour: each call mapped onto the existing memory, recall and reminder
services and validators (their schemas and descriptions: ``schemas``).

A bad argument or a refused change is a tool result with ``isError: true`` (the model reads it
and can correct itself); only a broken envelope is a JSON-RPC error (``protocol``).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

from pawwake.api_error import ApiError
from pawwake.database import Database, require_database
from pawwake.db import reminders
from pawwake.db.errors import DatabaseUnavailable, NotFound
from pawwake.db.pool import cursor
from pawwake.llm.embeddings import EmbeddingError
from pawwake.memory import store
from pawwake.memory.faces import MemorySearch, MemoryWrites
from pawwake.memory.fields import (
    CREATE_FIELDS,
    EDIT_FIELDS,
    FieldError,
    parse_create,
    parse_edit,
    parse_int,
    reject_unknown,
)
from pawwake.memory.inject import REMINDERS_PER_REQUEST
from pawwake.memory.search import search_memories
from pawwake.memory.search_params import check_limit, check_query
from pawwake.memory.store import memory_json
from pawwake.recall.faces import ConversationRecall
from pawwake.recall.params import parse_search
from pawwake.recall.search import search_fragments

if TYPE_CHECKING:
    from pawwake.settings import Settings


@dataclass(frozen=True)
class McpTools:
    """What the tools work with: memory search and writes, conversation recall, and the
    database itself (archiving, claiming due reminders)."""

    search: MemorySearch
    writes: MemoryWrites
    recall: ConversationRecall
    database: Database | None


Tool = Callable[[McpTools, "Settings", dict[str, Any]], Awaitable[tuple[str, dict[str, Any]]]]
MAX_ID = 2 ** 63 - 1
ADD_FIELDS = tuple(name for name in CREATE_FIELDS if name != "layer")
UPDATE_FIELDS = ("id", *EDIT_FIELDS)


def exists(name: str) -> bool:
    return name in _TOOLS


async def call(tools: McpTools, settings: Settings, name: str, arguments: dict[str, Any]
               ) -> dict[str, Any]:
    """Run one tool; refusals become ``isError`` results, other failures propagate."""
    try:
        text, structured = await _TOOLS[name](tools, settings, arguments)
    except ApiError as exc:  # a bad argument or a refused change
        return _error(exc.message, exc.code, field=exc.field)
    except NotFound as exc:
        return _error(str(exc), "not_found")
    except DatabaseUnavailable as exc:
        return _error(str(exc), "database_unavailable")
    except EmbeddingError as exc:
        return _error(f"Embedding provider failed: {exc}", "embedding_unavailable")
    return {"content": [{"type": "text", "text": text}], "structuredContent": structured,
            "isError": False}


def _error(message: str, code: str, *, field: str | None = None) -> dict[str, Any]:
    detail: dict[str, Any] = {"code": code, "message": message}
    if field:
        detail["field"] = field
    return {"content": [{"type": "text", "text": f"Error ({code}): {message}"}],
            "structuredContent": {"error": detail}, "isError": True}


def _memory_id(value: Any) -> int:
    if value is None:
        raise FieldError("id", "'id' is required.", "missing_field")
    return parse_int(value, "id", 1, MAX_ID)


def _day(value: Any) -> str | None:
    return value.isoformat() if isinstance(value, (date, datetime)) else value


def _memory_line(memory: Mapping[str, object]) -> str:
    """One memory as a line: a stored row, or a search hit as the tool shows it."""
    parts = [f"#{memory['id']}", f"[importance {memory['importance']}]"]
    if memory.get("event_date"):
        parts.append(f"({_day(memory['event_date'])})")
    if memory.get("title"):
        parts.append(f"{memory['title']}:")
    return " ".join([*parts, str(memory["content"])])


async def _search_memories(tools: McpTools, settings: Settings, args: dict[str, Any]
                           ) -> tuple[str, dict[str, Any]]:
    reject_unknown(args, ("query", "limit"))
    query = check_query(args.get("query"), "query")
    limit = check_limit(args.get("limit"), from_text=False)
    outcome = await search_memories(tools.search, query, limit=limit, settings=settings)
    found = [{
        "id": r.id, "content": r.memory["content"], "title": r.memory["title"],
        "importance": r.memory["importance"], "layer": r.memory["layer"],
        "event_date": _day(r.memory["event_date"]),
        "created_at": r.memory["created_at"].isoformat(), "score": round(r.score, 4),
    } for r in outcome.results]
    lines = [_memory_line(m) for m in found] or ["No memory matches. / 没有匹配的记忆。"]
    if outcome.warning:
        lines.append(f"({outcome.warning})")
    return "\n".join(lines), {"query": query, "mode": outcome.mode, "memories": found}


async def _add_memory(tools: McpTools, settings: Settings, args: dict[str, Any]
                      ) -> tuple[str, dict[str, Any]]:
    reject_unknown(args, ADD_FIELDS)
    if "importance" not in args:
        raise FieldError("importance", "'importance' is required (1-10).", "missing_field")
    row, inserted = await store.create_memory(tools.writes, parse_create(args))
    verb = "Added" if inserted else "Already stored (same external_id)"
    return f"{verb}: {_memory_line(row)}", {"inserted": inserted, "memory": memory_json(row)}


async def _update_memory(tools: McpTools, settings: Settings, args: dict[str, Any]
                         ) -> tuple[str, dict[str, Any]]:
    reject_unknown(args, UPDATE_FIELDS)
    number = _memory_id(args.get("id"))
    changes = parse_edit({k: v for k, v in args.items() if k != "id"})
    row, changed = await store.edit_memory(tools.writes, number, changes)
    summary = ", ".join(changed) if changed else "nothing (same values)"
    return (f"Updated {summary}: {_memory_line(row)}",
            {"changed": changed, "memory": memory_json(row)})


async def _archive_memory(tools: McpTools, settings: Settings, args: dict[str, Any]
                          ) -> tuple[str, dict[str, Any]]:
    reject_unknown(args, ("id",))
    row = await store.archive_memory(require_database(tools.database), _memory_id(args.get("id")))
    return f"Archived #{row['id']}.", {"archived": True, "memory": memory_json(row)}


async def _search_conversations(tools: McpTools, settings: Settings, args: dict[str, Any]
                                ) -> tuple[str, dict[str, Any]]:
    reject_unknown(args, ("query", "exclude_fragment_ids", "exclude_session_ids",
                          "max_sessions"))
    params = {("q" if k == "query" else k): v for k, v in args.items()}
    options = parse_search(params, text=False, query_name="query")
    if tools.database is None:
        raise DatabaseUnavailable("Conversations need the database (DATABASE_ENABLED=false).")
    if not settings.CONVERSATION_RECALL_ENABLED:
        raise ApiError("conversation_recall_disabled",
                          "Conversation recall is off (CONVERSATION_RECALL_ENABLED=false).")
    query = options.pop("query")
    outcome = await search_fragments(tools.recall, query, settings=settings, **options)
    lines = []
    for fragment in outcome.fragments:
        lines.append(f"--- fragment {fragment['fragment_id']} "
                     f"(session {fragment['session_id']}, {fragment['latest_match_at']})")
        lines.extend(f"[{m['created_at']}] {m['role']}: {m['content']}"
                     for m in fragment["messages"])
    text = "\n".join(lines) or "No conversation matches. / 没有匹配的对话。"
    return text, {"query": query, "mode": outcome.mode, "fragments": outcome.fragments,
                  "fragment_ids": [f["fragment_id"] for f in outcome.fragments]}


async def _due_reminders(tools: McpTools, settings: Settings, args: dict[str, Any]
                         ) -> tuple[str, dict[str, Any]]:
    """Claim the due reminders and mark them delivered: this answer is their delivery."""
    reject_unknown(args, ())
    pool = require_database(tools.database).pool
    token = uuid.uuid4().hex
    async with cursor(pool) as cur:
        due = await reminders.claim_due(cur, token, REMINDERS_PER_REQUEST)
        if due:
            await reminders.mark_delivered(cur, token)
    shown = [{"id": r["id"], "content": r["content"], "remind_at": r["remind_at"].isoformat(),
              "event_date": _day(r["event_date"])} for r in due]
    lines = [f"#{r['id']} (due {r['remind_at']}) {r['content']}" for r in shown]
    return "\n".join(lines) or "No reminder is due. / 没有到期的提醒。", {"reminders": shown}


_TOOLS: dict[str, Tool] = {
    "search_memories": _search_memories,
    "add_memory": _add_memory,
    "update_memory": _update_memory,
    "archive_memory": _archive_memory,
    "search_conversations": _search_conversations,
    "due_reminders": _due_reminders,
}
