"""Process-wide memory resources: the embedder, the vector store and the tokenizer.

Opened after the database and HTTP client and before the job runner (whose embedding handler
is registered here), closed in reverse order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import psycopg2

from pawwake.database import Database
from pawwake.live_settings import RuntimeConfig
from pawwake.llm.embeddings import Embedder
from pawwake.llm.engine_memory import trim_heap
from pawwake.memory.vectors import VectorStore
from pawwake.settings import Settings
from pawwake.text import offload, tokens

log = logging.getLogger(__name__)


async def ensure_tokenizer(data_dir: str) -> None:
    """Load jieba off the event loop if nothing has yet (it takes ~0.6 s)."""
    if not tokens.is_loaded():
        await asyncio.get_running_loop().run_in_executor(None, _load_tokenizer, data_dir)


def _load_tokenizer(data_dir: str) -> None:
    tokens.load(data_dir)
    trim_heap()  # loading frees ~10 MB of buffers that glibc would otherwise keep resident


async def terms_for(data_dir: str, texts: Sequence[str], *,
                    budget: int | None = None) -> list[list[str]]:
    """Index terms for each text, cut off the event loop from a bounded part of each text
    (with ``budget``, the texts share that many characters); the tokenizer's user words
    live in ``data_dir``."""
    await ensure_tokenizer(data_dir)
    return await offload.index_terms(texts, budget=budget)


@asynccontextmanager
async def open_embedder(settings: Settings, config: RuntimeConfig, database: Database | None,
                        embedder: Embedder, vectors: VectorStore) -> AsyncIterator[None]:
    """The embedder while the app runs (its usage recorded and the vector index warmed once
    the database is here); the tokenizer too when memory or recall is on."""
    if database is not None:
        if settings.MEMORY_ENABLED or settings.CONVERSATION_RECALL_ENABLED:
            await ensure_tokenizer(settings.PAWWAKE_DATA_DIR)
    warming = asyncio.create_task(_when_database(config, database, embedder, vectors),
                                  name="warm-vector-index")
    try:
        yield
    finally:
        warming.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await warming
        await embedder.close()


async def _when_database(config: RuntimeConfig, database: Database | None, embedder: Embedder,
                         vectors: VectorStore) -> None:
    """Once the database is here (at start or later): record embedding usage in it and warm
    the vector index."""
    if database is None:
        return
    await database.wait_ready()
    embedder.attach(database.pool)
    await _warm_vector_index(await config.fresh(), database, embedder, vectors)


async def _warm_vector_index(settings: Settings, database: Database, embedder: Embedder,
                             store: VectorStore) -> None:
    """Load the numpy vector index in the background when it is the one searches will use
    (at 100k memories that takes seconds the first chat request should not wait)."""
    if not (settings.MEMORY_ENABLED and settings.MEMORY_VECTOR_ENABLED):
        return
    provenance = embedder.configured_provenance(settings)
    if store.backend(settings, database, provenance) != "numpy":
        return
    try:
        await store.index.warm(database.pool, provenance)
    except (psycopg2.Error, OSError) as exc:
        log.warning("could not preload the vector index: %s", type(exc).__name__)
