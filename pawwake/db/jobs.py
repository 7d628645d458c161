"""The jobs table: enqueue, claim with SKIP LOCKED, finish, retry, report progress."""

from __future__ import annotations

from typing import Any

import aiopg

from pawwake.db.pool import cursor, fetch_one, rows_as_dicts
from pawwake.text.storable import storable_json

JOB_COLUMNS = ("id, kind, dedupe_key, payload, status, attempts, max_attempts, run_after,"
               " claimed_until, progress, result, last_error, created_at, updated_at")


async def enqueue(cur: Any, kind: str, payload: dict[str, Any], *, dedupe_key: str | None = None,
                  delay_seconds: float = 0.0, max_attempts: int = 5) -> int | None:
    """Insert a job using ``cur`` (so it can share the caller's transaction).

    Returns the new id, or None when an unfinished job with the same dedupe key exists.
    """
    await cur.execute(
        "INSERT INTO jobs (kind, dedupe_key, payload, max_attempts, run_after)"
        " VALUES (%s, %s, %s::jsonb, %s, now() + make_interval(secs => %s))"
        " ON CONFLICT (kind, dedupe_key)"
        "   WHERE dedupe_key IS NOT NULL AND status IN ('pending', 'running') DO NOTHING"
        " RETURNING id",
        (kind, dedupe_key, storable_json(payload), max_attempts, delay_seconds))
    row = await cur.fetchone()
    return row[0] if row else None


async def enqueue_job(pool: aiopg.Pool, kind: str, payload: dict[str, Any], **options: Any
                      ) -> int | None:
    async with cursor(pool) as cur:
        return await enqueue(cur, kind, payload, **options)


async def claim_next(pool: aiopg.Pool, kinds: list[str], lease_seconds: float
                     ) -> dict[str, Any] | None:
    """Claim one ready job: pending and due, or running with an expired lease (a crashed run)."""
    async with cursor(pool) as cur:
        await cur.execute(
            f"UPDATE jobs SET status = 'running', attempts = attempts + 1,"
            f" claimed_until = now() + make_interval(secs => %s), updated_at = now()"
            f" WHERE id = (SELECT id FROM jobs WHERE kind = ANY(%s) AND ("
            f"   (status = 'pending' AND run_after <= now())"
            f"   OR (status = 'running' AND claimed_until < now()))"
            f" ORDER BY run_after, id FOR UPDATE SKIP LOCKED LIMIT 1)"
            f" RETURNING {JOB_COLUMNS}",
            (lease_seconds, kinds))
        row = await cur.fetchone()
        return rows_as_dicts(cur, [row])[0] if row else None


async def extend_lease(pool: aiopg.Pool, job_id: int, lease_seconds: float) -> None:
    async with cursor(pool) as cur:
        await cur.execute(
            "UPDATE jobs SET claimed_until = now() + make_interval(secs => %s), updated_at = now()"
            " WHERE id = %s AND status = 'running'", (lease_seconds, job_id))


async def finish(pool: aiopg.Pool, job_id: int, attempt: int, result: Any) -> None:
    """Mark done; ``attempt`` fences out a run whose lease expired and was taken over."""
    async with cursor(pool) as cur:
        await cur.execute(
            "UPDATE jobs SET status = 'done', result = %s::jsonb, claimed_until = NULL,"
            " last_error = NULL, updated_at = now()"
            " WHERE id = %s AND attempts = %s AND status = 'running'",
            (storable_json(result), job_id, attempt))


async def retry_or_fail(pool: aiopg.Pool, job_id: int, attempt: int, error: str,
                        delay_seconds: float, *, count_attempt: bool = True) -> str:
    """Put the job back for a later run, or mark it failed when attempts are used up."""
    async with cursor(pool) as cur:
        await cur.execute(
            "UPDATE jobs SET"
            " attempts = attempts - CASE WHEN %s THEN 0 ELSE 1 END,"
            " status = CASE WHEN %s AND attempts >= max_attempts THEN 'failed' ELSE 'pending' END,"
            " run_after = now() + make_interval(secs => %s), claimed_until = NULL,"
            " last_error = %s, updated_at = now()"
            " WHERE id = %s AND attempts = %s AND status = 'running' RETURNING status",
            (count_attempt, count_attempt, delay_seconds, error[:2000], job_id, attempt))
        row = await cur.fetchone()
        return row[0] if row else "taken over"


async def set_progress(pool: aiopg.Pool, job_id: int, progress: dict[str, Any]) -> None:
    async with cursor(pool) as cur:
        await cur.execute("UPDATE jobs SET progress = %s::jsonb, updated_at = now() WHERE id = %s",
                          (storable_json(progress), job_id))


async def latest_of_kind(pool: aiopg.Pool, kind: str) -> dict[str, Any] | None:
    return await fetch_one(pool, f"SELECT {JOB_COLUMNS} FROM jobs WHERE kind = %s"
                                 " ORDER BY created_at DESC, id DESC LIMIT 1", (kind,))


async def get_job(pool: aiopg.Pool, job_id: int) -> dict[str, Any] | None:
    return await fetch_one(pool, f"SELECT {JOB_COLUMNS} FROM jobs WHERE id = %s", (job_id,))


async def unfinished_of_kind(pool: aiopg.Pool, kind: str) -> dict[str, Any] | None:
    return await fetch_one(pool, f"SELECT {JOB_COLUMNS} FROM jobs WHERE kind = %s"
                                 " AND status IN ('pending', 'running') ORDER BY id LIMIT 1",
                           (kind,))
