"""Job leases and retries: a short lease renewed by a heartbeat, re-claim after a dead worker,
the backoff schedule, dead letters, and a stop() that gives running jobs back."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pawwake.db import jobs as jobs_db
from pawwake.db.pool import cursor, execute, fetch_one
from pawwake.jobs import LEASE_SECONDS, Job, JobRunner, RetryLater, backoff_seconds
from pawwake.services import services_of


@pytest.fixture
async def app(make_client: Any) -> Any:
    client = await make_client(JOB_WORKERS=0)
    return client.server.app


def pool_of(app: Any) -> Any:
    return services_of(app).database.pool


async def make_due(app: Any, job_id: int) -> None:
    async with cursor(pool_of(app)) as cur:
        await execute(cur, "UPDATE jobs SET run_after = now() WHERE id = %s", (job_id,))


async def test_a_claim_is_a_lease_of_about_a_minute(app: Any) -> None:
    """A worker killed mid-job (kill -9) leaves its job to others after the lease: it must be
    short, not the five minutes it was."""
    services_of(app).jobs.register("work", _never_called)
    async with cursor(pool_of(app)) as cur:
        job_id = await jobs_db.enqueue(cur, "work", {})
        await jobs_db.claim_next(cur, ["work"], services_of(app).jobs.lease_seconds)
        row = await fetch_one(cur, "SELECT extract(epoch FROM claimed_until - now()) AS left"
                                   " FROM jobs WHERE id = %s", (job_id,))
    assert 0 < row["left"] <= 60
    assert LEASE_SECONDS <= 60


async def _never_called(job: Job) -> None:
    raise AssertionError("not expected to run")


async def test_a_handler_that_outlives_its_lease_is_not_run_twice(app: Any) -> None:
    """The runner renews the lease while the handler works: another worker (here a second
    runner on the same database, as a second process would be) never claims it."""
    lease = 1.0
    started, release = asyncio.Event(), asyncio.Event()
    runs: list[int] = []

    async def long_job(job: Job) -> str:
        runs.append(job.attempts)
        started.set()
        await release.wait()
        return "embedded"

    first = JobRunner(services_of(app).database, workers=0, lease_seconds=lease)
    other = JobRunner(services_of(app).database, workers=0, lease_seconds=lease)
    first.register("embed", long_job)
    other.register("embed", long_job)
    async with cursor(pool_of(app)) as cur:
        job_id = await jobs_db.enqueue(cur, "embed", {})
    running = asyncio.create_task(first.run_one())
    await asyncio.wait_for(started.wait(), 10)
    for _ in range(5):  # 2.5 leases in all: without renewal the lease would expire
        await asyncio.sleep(lease / 2)
        assert await other.run_one() is False
    release.set()
    assert await running is True
    async with cursor(pool_of(app)) as cur:
        job = await jobs_db.get_job(cur, job_id)
    assert runs == [1]
    assert job["status"] == "done" and job["result"] == "embedded" and job["attempts"] == 1


async def test_a_job_left_running_by_a_dead_worker_is_claimed_again_after_the_lease(
        app: Any) -> None:
    lease = 0.5
    started = asyncio.Event()
    runs: list[int] = []

    async def handler(job: Job) -> str:
        runs.append(job.attempts)
        if job.attempts == 1:
            started.set()
            await asyncio.Event().wait()  # the worker dies while this run is in progress
        return "done"

    dying = JobRunner(services_of(app).database, workers=0, lease_seconds=lease)
    dying.register("work", handler)
    async with cursor(pool_of(app)) as cur:
        job_id = await jobs_db.enqueue(cur, "work", {})
    worker = asyncio.create_task(dying.run_one())
    await asyncio.wait_for(started.wait(), 10)
    worker.cancel()  # like kill -9: no stop(), nothing given back, the heartbeat ends
    with pytest.raises(asyncio.CancelledError):
        await worker
    async with cursor(pool_of(app)) as cur:
        assert (await jobs_db.get_job(cur, job_id))["status"] == "running"

    survivor = JobRunner(services_of(app).database, workers=0, lease_seconds=lease)
    survivor.register("work", handler)
    assert await survivor.run_one() is False  # the lease still holds
    await asyncio.sleep(lease * 1.5)
    assert await survivor.run_one() is True
    assert runs == [1, 2]
    async with cursor(pool_of(app)) as cur:
        assert (await jobs_db.get_job(cur, job_id))["status"] == "done"


def test_backoff_grows_from_a_minute_to_six_hours_over_about_a_day() -> None:
    waits = [backoff_seconds(attempt) for attempt in range(1, jobs_db.MAX_ATTEMPTS)]
    assert waits[:4] == [60, 120, 240, 480]
    assert max(waits) == waits[-1] == 6 * 3600
    assert waits == sorted(waits)
    assert 18 * 3600 <= sum(waits) <= 30 * 3600


async def test_failures_follow_the_schedule_then_become_a_dead_letter(app: Any) -> None:
    errors: list[int] = []

    async def broken(job: Job) -> None:
        errors.append(job.attempts)
        raise ValueError("the model answered nonsense")

    services_of(app).jobs.register("broken", broken)
    async with cursor(pool_of(app)) as cur:
        job_id = await jobs_db.enqueue(cur, "broken", {}, max_attempts=4)
    waits = []
    for _ in range(4):
        assert await services_of(app).jobs.run_until_idle() == 1
        async with cursor(pool_of(app)) as cur:
            row = await fetch_one(cur, "SELECT status, extract(epoch FROM run_after -"
                                       " updated_at) AS wait FROM jobs WHERE id = %s",
                                  (job_id,))
        waits.append((row["status"], round(row["wait"])))
        await make_due(app, job_id)
    assert waits == [("pending", 60), ("pending", 120), ("pending", 240), ("dead", 480)]
    assert await services_of(app).jobs.run_until_idle() == 0  # a dead letter never runs by itself
    async with cursor(pool_of(app)) as cur:
        job = await jobs_db.get_job(cur, job_id)
    assert errors == [1, 2, 3, 4]
    assert job["status"] == "dead" and job["attempts"] == 4
    assert "ValueError: the model answered nonsense" in job["last_error"]


async def test_rate_limit_waits_never_use_up_attempts(app: Any) -> None:
    async def limited(job: Job) -> None:
        raise RetryLater("429", delay=0, count_attempt=False)

    services_of(app).jobs.register("limited", limited)
    async with cursor(pool_of(app)) as cur:
        job_id = await jobs_db.enqueue(cur, "limited", {}, max_attempts=2)
    for _ in range(6):
        await services_of(app).jobs.run_one()
    async with cursor(pool_of(app)) as cur:
        job = await jobs_db.get_job(cur, job_id)
    assert job["status"] == "pending" and job["attempts"] == 0


async def test_a_job_whose_worker_dies_on_every_attempt_becomes_a_dead_letter(app: Any) -> None:
    services_of(app).jobs.register("poison", _never_called)
    async with cursor(pool_of(app)) as cur:
        job_id = await jobs_db.enqueue(cur, "poison", {}, max_attempts=1)
        assert await jobs_db.claim_next(cur, ["poison"], 0.05) is not None
    await asyncio.sleep(0.1)
    assert await services_of(app).jobs.run_one() is False
    async with cursor(pool_of(app)) as cur:
        job = await jobs_db.get_job(cur, job_id)
    assert job["status"] == "dead" and "stopped before it finished" in job["last_error"]


async def test_stop_gives_a_running_job_back_without_counting_an_attempt(app: Any) -> None:
    started = asyncio.Event()

    async def endless(job: Job) -> None:
        started.set()
        await asyncio.Event().wait()

    runner = JobRunner(services_of(app).database, workers=1)
    runner.register("endless", endless)
    async with cursor(pool_of(app)) as cur:
        job_id = await jobs_db.enqueue(cur, "endless", {})
    runner.start()
    runner.wake()
    await asyncio.wait_for(started.wait(), 10)
    await runner.stop(grace_seconds=0.1)
    async with cursor(pool_of(app)) as cur:
        job = await jobs_db.get_job(cur, job_id)
    assert job["status"] == "pending" and job["attempts"] == 0 and job["claimed_until"] is None


async def test_stop_does_not_wait_for_idle_workers(app: Any) -> None:
    """Idle workers wake on stop(): with a grace far longer than any poll, stop() still
    returns once they are gone (nothing to cancel, nothing left running)."""
    runner = JobRunner(services_of(app).database, workers=3)
    runner.register("idle", _never_called)
    runner.start()
    await asyncio.sleep(0)
    await asyncio.wait_for(runner.stop(grace_seconds=3600), 60)
    assert runner._loops == []
