"""Durable background work: jobs live in the database, survive restarts and retry with backoff.

A service registers a handler per job kind; the runner claims ready jobs with SKIP LOCKED (so
several gateway processes can share one database), runs them, and records the outcome. A run
that crashes before it finishes is claimed again once its lease expires.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import psycopg2
from aiohttp import web

from pawwake import keys
from pawwake.db import jobs as jobs_db

log = logging.getLogger(__name__)

LEASE_SECONDS = 300.0
IDLE_POLL_SECONDS = 2.0


class RetryLater(Exception):
    """Raise from a handler to run the job again after ``delay`` seconds.

    ``count_attempt=False`` for waits that are not the job's fault (a 429 from the provider).
    """

    def __init__(self, message: str, delay: float = 30.0, *, count_attempt: bool = True) -> None:
        super().__init__(message)
        self.delay = delay
        self.count_attempt = count_attempt


@dataclass
class Job:
    id: int
    kind: str
    payload: dict[str, Any]
    attempts: int
    app: web.Application

    async def progress(self, **values: Any) -> None:
        """Record progress (e.g. ``done``/``total``) that a status endpoint can show."""
        database = self.app[keys.DATABASE]
        assert database is not None
        await jobs_db.set_progress(database.pool, self.id, values)

    async def keep_alive(self) -> None:
        """Extend the lease during long work so no other process takes the job over."""
        database = self.app[keys.DATABASE]
        assert database is not None
        await jobs_db.extend_lease(database.pool, self.id, LEASE_SECONDS)


Handler = Callable[[Job], Awaitable[Any]]


def backoff_seconds(attempt: int) -> float:
    return min(600.0, 5.0 * 2 ** max(0, attempt - 1))


class JobRunner:
    """Runs registered handlers for jobs found in the database."""

    def __init__(self, app: web.Application, workers: int = 2) -> None:
        self.app = app
        self.handlers: dict[str, Handler] = {}
        self._wake = asyncio.Event()
        self._workers = workers
        self._loops: list[asyncio.Task[None]] = []
        self._stopping = False

    def register(self, kind: str, handler: Handler) -> None:
        self.handlers[kind] = handler

    def wake(self) -> None:
        """Look for work now instead of at the next poll (call after enqueueing)."""
        self._wake.set()

    def start(self) -> None:
        for number in range(self._workers):
            self._loops.append(asyncio.create_task(self._loop(), name=f"job-worker-{number}"))

    async def stop(self, grace_seconds: float = 30.0) -> None:
        """Let in-flight jobs finish (cancelling a query mid-way would strand its connection);
        cancel only what is still running after ``grace_seconds``."""
        self._stopping = True
        self._wake.set()
        if self._loops:
            _done, pending = await asyncio.wait(self._loops, timeout=grace_seconds)
            for task in pending:
                task.cancel()
            for task in pending:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._loops.clear()

    async def run_until_idle(self) -> int:
        """Run ready jobs until none is left; returns how many ran (tests and tools)."""
        count = 0
        while await self.run_one():
            count += 1
        return count

    async def run_one(self) -> bool:
        database = self.app[keys.DATABASE]
        if database is None or not self.handlers:
            return False
        row = await jobs_db.claim_next(database.pool, list(self.handlers), LEASE_SECONDS)
        if row is None:
            return False
        job = Job(id=row["id"], kind=row["kind"], payload=row["payload"],
                  attempts=row["attempts"], app=self.app)
        try:
            result = await self.handlers[job.kind](job)
        except asyncio.CancelledError:
            raise  # the lease expires and the job is claimed again after restart
        except RetryLater as exc:
            status = await jobs_db.retry_or_fail(database.pool, job.id, job.attempts, str(exc),
                                                 exc.delay,
                                                 count_attempt=exc.count_attempt)
            log.info("job %s (%s) will retry: %s [%s]", job.id, job.kind, exc, status)
        except Exception as exc:  # a handler bug or a provider failure: retry with backoff
            status = await jobs_db.retry_or_fail(database.pool, job.id, job.attempts,
                                                 f"{type(exc).__name__}: {exc}",
                                                 backoff_seconds(job.attempts))
            log.warning("job %s (%s) failed (attempt %s, now %s): %s", job.id, job.kind,
                        job.attempts, status, type(exc).__name__, exc_info=True)
        else:
            await jobs_db.finish(database.pool, job.id, job.attempts, result)
        return True

    async def _loop(self) -> None:
        while not self._stopping:
            try:
                ran = await self.run_one()
            except (psycopg2.Error, OSError) as exc:
                log.warning("job runner cannot reach the database: %s", type(exc).__name__)
                ran = False
                await asyncio.sleep(IDLE_POLL_SECONDS)
            if ran or self._stopping:
                continue
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), IDLE_POLL_SECONDS)


async def jobs_ctx(app: web.Application) -> AsyncIterator[None]:
    """cleanup_ctx after the database and HTTP client: workers stop before those close."""
    runner = app[keys.JOBS]
    database = app[keys.DATABASE]
    starting = None
    if database is not None and app[keys.SETTINGS]["JOB_WORKERS"] > 0:
        # Workers start once the database is here, also when it arrives after start-up.
        starting = asyncio.create_task(database.run_when_ready(runner.start), name="jobs-start")
    yield
    if starting is not None:
        starting.cancel()
    await runner.stop()
