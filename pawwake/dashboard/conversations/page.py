"""The conversations page: list and phrase search with paging, the trash, one session's messages
with per-message edit/delete/restore, trashing and merging sessions.

Every control is a plain form (POST, then a redirect back), so the page works without script;
search is a POST so private text stays out of URLs and access logs.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from pawwake.api_error import ApiError
from pawwake.app_faces import DATABASE, RECALL, database_of, face_of, settings_of
from pawwake.conversations import manage as service
from pawwake.dashboard.i18n import request_language, translate
from pawwake.dashboard.refusals import PageRefusal
from pawwake.dashboard.render import render
from pawwake.db.errors import NotFound
from pawwake.db.pool import cursor
from pawwake.db.turn_injections import InjectedEntry, injections_of
from pawwake.text.numbers import whole_number

log = logging.getLogger(__name__)

PAGE_SIZE = 20
LIST = "dashboard/conversations.html"
DETAIL = "dashboard/conversation.html"
# Notices a redirect may ask for: key -> the numbers it carries.
NOTICES = {"edited": "conv.done_edited", "deleted": "conv.done_deleted",
           "restored": "conv.done_restored", "trashed": "conv.done_trashed",
           "session_restored": "conv.done_session_restored", "purged": "conv.done_purged",
           "merged": "conv.done_merged"}

ROLE_KEYS = {"user": "conv.role_user", "assistant": "conv.role_assistant",
             "system": "conv.role_system", "tool": "conv.role_tool"}

def _int(value: Any, default: int, low: int = 1) -> int:
    number = whole_number(value, max_digits=6)
    return default if number is None else max(low, number)


def _notice(lang: str, values: Mapping[str, object]) -> str | None:
    done = values.get("done", "")
    key = NOTICES.get(done) if isinstance(done, str) else None
    if key is None:
        return None
    return translate(lang, key, n=_int(values.get("n"), 0, 0),
                     count=_int(values.get("count"), 0, 0),
                     sessions=_int(values.get("sessions"), 0, 0))


def _list_url(request: web.Request, *, trash: bool, **extra: str) -> str:
    query = {"trash": "1"} if trash else {}
    return str(request.app.router["conversations"].url_for().with_query({**query, **extra}))


async def _render_list(request: web.Request, *, query: str, trash: bool, page: int,
                       values: Mapping[str, object], status: int = 200) -> web.Response:
    lang = request_language(request)
    result = await service.list_conversations(face_of(request, RECALL), query=query, trash=trash,
                                              limit=PAGE_SIZE, offset=(page - 1) * PAGE_SIZE,
                                              settings=await settings_of(request))
    pages = max(1, -(-result["total"] // PAGE_SIZE))
    rows = [{**item, "number": (page - 1) * PAGE_SIZE + i}
            for i, item in enumerate(result["items"], start=1)]
    return render(request, LIST, {
        "rows": rows, "total": result["total"], "q": query, "trash": trash, "page": page,
        "pages": pages, "notice": _notice(lang, values)}, status=status)


async def conversations(request: web.Request) -> web.Response:
    """The newest sessions, or the trash with ``trash=1``; ``page=N`` pages."""
    return await _render_list(request, query="", trash=request.query.get("trash") == "1",
                              page=_int(request.query.get("page"), 1), values=request.query)


async def search(request: web.Request) -> web.Response:
    form = await request.post()
    query = str(form.get("q", "")).strip()[:500]
    return await _render_list(request, query=query, trash=form.get("trash") == "1",
                              page=_int(form.get("page"), 1), values=form)


async def view_session(request: web.Request) -> web.Response:
    """One session's messages, deleted ones included (they can be restored here)."""
    lang = request_language(request)
    session_id = service.session_id_of(request.query.get("session"), "session")
    rows = await service.session_messages(database_of(request), session_id, include_deleted=True)
    database = face_of(request, DATABASE)
    replies = [row["id"] for row in rows if row["role"] == "assistant"]
    injected: dict[int, list[InjectedEntry]] = {}
    if database is not None:
        async with cursor(database.pool) as cur:
            injected = await injections_of(cur, replies)
    messages = [{**row, "number": number, "role_key": ROLE_KEYS[row["role"]],
                 "injected": injected.get(row["id"])}
                for number, row in enumerate(rows, start=1)]
    in_trash = all(row["deleted_at"] is not None for row in rows)
    return render(request, DETAIL, {"session_id": session_id, "messages": messages,
                                    "in_trash": in_trash, "notice": _notice(lang, request.query)})


def _view_url(request: web.Request, session_id: str, **extra: str) -> str:
    return str(request.app.router["conversation_view"].url_for().with_query(
        {"session": session_id, **extra}))


async def message_action(request: web.Request) -> web.StreamResponse:
    """Save, delete or restore one message, then show the session again."""
    form = await request.post()
    session_id = service.session_id_of(form.get("session"), "session")
    message_id = _int(form.get("message"), 0)
    number = str(_int(form.get("number"), 0, 0))
    action = form.get("action")
    if message_id <= 0:
        raise NotFound("message")
    if action == "save":
        content = form.get("content")
        if not isinstance(content, str) or not content.strip():
            raise PageRefusal("conv.error_empty")
        await service.edit_message(face_of(request, RECALL), message_id,
                                   service.content_of(content),
                                   settings=await settings_of(request))
        done = "edited"
    elif action in ("delete", "restore"):
        await service.set_message_deleted(database_of(request), message_id, action == "delete")
        done = "deleted" if action == "delete" else "restored"
    else:
        raise ApiError("invalid_action", "Unknown action.")
    raise web.HTTPSeeOther(_view_url(request, session_id, done=done, n=number))


async def session_action(request: web.Request) -> web.StreamResponse:
    """Move one session to the trash (back to the list) or restore it (back to the session)."""
    form = await request.post()
    session_id = service.session_id_of(form.get("session"), "session")
    action = form.get("action")
    if action == "trash":
        count = await service.trash_session(database_of(request), session_id)
        raise web.HTTPSeeOther(_list_url(request, trash=False, done="trashed", count=str(count)))
    if action == "restore":
        count = await service.restore_session(database_of(request), session_id)
        raise web.HTTPSeeOther(_view_url(request, session_id, done="session_restored",
                                         count=str(count)))
    raise ApiError("invalid_action", "Unknown action.")


async def bulk_action(request: web.Request) -> web.StreamResponse:
    """Trash, restore, purge or merge the sessions ticked in the list."""
    form = await request.post()
    trash = form.get("trash") == "1"
    selected = [service.session_id_of(v, "session") for v in form.getall("session", [])]
    if not selected:
        raise PageRefusal("conv.error_select")
    action = form.get("action")
    if action == "merge":
        target = form.get("target")
        if len(set(selected)) < 2 or target not in selected:
            raise PageRefusal("conv.error_merge")
        merged = await service.merge_sessions(database_of(request), selected, str(target))
        raise web.HTTPSeeOther(_list_url(
            request, trash=False, done="merged", sessions=str(len(merged["source_ids"]) + 1),
            count=str(merged["moved"]["messages"])))
    if action == "restore":
        count = await service.restore_sessions(database_of(request), selected)
        raise web.HTTPSeeOther(_list_url(request, trash=trash, done="session_restored",
                                         count=str(count)))
    if action in ("trash", "purge"):
        result = await service.batch_delete(database_of(request), selected, permanent=action == "purge")
        extra = ({"done": "purged", "sessions": str(result["sessions"])} if action == "purge"
                 else {"done": "trashed", "count": str(result["messages"])})
        raise web.HTTPSeeOther(_list_url(request, trash=trash, **extra))
    raise ApiError("invalid_action", "Unknown action.")


def setup(dashboard: web.Application) -> None:
    add = dashboard.router
    add.add_get("/conversations", conversations, name="conversations")
    add.add_post("/conversations/search", search, name="conversations_search")
    add.add_get("/conversations/view", view_session, name="conversation_view")
    add.add_post("/conversations/message", message_action, name="conversation_message")
    add.add_post("/conversations/session", session_action, name="conversation_session")
    add.add_post("/conversations/bulk", bulk_action, name="conversations_bulk")
