"""Conversation management API: list, search, edit, trash, restore, merge, import, export."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiohttp import web

from pawwake.api_error import ApiError
from pawwake.app_faces import CONFIG, RECALL, database_of, face_of, settings_of
from pawwake.conversations import manage as service
from pawwake.db.conversation_admin import MessageRow
from pawwake.db.errors import NotFound
from pawwake.local_time import file_stamp, zone_of
from pawwake.routes.api_body import Parser, read_fields, read_json, read_object
from pawwake.routes.database_required import database_required
from pawwake.routes.json_reply import json_body
from pawwake.text.numbers import whole_number


def _session_ids(key: str) -> Callable[[Any], list[str]]:
    def parse(ids: Any) -> list[str]:
        if not isinstance(ids, list) or not ids or len(ids) > service.MAX_BATCH:
            raise ApiError(f"invalid_{key}",
                           f"{key} must be a list of 1 to {service.MAX_BATCH} ids.")
        return [service.session_id_of(v, key) for v in ids]
    return parse


def _permanent(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ApiError("invalid_permanent", "permanent must be true or false.")
    return value


BATCH_DELETE: dict[str, Parser] = {"session_ids": _session_ids("session_ids"), "permanent": _permanent}
MERGE: dict[str, Parser] = {"source_ids": _session_ids("source_ids"),
         "target_id": lambda value: service.session_id_of(value, "target_id")}


def _int(request: web.Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    value = whole_number(raw)
    if value is None:
        raise ApiError(f"invalid_{name}", f"{name} must be a whole number.")
    if not low <= value <= high:
        raise ApiError(f"invalid_{name}", f"{name} must be between {low} and {high}.")
    return value


def _flag(request: web.Request, name: str) -> bool:
    raw = request.query.get(name, "false").lower()
    if raw not in ("true", "false", "1", "0"):
        raise ApiError(f"invalid_{name}", f"{name} must be true or false.")
    return raw in ("true", "1")


def _message_id(request: web.Request) -> int:
    value = whole_number(request.match_info["message_id"])
    if value is None:
        raise ApiError("invalid_message_id", "The message id must be a whole number.")
    if value <= 0:
        raise NotFound(f"No such message {value}.")
    return value


def _message(row: MessageRow) -> dict[str, object]:
    return {"id": row["id"], "session_id": row["session_id"], "role": row["role"],
            "content": row["content"], "model": row["model"], "created_at": row["created_at"],
            "metadata": row["metadata"], "deleted_at": row["deleted_at"],
            "source": row["source"]}


@database_required("Conversations")
async def list_conversations(request: web.Request) -> web.StreamResponse:
    query = request.query.get("q", "").strip()
    if len(query) > 500:
        raise ApiError("query_too_long", "q is limited to 500 characters.")
    page = await service.list_conversations(face_of(request, RECALL), query=query, trash=_flag(request,
                                                                                           "trash"),
        limit=_int(request, "limit", 20, 1, service.MAX_PAGE),
        offset=_int(request, "offset", 0, 0, 10_000_000), settings=await settings_of(request))
    return json_body(page)


@database_required("Conversations")
async def session_messages(request: web.Request) -> web.StreamResponse:
    session_id = request.match_info["session_id"]
    rows = await service.session_messages(database_of(request), session_id,
                                          include_deleted=_flag(request, "include_deleted"))
    return json_body({"session_id": session_id, "messages": [_message(r) for r in rows]})


@database_required("Conversations")
async def edit_message(request: web.Request) -> web.StreamResponse:
    message_id = _message_id(request)
    body = await read_object(request, max_bytes=None)
    if set(body) != {"content"}:
        raise ApiError("invalid_body", "Send {\"content\": \"...\"}.")
    row = await service.edit_message(face_of(request, RECALL), message_id,
                                     service.content_of(body["content"]),
                                     settings=await settings_of(request))
    return json_body(_message(row))


@database_required("Conversations")
async def delete_message(request: web.Request) -> web.StreamResponse:
    row = await service.set_message_deleted(database_of(request), _message_id(request), True)
    return json_body(_message(row))


@database_required("Conversations")
async def restore_message(request: web.Request) -> web.StreamResponse:
    row = await service.set_message_deleted(database_of(request), _message_id(request), False)
    return json_body(_message(row))


@database_required("Conversations")
async def delete_session(request: web.Request) -> web.StreamResponse:
    session_id = request.match_info["session_id"]
    if _flag(request, "permanent"):
        counts = await service.purge_session(database_of(request), session_id)
        return json_body({"session_id": session_id, "permanent": True, **counts})
    trashed = await service.trash_session(database_of(request), session_id)
    return json_body({"session_id": session_id, "permanent": False, "messages": trashed})


@database_required("Conversations")
async def restore_session(request: web.Request) -> web.StreamResponse:
    session_id = request.match_info["session_id"]
    restored = await service.restore_session(database_of(request), session_id)
    return json_body({"session_id": session_id, "messages": restored})


@database_required("Conversations")
async def batch_delete(request: web.Request) -> web.StreamResponse:
    body = await read_fields(request, BATCH_DELETE, {"permanent": False}, max_bytes=None)
    return json_body(await service.batch_delete(database_of(request), body["session_ids"],
                                                permanent=body["permanent"]))


@database_required("Conversations")
async def merge_sessions(request: web.Request) -> web.StreamResponse:
    body = await read_fields(request, MERGE, max_bytes=None)
    return json_body(await service.merge_sessions(database_of(request), body["source_ids"],
                                                  body["target_id"]))


@database_required("Conversations")
async def import_conversations(request: web.Request) -> web.StreamResponse:
    body = await read_json(request, max_bytes=None)
    result = await service.import_conversations(face_of(request, RECALL), body,
                                                settings=await settings_of(request))
    return json_body(result, status=201 if result["imported"] else 200)


@database_required("Conversations")
async def export_conversations(request: web.Request) -> web.StreamResponse:
    sessions = await service.export_conversations(database_of(request))
    stamp = file_stamp(zone_of(face_of(request, CONFIG).current()))
    response = json_body(sessions)
    response.headers["Content-Disposition"] = (
        f'attachment; filename="pawwake-conversations-{stamp}.json"')
    return response


def setup(app: web.Application) -> None:
    """Fixed paths come before ``{session_id}`` ones so they are never read as a session."""
    add = app.router
    add.add_get("/conversations", list_conversations, name="conversations")
    add.add_get("/conversations/export", export_conversations, name="conversations_export")
    add.add_post("/conversations/import", import_conversations, name="conversations_import")
    add.add_post("/conversations/batch-delete", batch_delete,
                 name="conversations_batch_delete")
    add.add_post("/admin/merge-sessions", merge_sessions, name="merge_sessions")
    add.add_put("/conversations/messages/{message_id}", edit_message,
                name="conversation_message")
    add.add_delete("/conversations/messages/{message_id}", delete_message,
                   name="conversation_message_delete")
    add.add_post("/conversations/messages/{message_id}/restore", restore_message,
                 name="conversation_message_restore")
    add.add_get("/conversations/{session_id}/messages", session_messages,
                name="conversation_messages")
    add.add_delete("/conversations/{session_id}", delete_session, name="conversation")
    add.add_post("/conversations/{session_id}/restore", restore_session,
                 name="conversation_restore")
