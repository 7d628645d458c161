"""The "memory_embed" job: give every memory a vector of the configured provenance.

Works in batches in id order and commits each batch, so an interrupted run loses at most one
batch and the next run starts with what is still missing. Progress is ``done/total`` over all
memories (active or archived). Running it again when nothing is missing embeds nothing.
"""

from __future__ import annotations

import logging
from typing import Any

from pawwake import keys
from pawwake.db import memory_embeddings as vectors_db
from pawwake.jobs import Job, RetryLater, backoff_seconds
from pawwake.llm.embeddings import EmbeddingError
from pawwake.memory import vectors
from pawwake.memory.embedding_jobs import EMBED_KIND

log = logging.getLogger(__name__)

DEFAULT_BATCH = 32
MAX_SWEEPS = 3  # rows changed while a sweep ran are picked up by the next one


async def embed_missing_memories(job: Job) -> dict[str, Any]:
    """Job handler: embed rows lacking a current vector; returns the final coverage."""
    app = job.app
    database = app[keys.DATABASE]
    assert database is not None
    config = app[keys.CONFIG]
    embedder, store = app[keys.EMBEDDER], app[keys.VECTORS]
    settings = await config.fresh()
    if not settings["MEMORY_VECTOR_ENABLED"]:
        return {"skipped": "vector search is off (MEMORY_VECTOR_ENABLED=false)"}
    batch = max(1, int(job.payload.get("batch_size") or DEFAULT_BATCH))
    try:
        provenance = await embedder.provenance(settings)
    except EmbeddingError as exc:
        raise _retry(exc, job) from None
    if not await vectors.adopt_provenance(database, provenance):
        log.warning("memory vectors were made by another model; waiting for a confirmed rebuild")
        return {"skipped": "needs_rebuild", "provenance": provenance.as_dict()}
    await store.ensure_hnsw_index(database, settings, provenance)
    if not await vectors_db.rows_needing_vectors(database.pool, provenance, 0, 1):
        return {"embedded": 0, "provenance": provenance.as_dict()}  # the common case: no count
    done, total = await vectors_db.coverage(database.pool, provenance)
    await job.progress(done=done, total=total)
    embedded = 0
    for _sweep in range(MAX_SWEEPS):
        embedded_now = 0
        after = 0
        while True:
            rows = await vectors_db.rows_needing_vectors(database.pool, provenance, after, batch)
            if not rows:
                break
            settings = await config.fresh()
            if embedder.configured_provenance(settings) != provenance:
                raise RetryLater("embedding settings changed during the backfill", delay=0)
            texts = [row["content"] for row in rows]
            try:
                matrix, made_by = await embedder.embed_passages(settings, texts)
            except EmbeddingError as exc:
                raise _retry(exc, job) from None
            if made_by != provenance:
                raise RetryLater("the embedding provider changed its answer size", delay=0)
            stored = await store.store(database, provenance, [
                (row["id"], vectors_db.content_sha(row["content"]), matrix[i])
                for i, row in enumerate(rows)])
            embedded_now += len(stored)
            done = min(total, done + len(stored))
            after = rows[-1]["id"]
            await job.progress(done=done, total=total)
            await job.keep_alive()
        embedded += embedded_now
        if embedded_now == 0:
            break
    done, total = await vectors_db.coverage(database.pool, provenance)
    await job.progress(done=done, total=total)
    log.info("memory vectors: %s embedded, %s of %s current (%s)", embedded, done, total,
             provenance.model)
    return {"embedded": embedded, "done": done, "total": total,
            "provenance": provenance.as_dict()}


def _retry(exc: EmbeddingError, job: Job) -> RetryLater:
    if exc.rate_limited:
        return RetryLater(str(exc), delay=exc.retry_after or 30.0, count_attempt=False)
    return RetryLater(str(exc), delay=backoff_seconds(job.attempts))


def register(app: Any) -> None:
    app[keys.JOBS].register(EMBED_KIND, embed_missing_memories)
