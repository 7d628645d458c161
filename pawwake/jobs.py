"""Durable background work: jobs live in the database, survive restarts and retry with backoff.

A service registers a handler per job kind; the runner claims ready jobs with SKIP LOCKED (so
several gateway processes can share one database), runs them, and records the outcome. A claim
is a short lease that a heartbeat renews while the handler runs, so a long job is never run
twice and a crashed worker's job is claimed again within about a minute. Failures retry on a
schedule that grows to hours (about a day in all); after the last attempt the job becomes a
dead letter, kept until someone retries or discards it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pawwake.cancelling import cancel_and_wait
from pawwake.db import jobs as jobs_db
from pawwake.db.pool import DATABASE_ERRORS, cursor

if TYPE_CHECKING:
    from pawwake.database import Database

log = logging.getLogger(__name__)

LEASE_SECONDS = 60.0  # a crashed worker's job is claimed again after at most this long
HEARTBEATS_PER_LEASE = 3  # the lease is renewed this often within one lease period
IDLE_POLL_SECONDS = 2.0
STOP_GRACE_SECONDS = 5.0  # running jobs get this long to finish at shutdown, then are cancelled
RELEASE_SECONDS = 1.0  # at most this long to give cancelled jobs back at shutdown
FIRST_RETRY_SECONDS = 60.0
LONGEST_RETRY_SECONDS = 6 * 3600.0
# A rate-limited provider (HTTP 429): its Retry-After is waited for, else 30 s doubling to
# 30 min. The first waits in a row use up no attempt (the job is not at fault); past them a
# 429 counts like any failure, so a provider that never lets up ends in a dead letter.
RATE_LIMIT_FIRST_SECONDS = 30.0
RATE_LIMIT_LONGEST_SECONDS = 1800.0
FREE_RATE_LIMIT_WAITS = 8  # 30 s doubling: about two hours of waiting before attempts count


class RetryLater(Exception):
    """Raise from a handler to run the job again later.

    ``delay`` None follows the runner's backoff schedule (``backoff_seconds``); a number waits
    exactly that long. ``count_attempt=False`` for waits that are not the job's fault: they
    never use up the job's attempts. A provider's 429 is ``RetryLater.rate_limited``: the
    runner decides its wait and whether it counts (``rate_limit_wait``).
    """

    def __init__(self, message: str, delay: float | None = None, *,
                 count_attempt: bool = True) -> None:
        super().__init__(message)
        self.delay = delay
        self.count_attempt = count_attempt
        self.rate_limit = False
        self.retry_after: float | None = None

    @classmethod
    def rate_limited(cls, message: str, retry_after: float | None = None) -> RetryLater:
        """The provider answered 429 (``retry_after``: its Retry-After, in seconds)."""
        exc = cls(message, count_attempt=False)
        exc.rate_limit = True
        exc.retry_after = retry_after
        return exc


@dataclass
class Job:
    id: int
    kind: str
    payload: dict[str, Any]
    attempts: int
    database: Database
    model: str | None = None  # set by a handler before it calls a model: shown with failures
    lease_seconds: float = LEASE_SECONDS
    rate_limit_waits: int = 0  # 429 waits in a row before this run

    async def progress(self, **values: Any) -> None:
        """Record progress (e.g. ``done``/``total``) that a status endpoint can show."""
        async with cursor(self.database.pool) as cur:
            await jobs_db.set_progress(cur, self.id, values)

    async def keep_alive(self) -> None:
        """Extend the lease now (the runner's heartbeat also does it while the handler runs)."""
        async with cursor(self.database.pool) as cur:
            await jobs_db.extend_lease(cur, self.id, self.lease_seconds, self.attempts)


Handler = Callable[[Job], Awaitable[Any]]


def rate_limit_wait(waits: int, retry_after: float | None) -> tuple[float, bool]:
    """(seconds to wait, whether it uses up an attempt) after a 429, the job having waited
    ``waits`` times in a row before: the provider's Retry-After when it gave one (at least
    1 s, at most the longest retry), else 30 s doubling to 30 min."""
    if retry_after is not None:
        wait = min(LONGEST_RETRY_SECONDS, max(1.0, retry_after))
    else:
        wait = min(RATE_LIMIT_LONGEST_SECONDS, RATE_LIMIT_FIRST_SECONDS * 2 ** min(waits, 20))
    return wait, waits >= FREE_RATE_LIMIT_WAITS


def backoff_seconds(attempt: int) -> float:
    """Wait after failed attempt number ``attempt``: 1 min doubling to 6 h (1, 2, 4 ... 256
    min, then 6 h), so 12 attempts span about 20 hours."""
    return min(LONGEST_RETRY_SECONDS, FIRST_RETRY_SECONDS * 2.0 ** max(0, attempt - 1))


class JobRunner:
    """Runs registered handlers for jobs found in the database."""

    def __init__(self, database: Database | None, workers: int = 2, *,
                 lease_seconds: float = LEASE_SECONDS) -> None:
        self.database = database  # None: no database, no jobs
        self.handlers: dict[str, Handler] = {}
        self.lease_seconds = lease_seconds
        self._wake = asyncio.Event()
        self._workers = workers
        self._loops: list[asyncio.Task[None]] = []
        self._running: dict[int, Job] = {}  # job id -> the run this process is doing
        self._stopping = False

    def register(self, kind: str, handler: Handler) -> None:
        self.handlers[kind] = handler

    def wake(self) -> None:
        """Look for work now instead of at the next poll (call after enqueueing)."""
        self._wake.set()

    def start(self) -> None:
        self._stopping = False
        for number in range(self._workers):
            self._loops.append(asyncio.create_task(self._loop(), name=f"job-worker-{number}"))

    async def stop(self, grace_seconds: float = STOP_GRACE_SECONDS) -> None:
        """Stop at once when idle; let running jobs finish for ``grace_seconds`` (cancelling a
        query mid-way can strand its connection), then cancel them and give their claims back
        so the next start (or another process) runs them at once, without counting an attempt.
        """
        self._stopping = True
        self._wake.set()
        if self._loops:
            _done, pending = await asyncio.wait(self._loops, timeout=grace_seconds)
            for task in pending:
                if not await cancel_and_wait(task):
                    log.warning("%s did not stop when cancelled", task.get_name())
            await self._release_unfinished()
        self._loops.clear()

    async def _release_unfinished(self) -> None:
        database = self.database
        abandoned, self._running = list(self._running.values()), {}
        if database is None or not abandoned:
            return
        try:
            async with asyncio.timeout(RELEASE_SECONDS):
                for job in abandoned:
                    async with cursor(database.pool) as cur:
                        await jobs_db.release(cur, job.id, job.attempts)
                    log.info("job %s (%s) given back unfinished at shutdown", job.id, job.kind)
        except Exception as exc:
            if not isinstance(exc, (TimeoutError, *DATABASE_ERRORS)):  # or RELEASE_SECONDS ran out
                raise
            log.warning("could not give back %s unfinished job(s) at shutdown (%s); they are"
                        " claimed again when their lease expires", len(abandoned),
                        type(exc).__name__)

    async def run_until_idle(self) -> int:
        """Run ready jobs until none is left; returns how many ran (tests and tools)."""
        count = 0
        while await self.run_one():
            count += 1
        return count

    async def run_one(self) -> bool:
        database = self.database
        if database is None or not self.handlers:
            return False
        async with cursor(database.pool) as cur:
            row = await jobs_db.claim_next(cur, list(self.handlers), self.lease_seconds)
        if row is None:
            return False
        job = Job(id=row["id"], kind=row["kind"], payload=row["payload"],
                  attempts=row["attempts"], database=database, lease_seconds=self.lease_seconds,
                  rate_limit_waits=row["rate_limit_waits"])
        if self._stopping:  # claimed while stop() began: leave it for the next start
            async with cursor(database.pool) as cur:
                await jobs_db.release(cur, job.id, job.attempts)
            return False
        self._running[job.id] = job
        heartbeat = asyncio.create_task(self._heartbeat(job), name=f"job-lease-{job.id}")
        cancelled = False
        try:
            result = await self.handlers[job.kind](job)
        except asyncio.CancelledError:
            cancelled = True  # stop() gives the claim back; a crash leaves it to the lease
            raise
        except RetryLater as exc:
            if exc.rate_limit:
                wait, counted = rate_limit_wait(job.rate_limit_waits, exc.retry_after)
                await self._retry(job, str(exc), wait, counted, failure=None,
                                  rate_limited=True)
            else:
                await self._retry(job, str(exc), exc.delay, exc.count_attempt, failure=None)
        except Exception as exc:  # a handler bug or a provider failure: retry with backoff
            await self._retry(job, f"{type(exc).__name__}: {exc}", None, True, failure=exc)
        else:
            async with cursor(database.pool) as cur:
                await jobs_db.finish(cur, job.id, job.attempts, result)
        finally:
            await cancel_and_wait(heartbeat)
            if not cancelled:
                self._running.pop(job.id, None)
        return True

    async def _retry(self, job: Job, error: str, delay: float | None, count_attempt: bool,
                     failure: Exception | None, rate_limited: bool = False) -> None:
        wait = backoff_seconds(job.attempts) if delay is None else delay
        async with cursor(job.database.pool) as cur:
            status = await jobs_db.retry_or_fail(cur, job.id, job.attempts, error, wait,
                                                 count_attempt=count_attempt, model=job.model,
                                                 rate_limited=rate_limited)
        if status == "dead":
            log.error("job %s (%s) failed on its last attempt (%s) and is kept as a dead"
                      " letter: %s", job.id, job.kind, job.attempts, error,
                      exc_info=failure is not None)
        elif not count_attempt:
            log.info("job %s (%s) waits %.0f s (not counted as an attempt): %s", job.id,
                     job.kind, wait, error)
        else:
            log.warning("job %s (%s) failed (attempt %s, %s); retry in %.0f s: %s", job.id,
                        job.kind, job.attempts, status, wait, error,
                        exc_info=failure is not None)

    async def _heartbeat(self, job: Job) -> None:
        """Renew the lease while the handler runs: a long job keeps its claim, and a worker
        that dies stops renewing, so another claims the job soon after."""
        interval = self.lease_seconds / HEARTBEATS_PER_LEASE
        while True:
            await asyncio.sleep(interval)
            try:
                async with cursor(job.database.pool) as cur:
                    kept = await jobs_db.extend_lease(cur, job.id, self.lease_seconds,
                                                      job.attempts)
            except DATABASE_ERRORS as exc:
                log.warning("job %s (%s): lease not renewed (%s)", job.id, job.kind,
                            type(exc).__name__)
                continue
            if not kept:
                log.warning("job %s (%s) is no longer this run's (discarded, cancelled or"
                            " taken over); its result will not be recorded", job.id, job.kind)
                return

    async def _loop(self) -> None:
        while not self._stopping:
            try:
                ran = await self.run_one()
            except DATABASE_ERRORS as exc:
                log.warning("job runner cannot reach the database: %s", type(exc).__name__)
                ran = False
            except Exception:  # a bug must not end the worker: its jobs would never run
                log.exception("job runner error; the worker carries on")
                ran = False
            if ran or self._stopping:
                continue
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), IDLE_POLL_SECONDS)


@asynccontextmanager
async def running_jobs(runner: JobRunner, workers: int) -> AsyncIterator[None]:
    """Entered after the database and HTTP client: workers stop before those close."""
    database = runner.database
    starting = None
    if database is not None and workers > 0:
        # Workers start once the database is here, also when it arrives after start-up.
        starting = asyncio.create_task(database.run_when_ready(runner.start), name="jobs-start")
    yield
    if starting is not None:
        starting.cancel()
    await runner.stop()
