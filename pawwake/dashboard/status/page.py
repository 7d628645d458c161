"""The status page: version, the database's mode, what is switched on, how much is stored."""

from __future__ import annotations

from typing import Any

from aiohttp import web
from yarl import URL

from pawwake import __version__, job_admin
from pawwake.app_faces import (
    DATABASE,
    MEMORY_EMBEDDING,
    TURN_SPOOL,
    UPSTREAM_HEALTH,
    face_of,
    settings_of,
)
from pawwake.dashboard.i18n import request_language, translate
from pawwake.dashboard.render import render
from pawwake.dashboard.status.health import health_lines
from pawwake.database import connected_database, database_state
from pawwake.db.pool import UNAVAILABLE_ERRORS, cursor
from pawwake.db.stats import dashboard_counts
from pawwake.local_time import local_minute, zone_of
from pawwake.search.vector_backend import configured_backend
from pawwake.text.numbers import whole_number
from pawwake.upgrade.status import adoption_summary


async def status(request: web.Request) -> web.Response:
    settings = await settings_of(request)
    database = face_of(request, DATABASE)
    state = database_state(database)
    connected = connected_database(database)
    on = connected is not None
    context: dict[str, Any] = {
        "version": __version__,
        "database": database.kind if database is not None else "disabled",
        "database_state": state,
        "database_error": database.last_error if database is not None and state != "ready"
        else None,
        "vectors": configured_backend(settings, connected.pgvector) if connected else None,
        "switches": [
            ("status.memory", on and settings.MEMORY_ENABLED),
            ("status.partition", on and settings.CACHE_PARTITION_ENABLED),
            ("status.recall", on and settings.CONVERSATION_RECALL_ENABLED),
        ],
        "upstream_host": URL(settings.api_base).host or settings.api_base,
        "default_model": settings.DEFAULT_MODEL,
        "memory_model": settings.MEMORY_MODEL,
        "gateway_key_set": bool(settings.GATEWAY_SECRET),
        "counts": None,
        "adoption": None,
        "turn_spool": face_of(request, TURN_SPOOL).status(),
    }
    context["jobs"] = None
    if connected is not None and state == "ready":
        try:
            async with cursor(connected.pool) as cur:
                context["counts"] = await dashboard_counts(cur)
                adoption = await adoption_summary(cur)
            if adoption is not None:
                adoption["date"] = local_minute(adoption["started_at"], zone_of(settings))
                context["adoption"] = adoption
            # Background jobs that need attention (their own card; memory is not "fine"
            # meanwhile).
            context["jobs"] = await job_admin.health(connected)
        except UNAVAILABLE_ERRORS:
            connected.mark_unreachable()  # the page still renders, saying so
            context["database_state"] = "unavailable"
    context["health"] = await health_lines(database, face_of(request, UPSTREAM_HEALTH),
                                           face_of(request, MEMORY_EMBEDDING), settings,
                                           context["database_state"], context["jobs"])
    context["jobs_notice"] = _jobs_notice(request)
    return render(request, "dashboard/status.html", context)


def _jobs_notice(request: web.Request) -> str | None:
    """After retry/discard from the jobs card: what happened, shown in that card."""
    done, job = request.query.get("job_done", ""), request.query.get("job", "")
    if done in ("retried", "discarded") and whole_number(job) is not None:
        return translate(request_language(request), f"jobs_done.{done}", id=job)
    return None


async def to_status(request: web.Request) -> web.Response:
    """``/dashboard/`` with a trailing slash lands on the status page."""
    raise web.HTTPPermanentRedirect(str(request.app.router["status"].url_for()))


def setup(dashboard: web.Application) -> None:
    dashboard.router.add_get("", status, name="status")
    dashboard.router.add_get("/", to_status, name="status_slash")
