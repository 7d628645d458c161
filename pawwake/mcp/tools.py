"""The MCP tools: JSON schemas with bilingual descriptions, each call mapped onto the existing
memory, recall and reminder services and validators.

A bad argument or a refused change is a tool result with ``isError: true`` (the model reads it
and can correct itself); only a broken envelope is a JSON-RPC error (``protocol``).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from datetime import date, datetime
from typing import Any

from aiohttp import web

from pawwake import keys
from pawwake.db import reminders
from pawwake.db.errors import DatabaseUnavailable, NotFound
from pawwake.llm.embeddings import EmbeddingError
from pawwake.memory import store
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
from pawwake.memory.search import MAX_LIMIT, search_memories
from pawwake.memory.store import MemoryConflict, memory_json
from pawwake.routes.memory_search import DEFAULT_LIMIT, BadInput, check_limit, check_query
from pawwake.routes.recall import BadSearch, parse_search

Tool = Callable[[web.Application, dict[str, Any]], Awaitable[tuple[str, dict[str, Any]]]]
MAX_ID = 2 ** 63 - 1
ADD_FIELDS = tuple(name for name in CREATE_FIELDS if name != "layer")
UPDATE_FIELDS = ("id", *EDIT_FIELDS)


class ToolRefused(Exception):
    """A call the tool cannot do as asked; the message goes back to the model."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _id_schema(en: str, zh: str) -> dict[str, Any]:
    return {"type": "integer", "minimum": 1, "description": f"{en} / {zh}"}


_CONTENT = {"type": "string", "minLength": 1, "maxLength": 20000,
            "description": "The memory, one fact or event, in the user's language / "
                           "记忆内容：一件事实或事件，用用户的语言"}
_IMPORTANCE = {"type": "integer", "minimum": 1, "maximum": 10,
               "description": "1 (trivial) to 10 (vital) / 重要度 1（琐碎）到 10（极重要）"}
_TITLE = {"type": "string", "maxLength": 200,
          "description": "Optional short title / 可选的简短标题"}
_IDS = {"type": "array", "items": {"type": "string", "minLength": 1}, "maxItems": 500}

# Schemas keep to the subset every client's model accepts (Gemini refuses type lists and
# additionalProperties): optional fields are simply left out, unknown ones refused on call.
DEFINITIONS: list[dict[str, Any]] = [
    {
        "name": "search_memories",
        "title": "Search memories / 搜索记忆",
        "description": (
            "Search the user's long-term memories (keywords and meaning, Chinese or English). "
            "Use before answering anything about the user's life, preferences or plans.\n"
            "搜索用户的长期记忆（关键词加语义，中英文皆可）。回答与用户生活、偏好或计划有关的问题前"
            "先调用。"),
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "maxLength": 2000,
                          "description": "What to look for / 要找的内容"},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT,
                          "default": DEFAULT_LIMIT,
                          "description": "How many memories at most / 最多返回几条"},
            },
            "required": ["query"],
        },
        "annotations": {"readOnlyHint": True, "openWorldHint": False},
    },
    {
        "name": "add_memory",
        "title": "Add a memory / 添加记忆",
        "description": (
            "Store a lasting fact or event about the user. With external_id, a retry with the "
            "same id returns the stored memory instead of adding a second one. remind_at makes "
            "it a reminder, delivered once when due.\n"
            "保存一条关于用户的长期事实或事件。带 external_id 时，相同 id 的重试返回已存的记忆，"
            "不会重复添加。设置 remind_at 即成为提醒，到期时送达一次。"),
        "inputSchema": {
            "type": "object",
            "properties": {
                "content": _CONTENT,
                "importance": _IMPORTANCE,
                "title": _TITLE,
                "event_date": {"type": "string",
                               "description": "When it happened or will happen, YYYY-MM-DD / "
                                              "事件日期，格式 YYYY-MM-DD"},
                "remind_at": {"type": "string",
                              "description": "Remind the user at this RFC 3339 time with a "
                                             "time zone, e.g. 2026-01-31T09:00:00+08:00 / "
                                             "提醒时间，RFC 3339 格式且带时区"},
                "external_id": {"type": "string", "minLength": 1,
                                "description": "Your own id for this memory, for safe retries / "
                                               "调用方自己的 id，用于安全重试"},
            },
            "required": ["content", "importance"],
        },
        "annotations": {"readOnlyHint": False, "destructiveHint": False,
                        "idempotentHint": False, "openWorldHint": False},
    },
    {
        "name": "update_memory",
        "title": "Update a memory / 修改记忆",
        "description": (
            "Change a memory's content, importance, layer (1 fragment, 2 event, 3 core) or "
            "title; give the id and at least one field.\n"
            "修改记忆的内容、重要度、层级（1 碎片、2 事件、3 核心）或标题；给出 id 和至少一个字段。"),
        "inputSchema": {
            "type": "object",
            "properties": {
                "id": _id_schema("The memory's id", "记忆 id"),
                "content": _CONTENT,
                "importance": _IMPORTANCE,
                "layer": {"type": "integer", "minimum": 1, "maximum": 3,
                          "description": "1 fragment, 2 event, 3 core / 1 碎片、2 事件、3 核心"},
                "title": _TITLE,
            },
            "required": ["id"],
        },
        "annotations": {"readOnlyHint": False, "destructiveHint": True,
                        "idempotentHint": True, "openWorldHint": False},
    },
    {
        "name": "archive_memory",
        "title": "Archive a memory / 归档记忆",
        "description": (
            "Archive a memory that is wrong or no longer true; it stops being recalled and can "
            "be restored from the dashboard.\n"
            "归档错误或已不成立的记忆；归档后不再被召回，可在控制台恢复。"),
        "inputSchema": {
            "type": "object",
            "properties": {"id": _id_schema("The memory's id", "记忆 id")},
            "required": ["id"],
        },
        "annotations": {"readOnlyHint": False, "destructiveHint": True,
                        "idempotentHint": False, "openWorldHint": False},
    },
    {
        "name": "search_conversations",
        "title": "Search past conversations / 搜索以往对话",
        "description": (
            "Find passages of earlier conversations in their own words. To see more, call again "
            "with the fragment_ids or session_ids already seen as exclusions.\n"
            "按原话查找以往对话的片段。想看更多时，把已看过的 fragment_id 或 session_id 作为排除项"
            "再次调用。"),
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "maxLength": 2000,
                          "description": "What was said / 要找的对话内容"},
                "exclude_fragment_ids": {**_IDS, "description": "Fragments already seen / "
                                                                "已看过的片段 id"},
                "exclude_session_ids": {**_IDS, "description": "Conversations to leave out / "
                                                               "要排除的会话 id"},
                "max_sessions": {"type": "integer", "minimum": 1, "maximum": 50, "default": 3,
                                 "description": "Fragments to return, one per conversation / "
                                                "返回的片段数（每个会话一个）"},
            },
            "required": ["query"],
        },
        "annotations": {"readOnlyHint": True, "openWorldHint": False},
    },
    {
        "name": "due_reminders",
        "title": "Due reminders / 到期提醒",
        "description": (
            "Reminders that are due now. Each is handed out once: tell the user about them.\n"
            "现在到期的提醒。每条只送达一次：请告诉用户。"),
        "inputSchema": {"type": "object", "properties": {}},
        "annotations": {"readOnlyHint": False, "destructiveHint": False,
                        "openWorldHint": False},
    },
]


_MEMORY = {"type": "object", "required": ["id", "content", "importance", "layer"],
           "properties": {"id": {"type": "integer"}, "content": {"type": "string"},
                          "importance": {"type": "integer"}, "layer": {"type": "integer"},
                          "title": {"type": ["string", "null"]},
                          "event_date": {"type": ["string", "null"]}}}
_STRINGS = {"type": "array", "items": {"type": "string"}}


def _result(required: list[str], **properties: Any) -> dict[str, Any]:
    return {"type": "object", "required": required, "properties": properties}


# What ``structuredContent`` holds on success (the official client checks it against these).
OUTPUT_SCHEMAS: dict[str, dict[str, Any]] = {
    "search_memories": _result(["query", "mode", "memories"], query={"type": "string"},
                               mode={"type": "string"},
                               memories={"type": "array", "items": _MEMORY}),
    "add_memory": _result(["inserted", "memory"], inserted={"type": "boolean"},
                          memory=_MEMORY),
    "update_memory": _result(["changed", "memory"], changed=_STRINGS, memory=_MEMORY),
    "archive_memory": _result(["archived", "memory"], archived={"type": "boolean"},
                              memory=_MEMORY),
    "search_conversations": _result(
        ["query", "mode", "fragments", "fragment_ids"], query={"type": "string"},
        mode={"type": "string"}, fragment_ids=_STRINGS,
        fragments={"type": "array", "items": _result(
            ["fragment_id", "session_id", "messages"], fragment_id={"type": "string"},
            session_id={"type": "string"}, messages={"type": "array", "items": _result(
                ["role", "content", "created_at"], role={"type": "string"},
                content={"type": "string"}, created_at={"type": "string"})})}),
    "due_reminders": _result(["reminders"], reminders={"type": "array", "items": _result(
        ["id", "content", "remind_at"], id={"type": "integer"}, content={"type": "string"},
        remind_at={"type": "string"})}),
}


def definitions() -> list[dict[str, Any]]:
    return [{**tool, "outputSchema": OUTPUT_SCHEMAS[tool["name"]]} for tool in DEFINITIONS]


def exists(name: str) -> bool:
    return name in _TOOLS


async def call(app: web.Application, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Run one tool; refusals become ``isError`` results, other failures propagate."""
    try:
        text, structured = await _TOOLS[name](app, arguments)
    except FieldError as exc:
        return _error(exc.message, exc.code, field=exc.field)
    except (BadInput, BadSearch) as exc:
        return _error(str(exc), exc.code)
    except MemoryConflict as exc:
        return _error(exc.message, exc.code)
    except NotFound as exc:
        return _error(str(exc), "not_found")
    except ToolRefused as exc:
        return _error(str(exc), exc.code)
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


def _memory_line(memory: dict[str, Any]) -> str:
    parts = [f"#{memory['id']}", f"[importance {memory['importance']}]"]
    if memory.get("event_date"):
        parts.append(f"({_day(memory['event_date'])})")
    if memory.get("title"):
        parts.append(f"{memory['title']}:")
    return " ".join(parts) + " " + memory["content"]


async def _search_memories(app: web.Application, args: dict[str, Any]
                           ) -> tuple[str, dict[str, Any]]:
    reject_unknown(args, ("query", "limit"))
    query = check_query(args.get("query"), "query")
    limit = check_limit(args.get("limit"), from_text=False)
    outcome = await search_memories(app, query, limit=limit)
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


async def _add_memory(app: web.Application, args: dict[str, Any]
                      ) -> tuple[str, dict[str, Any]]:
    reject_unknown(args, ADD_FIELDS)
    if "importance" not in args:
        raise FieldError("importance", "'importance' is required (1-10).", "missing_field")
    row, inserted = await store.create_memory(app, parse_create(args))
    verb = "Added" if inserted else "Already stored (same external_id)"
    return f"{verb}: {_memory_line(row)}", {"inserted": inserted, "memory": memory_json(row)}


async def _update_memory(app: web.Application, args: dict[str, Any]
                         ) -> tuple[str, dict[str, Any]]:
    reject_unknown(args, UPDATE_FIELDS)
    number = _memory_id(args.get("id"))
    changes = parse_edit({k: v for k, v in args.items() if k != "id"})
    row, changed = await store.edit_memory(app, number, changes)
    summary = ", ".join(changed) if changed else "nothing (same values)"
    return (f"Updated {summary}: {_memory_line(row)}",
            {"changed": changed, "memory": memory_json(row)})


async def _archive_memory(app: web.Application, args: dict[str, Any]
                          ) -> tuple[str, dict[str, Any]]:
    reject_unknown(args, ("id",))
    row = await store.archive_memory(app, _memory_id(args.get("id")))
    return f"Archived #{row['id']}.", {"archived": True, "memory": memory_json(row)}


async def _search_conversations(app: web.Application, args: dict[str, Any]
                                ) -> tuple[str, dict[str, Any]]:
    from pawwake.chat.recall import search_fragments

    reject_unknown(args, ("query", "exclude_fragment_ids", "exclude_session_ids",
                          "max_sessions"))
    params = {("q" if k == "query" else k): v for k, v in args.items()}
    options = parse_search(params, text=False, query_name="query")
    if app[keys.DATABASE] is None:
        raise DatabaseUnavailable("Conversations need the database (DATABASE_ENABLED=false).")
    settings = await app[keys.CONFIG].fresh()
    if not settings["CONVERSATION_RECALL_ENABLED"]:
        raise ToolRefused("conversation_recall_disabled",
                          "Conversation recall is off (CONVERSATION_RECALL_ENABLED=false).")
    query = options.pop("query")
    outcome = await search_fragments(app, query, settings=settings, **options)
    lines = []
    for fragment in outcome.fragments:
        lines.append(f"--- fragment {fragment['fragment_id']} "
                     f"(session {fragment['session_id']}, {fragment['latest_match_at']})")
        lines.extend(f"[{m['created_at']}] {m['role']}: {m['content']}"
                     for m in fragment["messages"])
    text = "\n".join(lines) or "No conversation matches. / 没有匹配的对话。"
    return text, {"query": query, "mode": outcome.mode, "fragments": outcome.fragments,
                  "fragment_ids": [f["fragment_id"] for f in outcome.fragments]}


async def _due_reminders(app: web.Application, args: dict[str, Any]
                         ) -> tuple[str, dict[str, Any]]:
    """Claim the due reminders and mark them delivered: this answer is their delivery."""
    reject_unknown(args, ())
    pool = store.pool_of(app)
    token = uuid.uuid4().hex
    due = await reminders.claim_due(pool, token, REMINDERS_PER_REQUEST)
    if due:
        await reminders.mark_delivered(pool, token)
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
