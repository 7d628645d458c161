"""The status page's health lines: each part of the gateway with an ok / warning / error state
(database, vector search, embeddings, upstream, background work)."""

from __future__ import annotations

import logging
from datetime import timezone
from typing import Any

import psycopg2

from pawwake.config_problems import configuration_problems
from pawwake.db.errors import DatabaseUnavailable
from pawwake.db.pool import UNAVAILABLE_ERRORS
from pawwake.local_time import local_minute, zone_of
from pawwake.memory.backfill import backfill_status
from pawwake.services import Services
from pawwake.settings import Settings

log = logging.getLogger(__name__)

_UNREADABLE: tuple[type[BaseException], ...] = (DatabaseUnavailable, psycopg2.Error,
                                                 *UNAVAILABLE_ERRORS)


def database_line(database: Any, state: str) -> dict[str, Any]:
    level = {"ready": "ok", "disabled": "off", "connecting": "warning"}.get(state, "error")
    detail = {"kind": database.kind if database is not None else "disabled",
              "vectors": ("pgvector" if database.pgvector else "numpy")
              if database is not None and state == "ready" else None}
    return {"name": "database", "state": level, **detail}


def upstream_line(services: Services, zone: timezone) -> dict[str, Any]:
    health = services.upstream_health
    error = health.last_error
    return {"name": "upstream", "state": health.state(),
            "error": None if error is None else {
                "at": local_minute(error.at, zone), "status": error.status, "model": error.model,
                "code": error.code}}


async def embedding_line(services: Services, settings: Settings) -> dict[str, Any]:
    """Provider, model, dimension and backfill progress; a provider that fails is an error."""
    if not settings.MEMORY_VECTOR_ENABLED:
        return {"name": "embedding", "state": "off"}
    try:
        status = await backfill_status(services, settings=settings)
    except _UNREADABLE as exc:
        # The page still renders; the line says the state could not be read.
        log.warning("embedding state unreadable on the status page (%s)", type(exc).__name__)
        return {"name": "embedding", "state": "warning", "unavailable": True}
    done, total = int(status["done"]), int(status["total"])
    failed = status["status"] == "failed" or (status["last_error"] and done < total)
    level = ("error" if failed else "warning" if status["needs_rebuild"] or (done < total
             and status["status"] not in ("queued", "running")) else "ok")
    return {"name": "embedding", "state": level, **status["provenance"], "done": done,
            "total": total, "job_status": status["status"],
            "last_error": status["last_error"] if failed else None,
            "needs_rebuild": status["needs_rebuild"]}


def configuration_line(settings: Settings) -> dict[str, Any]:
    """The settings in force that keep chats or memory from working, worst first."""
    problems = sorted(configuration_problems(settings), key=lambda p: p.level != "error")
    level = problems[0].level if problems else "ok"
    return {"name": "configuration", "state": level,
            "problems": [{"setting": p.setting, "code": p.code} for p in problems]}


def jobs_line(jobs: dict[str, Any] | None) -> dict[str, Any]:
    if jobs is None:
        return {"name": "jobs", "state": "off"}
    states = [row["state"] for row in jobs["overview"]]
    level = "error" if "error" in states else "warning" if "warning" in states else "ok"
    return {"name": "jobs", "state": level, "total": jobs["total"]}


async def health_lines(services: Services, settings: Settings, state: str,
                       jobs: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Every line of the health card."""
    database = services.database
    lines = [configuration_line(settings), database_line(database, state),
             upstream_line(services, zone_of(settings))]
    if database is not None and state == "ready":
        try:
            lines.append(await embedding_line(services, settings))
        except UNAVAILABLE_ERRORS:
            database.mark_unreachable()
        lines.append(jobs_line(jobs))
    return lines
