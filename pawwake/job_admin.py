"""What people see and do with background jobs: the list (by status), retry, discard, and
the health summary the status page shows, so a failing job is never silent."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pawwake.api_error import ApiError
from pawwake.database import require_database
from pawwake.db import jobs as jobs_db
from pawwake.db.errors import NotFound
from pawwake.db.pool import cursor

if TYPE_CHECKING:
    from pawwake.database import Database
    from pawwake.jobs import JobRunner

# Job kinds whose failure means the gateway is not learning memories.
MEMORY_KINDS = frozenset({"memory_extract"})
STATUS_FILTERS = (*jobs_db.LIST_FILTERS, "all")
MAX_LIMIT = 200


def status_filter(value: str | None, default: str = "all") -> str | None:
    """A ``status`` query value checked against the known filters (None means every job)."""
    chosen = default if value in (None, "") else value
    if chosen not in STATUS_FILTERS:
        raise ApiError("invalid_status", "Unknown status filter; use one of: "
                      + ", ".join(STATUS_FILTERS) + ".")
    return None if chosen == "all" else chosen


def shown(row: dict[str, Any]) -> dict[str, Any]:
    """One job as the API and the dashboard show it."""
    waiting = row["stored_status"] == "pending"
    return {"id": row["id"], "kind": row["kind"], "status": row["status"],
            "attempts": row["attempts"], "max_attempts": row["max_attempts"],
            "rate_limit_waits": row["rate_limit_waits"],
            "last_error": row["last_error"], "model": row["model"],
            "created_at": row["created_at"], "updated_at": row["updated_at"],
            "next_try_at": row["run_after"] if waiting else None,
            "can_retry": row["stored_status"] in ("pending", "dead", "failed", "discarded"),
            "can_discard": row["stored_status"] in ("pending", "dead", "failed")}


async def list_jobs(database: Database, status: str | None, *, kind: str | None = None,
                    limit: int = 50, before_id: int | None = None) -> list[dict[str, Any]]:
    async with cursor(database.pool) as cur:
        rows = await jobs_db.list_jobs(cur, status, kind=kind,
                                       limit=max(1, min(limit, MAX_LIMIT)), before_id=before_id)
    return [shown(row) for row in rows]


async def get_job(database: Database, job_id: int) -> dict[str, Any]:
    async with cursor(database.pool) as cur:
        row = await jobs_db.listed_job(cur, job_id)
    if row is None:
        raise NotFound(f"No such job {job_id}.")
    return shown(row)


async def retry(runner: JobRunner, job_id: int) -> dict[str, Any]:
    """Run the job again now, with a fresh set of attempts (NotFound / Conflict)."""
    async with cursor(require_database(runner.database).pool) as cur:
        job = shown(await jobs_db.retry_now(cur, job_id))
    runner.wake()
    return job


async def discard(runner: JobRunner, job_id: int) -> dict[str, Any]:
    """Give up on the job; it stays stored but never runs again (NotFound / Conflict)."""
    async with cursor(require_database(runner.database).pool) as cur:
        return shown(await jobs_db.discard(cur, job_id))


async def health(database: Database) -> dict[str, Any]:
    """Counts of jobs that need attention, per shown status and per kind, and whether memory
    learning is among them (the status page must not call memory fine then)."""
    async with cursor(database.pool) as cur:
        rows = await jobs_db.attention_counts(cur)
        overview = await jobs_db.kind_overview(cur)
    totals = dict.fromkeys(("retrying", "dead", "failed"), 0)
    kinds: dict[str, dict[str, int]] = {}
    for row in rows:
        totals[row["status"]] = totals.get(row["status"], 0) + row["jobs"]
        kinds.setdefault(row["kind"], dict.fromkeys(totals, 0))[row["status"]] = row["jobs"]
    for row in overview:
        row["state"] = ("error" if row["dead"] or row["failed"]
                        else "warning" if row["retrying"] else "ok")
    return {**totals, "total": sum(totals.values()),
            "kinds": [{"kind": kind, **counts} for kind, counts in sorted(kinds.items())],
            "overview": overview,
            "memory_failing": any(kind in MEMORY_KINDS for kind in kinds),
            "latest": max((row["latest"] for row in rows), default=None)}
