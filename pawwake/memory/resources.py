"""Process-wide memory resources: the embedder, the vector store and the tokenizer.

Opened after the database and HTTP client and before the job runner (whose embedding handler
is registered here), closed in reverse order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence

import psycopg2
from aiohttp import web

from pawwake import keys
from pawwake.llm.embeddings import Embedder
from pawwake.llm.engine_memory import trim_heap
from pawwake.memory.vectors import VectorStore
from pawwake.search.term_stats import TermStats
from pawwake.text import offload, tokens

log = logging.getLogger(__name__)


async def ensure_tokenizer(app: web.Application) -> None:
    """Load jieba off the event loop if nothing has yet (it takes ~0.6 s)."""
    if not tokens.is_loaded():
        data_dir = app[keys.SETTINGS].PAWWAKE_DATA_DIR
        await asyncio.get_running_loop().run_in_executor(None, _load_tokenizer, data_dir)


def _load_tokenizer(data_dir: str) -> None:
    tokens.load(data_dir)
    trim_heap()  # loading frees ~10 MB of buffers that glibc would otherwise keep resident


async def terms_for(app: web.Application, texts: Sequence[str], *,
                    budget: int | None = None) -> list[list[str]]:
    """Index terms for each text, cut off the event loop from a bounded part of each text
    (with ``budget``, the texts share that many characters)."""
    await ensure_tokenizer(app)
    return await offload.index_terms(texts, budget=budget)


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
