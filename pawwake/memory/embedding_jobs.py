"""Asking for memory vectors to be (re)computed: one durable job fills every missing vector."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pawwake.database import connected_database
from pawwake.db.jobs import enqueue, hasten
from pawwake.db.pool import Cursor, cursor

if TYPE_CHECKING:
    from pawwake.memory.faces import MemoryWrites

EMBED_KIND = "memory_embed"
DEDUPE_KEY = "pending"


async def enqueue_embedding(cur: Cursor, *, delay_seconds: float = 0.0) -> int | None:
    """Ask for vectors inside the caller's transaction, so the rows that need them and the
    job that makes them commit together (wake the runner after the commit).

    At most one unfinished job exists. ``delay_seconds`` queues a new one to run later (a
    write that embeds its rows itself, ``fresh_vectors``); a request for now moves a job that
    waits for later up to now. Returns the new job's id, or None when one was queued already.
    """
    job_id = await enqueue(cur, EMBED_KIND, {}, dedupe_key=DEDUPE_KEY,
                           delay_seconds=delay_seconds)
    if job_id is None and delay_seconds <= 0:
        await hasten(cur, EMBED_KIND, DEDUPE_KEY)
    return job_id


async def request_embedding(writes: MemoryWrites) -> None:
    """Call after memories were added or their content changed (rows without a vector).

    It embeds every row that lacks a current vector, so calling this often is cheap.
    """
    database = connected_database(writes.database)
    if database is None:
        return
    async with cursor(database.pool) as cur:
        await enqueue_embedding(cur)
    writes.jobs.wake()
