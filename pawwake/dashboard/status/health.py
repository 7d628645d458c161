"""The status page's health lines: each part of the gateway with an ok / warning / error state
(database, vector search, embeddings, upstream, background work)."""

from __future__ import annotations

import logging
from datetime import timezone
from typing import Any

from pawwake.config_problems import configuration_problems
from pawwake.dashboard.job_errors import explain_job_error
from pawwake.database import Database
from pawwake.db.pool import DATABASE_ERRORS, UNAVAILABLE_ERRORS
from pawwake.llm.upstream_health import CHAT, STATES, UpstreamHealth
from pawwake.local_time import zone_of, zoned_minute
from pawwake.memory.backfill import backfill_status
from pawwake.memory.faces import MemoryEmbedding
from pawwake.search.vector_backend import configured_backend
from pawwake.settings import Settings

log = logging.getLogger(__name__)



def database_line(database: Any, state: str, settings: Settings) -> dict[str, Any]:
    level = {"ready": "ok", "disabled": "off", "connecting": "warning"}.get(state, "error")
    detail = {"kind": database.kind if database is not None else "disabled",
              "vectors": configured_backend(settings, database.pgvector)
              if database is not None and state == "ready" else None}
    return {"name": "database", "state": level, **detail}


# Job kinds that call the provider's chat models, by the kind of work the upstream line names
# them with (UpstreamHealth's ``work``), and the job errors that are the provider's doing.
MODEL_JOBS = {"memory_extract": "extract", "memory_consolidate": "consolidate"}
PROVIDER_FAILURES = {"rate_limited": "rate_limited", "unreachable": "upstream_unreachable",
                     "upstream_status": "upstream_status"}


def upstream_line(health: UpstreamHealth, zone: timezone,
                  jobs: dict[str, Any] | None = None) -> dict[str, Any]:
    """The provider's health: chats and the gateway's own calls (memory extraction, summaries,
    consolidation), each with its last failure. Besides this process's calls it reads the
    jobs that need attention, so a memory model failing in another process, or before a
    restart, shows here too and agrees with the memory switch."""
    calls: dict[str, dict[str, Any]] = {call.work: {"work": call.work, "state": call.state(), "when": last.at,
                         "status": last.status, "model": last.model, "code": last.code}
             for call in health.calls() if (last := call.last_error) is not None}
    for row in (jobs or {}).get("overview", []):
        work, problem = MODEL_JOBS.get(row["kind"]), row.get("problem")
        if work is None or problem is None:
            continue
        error = explain_job_error(problem["last_error"])
        if error is None or error.kind not in PROVIDER_FAILURES:
            continue
        known = calls.get(work)
        if known is not None and known["when"] >= problem["updated_at"]:
            continue
        calls[work] = {"work": work, "state": row["state"], "when": problem["updated_at"],
                       "status": error.status or ("429" if error.kind == "rate_limited"
                                                  else "—"),
                       "model": problem.get("model") or "—",
                       "code": PROVIDER_FAILURES[error.kind]}
    shown = sorted(calls.values(), key=lambda c: (c["work"] != CHAT, c["work"]))
    state = max([health.state(), *(c["state"] for c in shown)], key=STATES.index)
    return {"name": "upstream", "state": state,
            "calls": [{**c, "at": zoned_minute(c["when"], zone)} for c in shown]}


async def embedding_line(embedding: MemoryEmbedding, settings: Settings) -> dict[str, Any]:
    """Provider, model, dimension and backfill progress; a provider that fails is an error."""
    if not settings.MEMORY_VECTOR_ENABLED:
        return {"name": "embedding", "state": "off"}
    try:
        status = await backfill_status(embedding, settings=settings)
    except DATABASE_ERRORS as exc:
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


async def health_lines(database: Database | None, health: UpstreamHealth,
                       embedding: MemoryEmbedding, settings: Settings, state: str,
                       jobs: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Every line of the health card."""
    lines = [configuration_line(settings), database_line(database, state, settings),
             upstream_line(health, zone_of(settings), jobs)]
    if database is not None and state == "ready":
        try:
            lines.append(await embedding_line(embedding, settings))
        except UNAVAILABLE_ERRORS:
            database.mark_unreachable()
        lines.append(jobs_line(jobs))
    return lines
