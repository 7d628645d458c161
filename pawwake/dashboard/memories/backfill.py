"""The embedding backfill panel: start it, watch a progress bar that polls itself, and confirm a
rebuild when the configured embedding provider no longer matches the stored vectors."""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web

from pawwake.app_faces import MEMORY_EMBEDDING, face_of, settings_of
from pawwake.dashboard.i18n import request_language, translate
from pawwake.dashboard.render import is_htmx, render
from pawwake.db.errors import DatabaseUnavailable
from pawwake.llm.embeddings import EmbeddingError
from pawwake.memory.backfill import (
    QUESTION_PART,
    RebuildNeedsConfirmation,
    VectorsDisabled,
    backfill_status,
    start_backfill,
)

log = logging.getLogger(__name__)

PANEL = "partials/_memory_backfill.html"
RUNNING = ("queued", "running")
STATUS_KEYS = {status: f"backfill.status_{status}"
               for status in ("idle", "queued", "running", "done", "failed")}


async def backfill_context(request: web.Request, *, problem: str | None = None
                           ) -> dict[str, Any]:
    """What the panel shows now; ``problem`` is a message about the last start attempt."""
    try:
        status = await backfill_status(face_of(request, MEMORY_EMBEDDING), settings=await settings_of(request))
    except DatabaseUnavailable:
        return {"available": False, "problem": problem}
    done, total = int(status["done"]), int(status["total"])
    questions = status["questions"]
    asking = status["part"] == QUESTION_PART  # the job has moved on to the written questions
    shown_done, shown_total = ((questions["done"], questions["total"]) if asking
                               else (done, total))
    return {
        "available": True,
        "status": status["status"],
        "status_key": STATUS_KEYS.get(status["status"], "backfill.status_idle"),
        "running": status["status"] in RUNNING,
        "done": shown_done,
        "total": shown_total,
        "count_key": "backfill.count_questions" if asking else "backfill.count",
        "questions": questions,
        "percent": 0 if shown_total == 0 else min(100, shown_done * 100 // shown_total),
        "complete": done >= total and questions["done"] >= questions["total"],
        "vectors_enabled": status["vectors_enabled"],
        "needs_rebuild": status["needs_rebuild"],
        "configured": status["provenance"],
        "stored": status["stored_provenance"],
        "last_error": status["last_error"] if status["status"] == "failed" else None,
        "problem": problem,
    }


def _panel_url(request: web.Request) -> str:
    return str(request.app.router["memories"].url_for()) + "#backfill"


async def panel(request: web.Request) -> web.Response:
    """The panel (htmx polls this every second while a backfill runs)."""
    if not is_htmx(request):
        raise web.HTTPSeeOther(_panel_url(request))
    return render(request, PANEL, {"backfill": await backfill_context(request)})


async def start(request: web.Request) -> web.Response:
    """Queue the backfill; ``confirm_rebuild=1`` replaces vectors of another provider."""
    lang = request_language(request)
    form = await request.post()
    confirm = form.get("confirm_rebuild") == "1"
    problem, status = None, 200
    try:
        await start_backfill(face_of(request, MEMORY_EMBEDDING), confirm_rebuild=confirm,
                             settings=await settings_of(request))
    except RebuildNeedsConfirmation:
        problem, status = translate(lang, "backfill.confirm_needed"), 409
    except VectorsDisabled:
        problem, status = translate(lang, "backfill.disabled"), 409
    except EmbeddingError as exc:
        log.warning("backfill could not start: %s", exc)
        problem, status = translate(lang, "backfill.provider_failed", detail=str(exc)), 502
    except DatabaseUnavailable:
        problem, status = translate(lang, "memories.no_database"), 503
    if status == 200 and not is_htmx(request):
        raise web.HTTPSeeOther(_panel_url(request))
    context = {"backfill": await backfill_context(request, problem=problem)}
    return render(request, "dashboard/memories_backfill.html", context, fragment=PANEL,
                  status=status)


def setup(dashboard: web.Application) -> None:
    dashboard.router.add_get("/memories/backfill", panel, name="memory_backfill")
    dashboard.router.add_post("/memories/backfill", start, name="memory_backfill_start")
