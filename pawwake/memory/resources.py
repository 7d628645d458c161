"""Process-wide search resources: the embedder, the memory vector store, term statistics, and
the tokenizer loaded at start when memory or recall is on.

Opened after the database and HTTP client and before the job runner, closed in reverse order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import psycopg2
from aiohttp import web

from pawwake import keys
from pawwake.llm.embeddings import Embedder
from pawwake.memory.vectors import VectorStore
from pawwake.search.term_stats import TermStats
from pawwake.search.terms import ensure_tokenizer

log = logging.getLogger(__name__)


async def embedder_ctx(app: web.Application) -> AsyncIterator[None]:
    """cleanup_ctx: embedder, vector store and term statistics; the tokenizer too when memory
    or recall is on."""
    settings = app[keys.SETTINGS]
    database = app[keys.DATABASE]
    embedder = Embedder(app[keys.HTTP], database.pool if database and database.ready else None)
    app[keys.EMBEDDER] = embedder
    app[keys.VECTORS] = VectorStore()
    app[keys.TERM_STATS] = TermStats()
    if database is not None:
        if settings.MEMORY_ENABLED or settings.CONVERSATION_RECALL_ENABLED:
            await ensure_tokenizer(app)
    warming = asyncio.create_task(_when_database(app), name="warm-vector-index")
    try:
        yield
    finally:
        warming.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await warming
        await embedder.close()


async def _when_database(app: web.Application) -> None:
    """Once the database is here (at start or later): record embedding usage in it and warm
    the vector index."""
    database = app[keys.DATABASE]
    if database is None:
        return
    await database.wait_ready()
    app[keys.EMBEDDER].attach(database.pool)
    await _warm_vector_index(app)


async def _warm_vector_index(app: web.Application) -> None:
    """Load the numpy vector index in the background when it is the one searches will use
    (at 100k memories that takes seconds the first chat request should not wait)."""
    database = app[keys.DATABASE]
    settings = await app[keys.CONFIG].fresh()
    if database is None or not (settings.MEMORY_ENABLED and settings.MEMORY_VECTOR_ENABLED):
        return
    provenance = app[keys.EMBEDDER].configured_provenance(settings)
    store = app[keys.VECTORS]
    if store.backend(settings, database, provenance) != "numpy":
        return
    try:
        await store.index.warm(database.pool, provenance)
    except (psycopg2.Error, OSError) as exc:
        log.warning("could not preload the vector index: %s", type(exc).__name__)
