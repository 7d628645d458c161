"""The partition threads page: rotation progress of the active thread, every thread with
switch/delete, create (optionally inheriting a summary), rename, and the summary editor.

Plain forms (POST, then a redirect back), so the page works without script.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from pawwake.api_error import ApiError
from pawwake.app_faces import CONFIG, database_of, face_of, settings_of
from pawwake.dashboard.i18n import request_language, translate
from pawwake.dashboard.refusals import PageRefusal
from pawwake.dashboard.render import render
from pawwake.db.errors import Conflict
from pawwake.partition import threads as service
from pawwake.partition.threads import session_id_of

log = logging.getLogger(__name__)

TEMPLATE = "dashboard/threads.html"
NOTICES = {"switched": "threads.done_switched", "created": "threads.done_created",
           "renamed": "threads.done_renamed", "deleted": "threads.done_deleted",
           "summary_saved": "threads.done_summary_saved",
           "summary_cleared": "threads.done_summary_cleared"}

def _page_url(request: web.Request, **query: str) -> str:
    return str(request.app.router["threads"].url_for().with_query(query))


async def threads_page(request: web.Request) -> web.Response:
    """Status, thread list and the summary of the thread named by ``summary`` (default: the
    active one)."""
    lang = request_language(request)
    status = await service.status(database_of(request), settings=await settings_of(request))
    if not status["enabled"]:
        # Off: no thread is continued, so there is nothing to switch, delete or edit; every
        # stored session would show up as a "thread". The page explains instead.
        return render(request, TEMPLATE, {"status": status, "threads": [], "summary": None,
                                          "progress": 0, "progress_max": 0, "notice": None})
    threads = await service.list_threads(database_of(request), settings=await settings_of(request))
    wanted = request.query.get("summary") or status["active_thread"]
    summary = await service.get_summary(database_of(request), session_id_of(wanted, "summary"))
    x2 = 2 * status["x"]
    key = NOTICES.get(request.query.get("done", ""))
    return render(request, TEMPLATE, {
        "status": status, "threads": threads, "summary": summary,
        "progress": min(x2, status["rounds_live"]), "progress_max": x2,
        "notice": translate(lang, key) if key else None})


async def _apply(request: web.Request, action: str, form: Mapping[str, Any]
                 ) -> dict[str, str]:
    """Run one form action; returns the query of the page to come back to."""
    if action == "switch":
        await service.switch(face_of(request, CONFIG), session_id_of(form.get("thread"), "thread"))
        return {"done": "switched"}
    if action == "delete":
        await service.delete(database_of(request), session_id_of(form.get("thread"), "thread"),
                             settings=await settings_of(request))
        return {"done": "deleted"}
    if action == "create":
        source = form.get("inherit") or None
        await service.create(database_of(request), session_id_of(form.get("thread"), "thread"),
                             session_id_of(source, "inherit") if source else None)
        return {"done": "created"}
    if action == "rename":
        await service.rename(database_of(request), face_of(request, CONFIG), session_id_of(form.get("thread"), "thread"),
                             session_id_of(form.get("new_id"),
                                           "new_id"), settings=await settings_of(request))
        return {"done": "renamed"}
    if action in ("summary_save", "summary_clear"):
        thread = session_id_of(form.get("thread"), "thread")
        if action == "summary_save":
            await service.put_summary(database_of(request), thread,
                                      service.summary_text(form.get("summary")))
            return {"done": "summary_saved", "summary": thread}
        await service.clear_summary(database_of(request), thread)
        return {"done": "summary_cleared", "summary": thread}
    raise ApiError("invalid_action", "Unknown action.")


def _refusal(action: str, form: Mapping[str, Any]) -> PageRefusal:
    """The service's refusal in the page's words: deleting the active thread (another tab
    may have switched to it), or a create/rename onto a thread id that is taken."""
    if action == "delete":
        return PageRefusal("threads.error_active", 409)
    taken = form.get("new_id") if action == "rename" else form.get("thread")
    return PageRefusal("threads.error_exists", 409, thread=str(taken))


async def thread_action(request: web.Request) -> web.StreamResponse:
    """One form action, then back to the page with a notice."""
    form = await request.post()
    action = str(form.get("action") or "")
    try:
        query = await _apply(request, action, form)
    except Conflict:
        raise _refusal(action, form) from None
    raise web.HTTPSeeOther(_page_url(request, **query))


def setup(dashboard: web.Application) -> None:
    add = dashboard.router
    add.add_get("/threads", threads_page, name="threads")
    add.add_post("/threads/action", thread_action, name="threads_action")
