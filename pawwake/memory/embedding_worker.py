"""The "memory_embed" job: give every memory, and every question the memory model wrote for
one, a vector of the configured provenance.

Works in batches in id order and commits each batch, so an interrupted run loses at most one
batch and the next run starts with what is still missing. Running it again when nothing is
missing embeds nothing. The questions follow the memories in the same run (their own batches
and coverage), under the memories' provenance: a confirmed rebuild for another model re-embeds
them too. Progress is ``done/total`` of the part the job is in, named by ``part`` (memories,
active or archived, then questions), so the dashboard never shows one as the other.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING, Any

from pawwake.db import memory_embeddings as vectors_db
from pawwake.db import memory_questions as questions_db
from pawwake.jobs import Job
from pawwake.llm.embeddings import EmbeddingError
from pawwake.memory import vectors
from pawwake.search.embedding_sweep import EmbeddingTarget, embed_missing, on_pool, retry_for

if TYPE_CHECKING:
    from pawwake.memory.faces import MemoryEmbedding

log = logging.getLogger(__name__)

DEFAULT_BATCH = 32
QUESTION_TABLE = questions_db.QUESTION_VECTORS.name
QUESTION_LABEL = "memory question"  # the part of the job (and its progress) that embeds questions


async def embed_missing_memories(embedding: MemoryEmbedding, job: Job) -> dict[str, Any]:
    """Job handler: embed rows lacking a current vector; returns the final coverage."""
    database = job.database
    embedder, store = embedding.embedder, embedding.vectors
    settings = await embedding.config.fresh()
    if not settings.MEMORY_VECTOR_ENABLED:
        return {"skipped": "vector search is off (MEMORY_VECTOR_ENABLED=false)"}
    batch = max(1, int(job.payload.get("batch_size") or DEFAULT_BATCH))
    try:
        provenance = await embedder.provenance(settings)
    except EmbeddingError as exc:
        raise retry_for(exc, job) from None
    if not await vectors.adopt_provenance(database, provenance):
        log.warning("memory vectors were made by another model; waiting for a confirmed rebuild")
        return {"skipped": "needs_rebuild", "provenance": provenance.as_dict()}
    await store.ensure_hnsw_index(database, settings, provenance)
    await store.ensure_hnsw_index(database, settings, provenance, QUESTION_TABLE)

    target = EmbeddingTarget("memory",
                             needing=on_pool(database.pool, vectors_db.rows_needing_vectors),
                             coverage=on_pool(database.pool, vectors_db.coverage),
                             store=partial(store.store, database),
                             switch="MEMORY_VECTOR_ENABLED")
    result = await embed_missing(embedding.config, embedding.embedder, job, provenance, target,
                                 batch)
    if "stopped" in result:
        return result
    questions = EmbeddingTarget(QUESTION_LABEL,
                                needing=on_pool(database.pool, questions_db.rows_needing_vectors),
                                coverage=on_pool(database.pool, questions_db.coverage),
                                store=partial(store.questions.store, database),
                                switch="MEMORY_VECTOR_ENABLED")
    asked = await embed_missing(embedding.config, embedding.embedder, job, provenance,
                                questions, batch)
    return {**result, "questions": {k: v for k, v in asked.items() if k != "provenance"}}

