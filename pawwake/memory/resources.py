"""Process-wide search resources: the embedder, the memory vector store, term statistics, and
the tokenizer loaded at start when memory or recall is on.

Opened after the database and HTTP client and before the job runner, closed in reverse order.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from pawwake.database import Database, connected_database
from pawwake.live_settings import RuntimeConfig
from pawwake.llm.embeddings import Embedder, UsageRecorder
from pawwake.llm.sse import TokenUsage
from pawwake.llm.upstream import UsageBooking, book_usage
from pawwake.memory.vectors import VectorStore
from pawwake.search.terms import ensure_tokenizer
from pawwake.search.vector_index import warm_if_numpy
from pawwake.settings import Settings
from pawwake.tasks import running_beside

log = logging.getLogger(__name__)


def embedding_usage(database: Database | None) -> UsageRecorder:
    """The embedder's usage recorder: each API call's tokens booked as ``embed`` while the
    database is here (before it connects, or with it turned off, nothing is booked)."""
    async def record(model: str, usage: TokenUsage) -> None:
        connected = connected_database(database)
        if connected is not None:
            await book_usage(UsageBooking(connected.pool, "embed"), usage, model)

    return record


@asynccontextmanager
async def open_embedder(settings: Settings, config: RuntimeConfig, database: Database | None,
                        embedder: Embedder, vectors: VectorStore) -> AsyncIterator[None]:
    """The embedder while the app runs (the vector index warmed once the database is here); the tokenizer too when memory or recall is on."""
    if database is not None:
        if settings.MEMORY_ENABLED or settings.CONVERSATION_RECALL_ENABLED:
            await ensure_tokenizer(settings.PAWWAKE_DATA_DIR)
    try:
        async with running_beside(_when_database(config, database, embedder, vectors),
                                  name="warm-vector-index"):
            yield
    finally:
        await embedder.close()


async def _when_database(config: RuntimeConfig, database: Database | None, embedder: Embedder,
                         vectors: VectorStore) -> None:
    """Once the database is here (at start or later): warm the vector index."""
    if database is None:
        return
    await database.wait_ready()
    await _warm_vector_index(await config.fresh(), database, embedder, vectors)


async def _warm_vector_index(settings: Settings, database: Database, embedder: Embedder,
                             store: VectorStore) -> None:
    if settings.MEMORY_ENABLED and settings.MEMORY_VECTOR_ENABLED:
        await warm_if_numpy(store.index, store, settings, database, embedder, "memory")
        if store.questions.bound(settings):
            await warm_if_numpy(store.questions.index, store, settings, database, embedder,
                                "memory question")
