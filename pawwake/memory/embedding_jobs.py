"""Asking for memory vectors to be (re)computed: one durable job fills every missing vector."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pawwake.database import connected_database
from pawwake.db.jobs import enqueue_job

if TYPE_CHECKING:
    from pawwake.services import Services

EMBED_KIND = "memory_embed"


async def request_embedding(services: Services) -> None:
    """Call after memories were added or their content changed (rows without a vector).

    At most one unfinished embedding job exists; it embeds every row that lacks a current
    vector, so calling this often is cheap.
    """
    database = connected_database(services.database)
    if database is None:
        return
    await enqueue_job(database.pool, EMBED_KIND, {}, dedupe_key="pending")
    services.jobs.wake()
