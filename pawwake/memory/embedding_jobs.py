"""Asking for memory vectors to be (re)computed: one durable job fills every missing vector."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pawwake.database import connected_database
from pawwake.db.jobs import enqueue
from pawwake.db.pool import Cursor, cursor

if TYPE_CHECKING:
    from pawwake.memory.faces import MemoryWrites

EMBED_KIND = "memory_embed"


async def enqueue_embedding(cur: Cursor) -> None:
    """Ask for vectors inside the caller's transaction, so the rows that need them and the
    job that makes them commit together (wake the runner after the commit)."""
    await enqueue(cur, EMBED_KIND, {}, dedupe_key="pending")


async def request_embedding(writes: MemoryWrites) -> None:
    """Call after memories were added or their content changed (rows without a vector).

    At most one unfinished embedding job exists; it embeds every row that lacks a current
    vector, so calling this often is cheap.
    """
    database = connected_database(writes.database)
    if database is None:
        return
    async with cursor(database.pool) as cur:
        await enqueue_embedding(cur)
    writes.jobs.wake()
