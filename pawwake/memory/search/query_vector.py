"""The query's side of semantic search: its embedding, started as early as possible, checked
against the stored vectors' provenance, with the semantic background it is measured on; or
the reason the search runs on keywords only (``Fallback``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from pawwake.database import Database, require_database
from pawwake.db.pool import DATABASE_ERRORS
from pawwake.llm.embeddings import (
    EmbeddingError,
    Provenance,
    QueryEmbeddingShed,
    QueryEmbeddingTimeout,
    semantic_threshold,
)
from pawwake.memory import vectors
from pawwake.memory.search.results import Fallback
from pawwake.priority_worker import CHAT
from pawwake.search.background import Background, Reference, reference_for
from pawwake.settings import Settings
from pawwake.text.language import language_of
from pawwake.text.query import nothing_to_search

if TYPE_CHECKING:
    from pawwake.memory.faces import MemorySearch

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass
class QueryVector:
    """A query's vector as the search uses it."""

    query: np.ndarray
    provenance: Provenance
    threshold: float
    backend: str
    reference: Reference
    background: Background
    language: str  # the query's


def start_vector(search: MemorySearch, settings: Settings, query: str,
                  timings: dict[str, float] | None = None, priority: int = CHAT
                  ) -> tuple[Coroutine[Any, Any, tuple[QueryVector | None, Fallback | None]], bool]:
    """Start the query's embedding now (a local model's lane takes it before the caller's next
    step runs). Returns what gives the query's vector when semantic search is possible, else
    the reason it is not (no reason for a message with nothing to search, which is not
    embedded at all), and whether an embedding is on its way."""
    if not settings.MEMORY_VECTOR_ENABLED:
        return _given((None, Fallback("vectors_off", "Vector search is off"
                                     " (MEMORY_VECTOR_ENABLED=false); keywords only."))), False
    if nothing_to_search(query):
        return _given((None, None)), False
    database = require_database(search.database)
    try:
        embedding = search.embedder.start_query(settings, query, timings=timings,
                                                  priority=priority)
    except QueryEmbeddingShed as exc:  # counted and logged by the embedder
        return _given((None, Fallback("busy", f"The embedding model is busy: {exc}; keywords"
                                              " only."))), False
    return _semantic_query(search, settings, database, embedding, query), True


async def _given(value: T) -> T:
    return value


async def _semantic_query(search: MemorySearch, settings: Settings, database: Database,
                          embedding: Awaitable[tuple[np.ndarray, Provenance]], query_text: str
                          ) -> tuple[QueryVector | None, Fallback | None]:
    """The started embedding's vector, checked against the stored vectors' provenance."""
    embedder = search.embedder
    # The stored vectors' provenance is read while the query is embedded, not after it.
    expected = embedder.configured_provenance(settings)
    checking = asyncio.ensure_future(vectors.provenance_state(database, expected))
    referencing = asyncio.ensure_future(
        reference_for(search.references, embedder, settings, expected))
    try:
        vector, provenance = await embedding
    except EmbeddingError as exc:
        checking.cancel()
        with contextlib.suppress(asyncio.CancelledError, *DATABASE_ERRORS):
            await checking
        await _dropped(referencing)
        if isinstance(exc, QueryEmbeddingTimeout):
            log.warning("memory search ran on keywords only: the query's vector missed its"
                        " %g s deadline (QUERY_EMBEDDING_TIMEOUT)", exc.seconds)
            return None, Fallback("timeout", f"The query's vector took longer than"
                                  f" {exc.seconds:g} s (QUERY_EMBEDDING_TIMEOUT); keywords only.")
        log.warning("query embedding failed: %s", exc)
        return None, Fallback("failed", f"Query embedding failed ({exc}); keywords only.")
    except BaseException:
        checking.cancel()
        await _dropped(referencing)
        raise
    state = await checking
    if provenance != expected:  # the API answered with another dimension than configured
        state = await vectors.provenance_state(database, provenance)
    if state.needs_rebuild:
        await _dropped(referencing)
        stored = state.stored or {}
        return None, Fallback("rebuild", (
            f"Stored vectors were made by {stored.get('provider')}/{stored.get('model')}"
            f" ({stored.get('dim')} dims) but {provenance.provider}/{provenance.model}"
            f" ({provenance.dim} dims) is configured; keywords only until the vectors are"
            " rebuilt (POST /api/admin/backfill-memory-embeddings with confirm_rebuild)."))
    if provenance != expected:
        await _dropped(referencing)
        referencing = asyncio.ensure_future(
            reference_for(search.references, embedder, settings, provenance))
    try:
        reference = await referencing
    except EmbeddingError as exc:
        log.warning("the semantic background could not be embedded: %s", exc)
        return None, Fallback("failed", f"The semantic background could not be embedded ({exc});"
                                        " keywords only.")
    return QueryVector(vector, provenance, semantic_threshold(settings, provenance.provider),
                     await search.vectors.choose(settings, database, provenance),
                     reference, reference.background(vector), language_of(query_text)), None


async def _dropped(started: asyncio.Future[Any]) -> None:
    """Let go of a side computation the search no longer needs (its failure included)."""
    if not started.done():
        started.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await started
