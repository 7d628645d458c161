"""The MCP tools as clients list them: input schemas, bilingual descriptions (the model reads
them to decide when to call), annotations and the shape of each structured result."""

from __future__ import annotations

from typing import Any

from pawwake.memory.search import MAX_LIMIT
from pawwake.memory.search_params import DEFAULT_LIMIT


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
