"""The export page: download the memories' JSON backup as a file (when links dangle, show them
and offer the repair, after a confirmation, then the download again), and every stored
conversation as JSON (the shape ``POST /api/conversations/import`` takes back)."""

from __future__ import annotations

import json
import logging
from typing import Any

from aiohttp import web

from pawwake.app_faces import CONFIG, database_of, face_of
from pawwake.conversations import manage as conversations
from pawwake.dashboard.i18n import request_language, translate
from pawwake.dashboard.render import render
from pawwake.db.errors import DatabaseUnavailable, NotFound
from pawwake.db.memory_rows import DanglingLink
from pawwake.db.pool import UNAVAILABLE_ERRORS, cursor
from pawwake.db.stats import dashboard_counts
from pawwake.local_time import file_stamp, zone_of
from pawwake.memory import backup, store

log = logging.getLogger(__name__)

PAGE = "dashboard/export.html"
PANEL = "partials/_memory_export.html"
MAX_BROKEN_SHOWN = 50
CONTENT_CHARS = 80


def _panel(**values: Any) -> dict[str, Any]:
    base = {"broken": None, "broken_total": 0, "repaired": None, "confirm_repair": False,
            "error": None, "stats": None}
    return {**base, **values}


async def _stats(request: web.Request) -> dict[str, Any] | None:
    try:
        return await store.layer_stats(database_of(request))
    except DatabaseUnavailable:
        return None


async def _conversation_counts(request: web.Request) -> dict[str, Any] | None:
    try:
        async with cursor(database_of(request).pool) as cur:
            counts = await dashboard_counts(cur)
    except UNAVAILABLE_ERRORS:  # the page still offers the memories' backup
        return None
    return {"sessions": counts["sessions"], "messages": counts["messages"]}


async def export_page(request: web.Request) -> web.Response:
    stats = await _stats(request)
    error = None if stats is not None else translate(request_language(request),
                                                     "memories.no_database")
    return render(request, PAGE, {"export": _panel(stats=stats, error=error),
                                  "conversations": await _conversation_counts(request)},
                  status=200 if stats is not None else 503)


async def download_conversations(request: web.Request) -> web.StreamResponse:
    """Every live conversation as JSON, as ``GET /api/conversations/export`` gives it."""
    try:
        sessions = await conversations.export_conversations(database_of(request))
    except DatabaseUnavailable:
        return render(request, PAGE, {"export": _panel(error=translate(
            request_language(request), "memories.no_database"))}, status=503)
    stamp = file_stamp(zone_of(face_of(request, CONFIG).current()))
    log.info("conversations exported from the dashboard: %s sessions", len(sessions))
    return web.Response(text=json.dumps(sessions, ensure_ascii=False, indent=1),
                        content_type="application/json", charset="utf-8",
                        headers={"Content-Disposition":
                                 f'attachment; filename="pawwake-conversations-{stamp}.json"'})


async def _broken_view(request: web.Request, broken: list[DanglingLink]
                       ) -> list[dict[str, Any]]:
    """Each memory with dangling links, by its content and what is missing (no ids)."""
    shown = []
    for number, item in enumerate(broken[:MAX_BROKEN_SHOWN], 1):
        try:
            content = (await store.get_memory(database_of(request), int(item["id"])))["content"]
        except NotFound:
            content = ""
        if len(content) > CONTENT_CHARS:
            content = content[:CONTENT_CHARS] + "…"
        shown.append({"n": number, "content": content,
                      "missing_sources": len(item["missing_sources"] or []),
                      "missing_successor": item["missing_successor"] is not None})
    return shown


async def download(request: web.Request) -> web.StreamResponse:
    """The backup as an attachment; refused (409, with the list) while links dangle."""
    lang = request_language(request)
    try:
        document = await backup.export_backup(database_of(request))
    except backup.BrokenLinks as exc:
        panel = _panel(broken=await _broken_view(request, exc.broken),
                       broken_total=len(exc.broken), stats=await _stats(request))
        return render(request, PAGE, {"export": panel}, fragment=PANEL, status=409)
    except DatabaseUnavailable:
        return render(request, PAGE, {"export": _panel(error=translate(
            lang, "memories.no_database"))}, fragment=PANEL, status=503)
    stamp = file_stamp(zone_of(face_of(request, CONFIG).current()))
    body = json.dumps(document, ensure_ascii=False, indent=1)
    log.info("backup exported from the dashboard: %s memories", len(document["memories"]))
    return web.Response(text=body, content_type="application/json", charset="utf-8",
                        headers={"Content-Disposition":
                                 f'attachment; filename="pawwake-memories-{stamp}.json"'})


async def repair(request: web.Request) -> web.Response:
    """Drop references to rows that no longer exist, after an explicit confirmation."""
    form = await request.post()
    if form.get("confirmed") != "1":
        return render(request, PAGE, {"export": _panel(confirm_repair=True,
                                                       stats=await _stats(request))},
                      fragment=PANEL)
    try:
        report = await backup.repair_links(database_of(request))
    except DatabaseUnavailable:
        return render(request, PAGE, {"export": _panel(error=translate(
            request_language(request), "memories.no_database"))}, fragment=PANEL, status=503)
    repaired = {"memories": report["repaired"], "sources": report["removed_sources"],
                "successors": report["cleared_successors"]}
    return render(request, PAGE, {"export": _panel(repaired=repaired,
                                                   stats=await _stats(request))},
                  fragment=PANEL)


def setup(dashboard: web.Application) -> None:
    add = dashboard.router
    add.add_get("/export", export_page, name="memories_export")
    add.add_get("/export/download", download, name="memories_export_download")
    add.add_post("/export/repair", repair, name="memories_export_repair")
    add.add_get("/export/conversations", download_conversations,
                name="conversations_export_download")
