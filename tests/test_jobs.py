"""Durable jobs: dedupe, retries, crash recovery, shared across processes."""

from __future__ import annotations

import asyncio
from typing import Any

from pawwake.db import jobs as jobs_db
from pawwake.db.pool import cursor
from pawwake.jobs import Job, RetryLater
from pawwake.services import services_of


async def test_a_job_runs_once_and_records_its_result(make_client: Any) -> None:
    client = await make_client(JOB_WORKERS=0)
    app = client.server.app
    runs: list[dict[str, Any]] = []

    async def handler(job: Job) -> dict[str, Any]:
        runs.append(job.payload)
        await job.progress(done=1, total=1)
        return {"ok": True}

    services_of(app).jobs.register("demo", handler)
    pool = services_of(app).database.pool
    async with cursor(pool) as cur:
        first = await jobs_db.enqueue(cur, "demo", {"n": 1}, dedupe_key="k")
        duplicate = await jobs_db.enqueue(cur, "demo", {"n": 2}, dedupe_key="k")
    assert first is not None and duplicate is None
    assert await services_of(app).jobs.run_until_idle() == 1
    async with cursor(pool) as cur:
        job = await jobs_db.get_job(cur, first)
    assert runs == [{"n": 1}]
    assert job["status"] == "done" and job["result"] == {"ok": True}
    assert job["progress"] == {"done": 1, "total": 1}


async def test_retry_later_then_dead_letter_after_max_attempts(make_client: Any) -> None:
    client = await make_client(JOB_WORKERS=0)
    app = client.server.app
    attempts: list[int] = []

    async def flaky(job: Job) -> None:
        attempts.append(job.attempts)
        raise RetryLater("provider busy", delay=0)

    services_of(app).jobs.register("flaky", flaky)
    pool = services_of(app).database.pool
    async with cursor(pool) as cur:
        job_id = await jobs_db.enqueue(cur, "flaky", {}, max_attempts=3)
    await services_of(app).jobs.run_until_idle()
    async with cursor(pool) as cur:
        job = await jobs_db.get_job(cur, job_id)
    assert attempts == [1, 2, 3]
    assert job["status"] == "dead" and "provider busy" in job["last_error"]


async def test_a_crashed_run_is_claimed_again_once_its_lease_expires(make_client: Any) -> None:
    client = await make_client(JOB_WORKERS=0)
    app = client.server.app
    runs: list[int] = []

    async def handler(job: Job) -> str:
        runs.append(job.attempts)
        return "done"

    services_of(app).jobs.register("work", handler)
    pool = services_of(app).database.pool
    async with cursor(pool) as cur:
        job_id = await jobs_db.enqueue(cur, "work", {})
    # A process claims the job and dies before finishing it.
    async with cursor(pool) as cur:
        crashed = await jobs_db.claim_next(cur, ["work"], lease_seconds=0.05)
    assert crashed["id"] == job_id
    assert await services_of(app).jobs.run_until_idle() == 0  # still leased
    await asyncio.sleep(0.1)
    assert await services_of(app).jobs.run_until_idle() == 1
    assert runs == [2]
    async with cursor(pool) as cur:
        assert (await jobs_db.get_job(cur, job_id))["status"] == "done"


async def test_background_workers_pick_up_work_when_woken(make_client: Any) -> None:
    client = await make_client(JOB_WORKERS=2)
    app = client.server.app
    done = asyncio.Event()

    async def handler(job: Job) -> None:
        done.set()

    services_of(app).jobs.register("wake", handler)
    async with cursor(services_of(app).database.pool) as cur:
        await jobs_db.enqueue(cur, "wake", {})
    services_of(app).jobs.wake()
    await asyncio.wait_for(done.wait(), 5)
