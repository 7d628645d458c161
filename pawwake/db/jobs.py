"""The jobs table: enqueue, claim with SKIP LOCKED, renew leases, finish, retry, dead-letter,
and the listing, retry and discard that the API and dashboard offer."""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypedDict, cast

import psycopg2

from pawwake.db.errors import Conflict, NotFound
from pawwake.db.pool import Cursor, fetch_all, fetch_one, rows_as_dicts
from pawwake.text.storable import storable_json

JOB_COLUMNS = ("id, kind, dedupe_key, payload, status, attempts, max_attempts, run_after,"
               " claimed_until, progress, result, last_error, model, created_at, updated_at,"
               " rate_limit_waits")



class JobRow(TypedDict):
    """A job as stored (``JOB_COLUMNS``)."""

    id: int
    kind: str
    dedupe_key: str | None
    payload: dict[str, Any]
    status: str
    attempts: int
    max_attempts: int
    run_after: datetime
    claimed_until: datetime | None
    progress: dict[str, Any]
    result: Any
    last_error: str | None
    model: str | None
    created_at: datetime
    updated_at: datetime
    rate_limit_waits: int  # 429 waits in a row (reset when a run gets past the provider)


MAX_ATTEMPTS = 12  # with the runner's backoff (1 min doubling to 6 h): about 20 hours in all

# A job waiting for its next try after a failure (a 429 wait included).
RETRYING = "status = 'pending' AND last_error IS NOT NULL"
# What needs a person's attention: retrying, dead letters, and runs that ended with an error
# (a cancelled consolidation run is a choice, not a problem).
ATTENTION = (f"(({RETRYING}) OR status = 'dead' OR (status = 'failed'"
             " AND coalesce(result #>> '{error,code}', '') <> 'cancelled'))")
SHOWN_STATUS = (f"CASE WHEN {RETRYING} THEN 'retrying' ELSE status END")
# Filters of the job list: a stored status, 'retrying', or 'attention' (all three kinds above).
LIST_FILTERS = {
    "pending": "status = 'pending' AND last_error IS NULL",
    "retrying": RETRYING,
    "running": "status = 'running'",
    "done": "status = 'done'",
    "failed": "status = 'failed'",
    "dead": "status = 'dead'",
    "discarded": "status = 'discarded'",
    "attention": ATTENTION,
}


async def enqueue(cur: Cursor, kind: str, payload: dict[str, Any], *, dedupe_key: str | None = None,
                  delay_seconds: float = 0.0, max_attempts: int = MAX_ATTEMPTS) -> int | None:
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


async def claim_next(cur: Cursor, kinds: list[str], lease_seconds: float
                     ) -> JobRow | None:
    """Claim one ready job: pending and due, or running with an expired lease (a crashed run).

    A run whose lease expired on its last attempt (the worker died every time: the job itself
    may kill it) becomes a dead letter instead of being claimed again.
    """
    await cur.execute(
        "WITH lost AS ("
        "   UPDATE jobs SET status = 'dead', claimed_until = NULL, updated_at = now(),"
        "   last_error = 'the worker running it stopped before it finished'"
        "   || ' (attempt ' || attempts || ' of ' || max_attempts || ')'"
        "   WHERE kind = ANY(%(kinds)s) AND status = 'running' AND claimed_until < now()"
        "   AND attempts >= max_attempts RETURNING id)"
        f" UPDATE jobs SET status = 'running', attempts = attempts + 1,"
        f" claimed_until = now() + make_interval(secs => %(lease)s), updated_at = now()"
        f" WHERE id = (SELECT id FROM jobs WHERE kind = ANY(%(kinds)s) AND ("
        f"   (status = 'pending' AND run_after <= now())"
        f"   OR (status = 'running' AND claimed_until < now()"
        f"       AND attempts < max_attempts))"
        f" ORDER BY run_after, id FOR UPDATE SKIP LOCKED LIMIT 1)"
        f" RETURNING {JOB_COLUMNS}",
        {"lease": lease_seconds, "kinds": kinds})
    row = await cur.fetchone()
    return cast(JobRow, rows_as_dicts(cur, [row])[0]) if row else None


async def extend_lease(cur: Cursor, job_id: int, lease_seconds: float,
                       attempt: int | None = None) -> bool:
    """Renew a running job's lease; False when the run is no longer the job's current one
    (taken over, cancelled, discarded). ``attempt`` fences out a run that was taken over."""
    await cur.execute(
        "UPDATE jobs SET claimed_until = now() + make_interval(secs => %s), updated_at = now()"
        " WHERE id = %s AND status = 'running' AND (%s::integer IS NULL OR attempts = %s)",
        (lease_seconds, job_id, attempt, attempt))
    return bool(cur.rowcount == 1)


async def finish(cur: Cursor, job_id: int, attempt: int, result: Any) -> None:
    """Mark done; ``attempt`` fences out a run whose lease expired and was taken over."""
    await cur.execute(
        "UPDATE jobs SET status = 'done', result = %s::jsonb, claimed_until = NULL,"
        " last_error = NULL, updated_at = now()"
        " WHERE id = %s AND attempts = %s AND status = 'running'",
        (storable_json(result), job_id, attempt))


async def retry_or_fail(cur: Cursor, job_id: int, attempt: int, error: str,
                        delay_seconds: float, *, count_attempt: bool = True,
                        model: str | None = None, rate_limited: bool = False) -> str:
    """Put the job back for a later run, or make it a dead letter when its attempts are used
    up. Returns the new status ('pending', 'dead') or 'taken over' when the run was fenced out.
    ``rate_limited`` counts one more 429 wait in a row; any other outcome ends the row.
    """
    await cur.execute(
        "UPDATE jobs SET"
        " rate_limit_waits = CASE WHEN %s THEN rate_limit_waits + 1 ELSE 0 END,"
        " attempts = attempts - CASE WHEN %s THEN 0 ELSE 1 END,"
        " status = CASE WHEN %s AND attempts >= max_attempts THEN 'dead' ELSE 'pending' END,"
        " run_after = now() + make_interval(secs => %s), claimed_until = NULL,"
        " last_error = %s, model = coalesce(%s, model), updated_at = now()"
        " WHERE id = %s AND attempts = %s AND status = 'running' RETURNING status",
        (rate_limited, count_attempt, count_attempt, delay_seconds, error[:2000], model, job_id,
         attempt))
    row = await cur.fetchone()
    return row[0] if row else "taken over"


async def release(cur: Cursor, job_id: int, attempt: int) -> bool:
    """Give a claim back unfinished (the process is shutting down): the job is due at once,
    and the interrupted run does not count as an attempt."""
    await cur.execute(
        "UPDATE jobs SET status = 'pending', attempts = attempts - 1, claimed_until = NULL,"
        " run_after = now(), updated_at = now()"
        " WHERE id = %s AND attempts = %s AND status = 'running'", (job_id, attempt))
    return bool(cur.rowcount == 1)


async def set_progress(cur: Cursor, job_id: int, progress: dict[str, Any]) -> None:
    await cur.execute("UPDATE jobs SET progress = %s::jsonb, updated_at = now() WHERE id = %s",
                      (storable_json(progress), job_id))


async def latest_of_kind(cur: Cursor, kind: str) -> JobRow | None:
    return await _job(cur, "kind = %s ORDER BY created_at DESC, id DESC", (kind,))


async def get_job(cur: Cursor, job_id: int) -> JobRow | None:
    return await _job(cur, "id = %s", (job_id,))


async def unfinished_of_kind(cur: Cursor, kind: str) -> JobRow | None:
    return await _job(cur, "kind = %s AND status IN ('pending', 'running') ORDER BY id", (kind,))


async def _job(cur: Cursor, where: str, params: tuple[Any, ...]) -> JobRow | None:
    row = await fetch_one(cur, f"SELECT {JOB_COLUMNS} FROM jobs WHERE {where} LIMIT 1", params)
    return cast(JobRow | None, row)


# --- what the API and the dashboard show and do --------------------------------------------

LISTED_COLUMNS = ("id, kind, attempts, max_attempts, run_after, claimed_until, last_error,"
                  f" model, created_at, updated_at, rate_limit_waits, status AS stored_status,"
                  f" {SHOWN_STATUS} AS status")


async def list_jobs(cur: Cursor, status: str | None, *, kind: str | None = None,
                    limit: int = 50, before_id: int | None = None) -> list[dict[str, Any]]:
    """Jobs newest first (by id), filtered by a ``LIST_FILTERS`` name and an exact kind."""
    where = [LIST_FILTERS[status]] if status else []
    params: list[Any] = []
    if kind:
        where.append("kind = %s")
        params.append(kind)
    if before_id is not None:
        where.append("id < %s")
        params.append(before_id)
    clause = f" WHERE {' AND '.join(f'({w})' for w in where)}" if where else ""
    params.append(limit)
    return await fetch_all(cur, f"SELECT {LISTED_COLUMNS} FROM jobs{clause}"
                                " ORDER BY id DESC LIMIT %s", params)


async def listed_job(cur: Cursor, job_id: int) -> dict[str, Any] | None:
    return await fetch_one(cur, f"SELECT {LISTED_COLUMNS} FROM jobs WHERE id = %s", (job_id,))


async def attention_counts(cur: Cursor) -> list[dict[str, Any]]:
    """Per kind and shown status, how many jobs need attention (and the newest change)."""
    return await fetch_all(
        cur, f"SELECT kind, {SHOWN_STATUS} AS status, count(*)::integer AS jobs,"
             f" max(updated_at) AS latest FROM jobs WHERE {ATTENTION}"
             " GROUP BY 1, 2 ORDER BY 1, 2")


async def kind_overview(cur: Cursor) -> list[dict[str, Any]]:
    """Per kind with open or problem jobs: pending, running, retrying, dead and failed counts,
    and the newest job needing attention (id, status, last error, model, time)."""
    counts = await fetch_all(
        cur, "SELECT kind,"
             " count(*) FILTER (WHERE status = 'pending' AND last_error IS NULL)::integer"
             "   AS pending,"
             " count(*) FILTER (WHERE status = 'running')::integer AS running,"
             f" count(*) FILTER (WHERE {RETRYING})::integer AS retrying,"
             " count(*) FILTER (WHERE status = 'dead')::integer AS dead,"
             f" count(*) FILTER (WHERE status = 'failed' AND {ATTENTION})::integer AS failed"
             " FROM jobs WHERE status IN ('pending', 'running', 'failed', 'dead')"
             " GROUP BY kind ORDER BY kind")
    latest = await fetch_all(
        cur, f"SELECT DISTINCT ON (kind) kind, id, {SHOWN_STATUS} AS status, last_error,"
             f" model, updated_at FROM jobs WHERE {ATTENTION} ORDER BY kind, updated_at DESC, id DESC")
    problems = {row["kind"]: row for row in latest}
    return [{**row, "problem": problems.get(row["kind"])} for row in counts]


async def retry_now(cur: Cursor, job_id: int) -> dict[str, Any]:
    """Queue a waiting, dead, failed or discarded job to run now with a fresh set of
    attempts. NotFound for an unknown id; Conflict when it runs, is done, or an equal job
    (same dedupe key) is already queued."""
    await cur.execute("SELECT status, kind, dedupe_key FROM jobs WHERE id = %s", (job_id,))
    row = await cur.fetchone()
    if row is None:
        raise NotFound(f"No such job {job_id}.")
    status, kind, dedupe_key = row
    if status in ("running", "done"):
        raise Conflict(f"job {job_id} is {status}", "job_state", status=status)
    if status != "pending" and dedupe_key is not None:
        await cur.execute("SELECT id FROM jobs WHERE kind = %s AND dedupe_key = %s"
                          " AND status IN ('pending', 'running') AND id <> %s",
                          (kind, dedupe_key, job_id))
        twin = await cur.fetchone()
        if twin is not None:
            raise Conflict(f"job {twin[0]} already does the same work", "job_twin",
                           job=twin[0])
    try:
        await cur.execute(
            "UPDATE jobs SET status = 'pending', attempts = 0, rate_limit_waits = 0,"
            " run_after = now(),"
            " claimed_until = NULL, updated_at = now()"
            " WHERE id = %s AND status = %s", (job_id, status))
    except psycopg2.IntegrityError:  # an equal job was queued since the check above
        raise Conflict("an equal job is already queued", "job_queued") from None
    if cur.rowcount != 1:
        raise Conflict(f"job {job_id} changed meanwhile", "job_changed")
    found = await listed_job(cur, job_id)
    assert found is not None
    return found


async def discard(cur: Cursor, job_id: int) -> dict[str, Any]:
    """Give up on a waiting, dead or failed job: it stays stored and never runs again.
    NotFound for an unknown id; Conflict when it is running, done or already discarded."""
    await cur.execute(
        "UPDATE jobs SET status = 'discarded', claimed_until = NULL, updated_at = now()"
        " WHERE id = %s AND status IN ('pending', 'dead', 'failed') RETURNING id",
        (job_id,))
    if await cur.fetchone() is None:
        await cur.execute("SELECT status FROM jobs WHERE id = %s", (job_id,))
        row = await cur.fetchone()
        if row is None:
            raise NotFound(f"No such job {job_id}.")
        raise Conflict(f"job {job_id} is {row[0]}", "job_state", status=row[0])
    found = await listed_job(cur, job_id)
    assert found is not None
    return found
