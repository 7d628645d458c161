"""Keeping conversation recall's indexes current: keyword terms on write, vectors by a job.

Writers that hold the tokenizer store terms with the row; anything written without them (recall
was off, or another writer) has ``search_terms`` NULL and is indexed by ``index_pending``, which
searches and the rebuild endpoint call. Vectors are filled by one durable, resumable job that
embeds every searchable message lacking a current vector (an edit makes a vector stale).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from pawwake.database import connected_database, require_database
from pawwake.db import conversation_turns as turns_db
from pawwake.db import fragments as db
from pawwake.db import jobs as jobs_db
from pawwake.db import message_vectors
from pawwake.db.pool import cursor, transaction
from pawwake.jobs import Job
from pawwake.llm.embeddings import EmbeddingError, Provenance
from pawwake.search import terms as search_terms
from pawwake.search.embedding_sweep import EmbeddingTarget, embed_missing, on_pool, retry_for
from pawwake.settings import Settings

if TYPE_CHECKING:
    from pawwake.recall.faces import ConversationRecall
    from pawwake.settings import Settings

log = logging.getLogger(__name__)

EMBED_KIND = "conversation_embed"
VECTOR_TABLE = "conversation_embeddings"
INDEX_BATCH = 500
EMBED_BATCH = 32
TURN_INDEX_CHARS = 200_000  # about 2 s of cutting

async def terms_for(recall: ConversationRecall, texts: Sequence[str]) -> list[list[str]]:
    """Index terms of one turn's messages (or one search's phrases), cut while the request
    waits: together they are indexed from at most ``TURN_INDEX_CHARS`` characters (a 200-message
    turn of long texts took 30 s to cut in full; each long message now keeps its share of its
    head and tail). Catch-up indexing of stored rows keeps the full per-text bound."""
    return await search_terms.terms_for(recall.data_dir, texts,
                                   budget=TURN_INDEX_CHARS)


async def enqueue_embedding(cur: Any) -> None:
    """Ask for vectors inside the caller's transaction (one pending job covers every row)."""
    await jobs_db.enqueue(cur, EMBED_KIND, {}, dedupe_key="pending")


async def request_embedding(recall: ConversationRecall) -> None:
    database = connected_database(recall.database)
    if database is None:
        return
    async with cursor(database.pool) as cur:
        await jobs_db.enqueue(cur, EMBED_KIND, {}, dedupe_key="pending")
    recall.jobs.wake()


async def index_pending(recall: ConversationRecall, *, limit: int | None = None) -> int:
    """Give terms to messages that have none; returns how many were indexed."""
    database = require_database(recall.database)
    done, after = 0, 0
    while limit is None or done < limit:
        batch = INDEX_BATCH if limit is None else min(INDEX_BATCH, limit - done)
        async with cursor(database.pool) as cur:
            rows = await db.unindexed_messages(cur, after, batch)
        if not rows:
            break
        terms = await search_terms.terms_for(recall.data_dir,
                                        [row["content"] for row in rows])
        async with transaction(database.pool) as cur:
            await turns_db.set_search_terms(
                cur, [(row["id"], t) for row, t in zip(rows, terms, strict=True)])
        done += len(rows)
        after = rows[-1]["id"]
    return done


async def reindex_messages(recall: ConversationRecall, cur: Any, ids_and_texts: Sequence[
        tuple[int, str]], *, settings: Settings) -> None:
    """After an edit or import inside ``cur``'s transaction: new terms, and a vector job."""
    if not settings.CONVERSATION_RECALL_ENABLED:
        await db.clear_terms(cur, [i for i, _ in ids_and_texts])
        return
    terms = await search_terms.terms_for(recall.data_dir, [text for _,
                                                                         text in ids_and_texts])
    await turns_db.set_search_terms(
        cur, [(i, t) for (i, _), t in zip(ids_and_texts, terms, strict=True)])
    await enqueue_embedding(cur)


async def embed_missing_messages(recall: ConversationRecall, job: Job) -> dict[str, Any]:
    """Job handler: embed searchable messages lacking a current vector, batch by batch."""
    database = job.database
    settings = await recall.config.fresh()
    if not settings.CONVERSATION_RECALL_ENABLED:
        return {"skipped": "conversation recall is off"}
    try:
        provenance = await recall.embedder.provenance(settings)
    except EmbeddingError as exc:
        raise retry_for(exc, job) from None
    await ensure_vector_index(recall, settings, provenance)
    target = EmbeddingTarget(
        "conversation", needing=on_pool(database.pool, message_vectors.messages_needing_vectors),
        coverage=on_pool(database.pool, message_vectors.vector_coverage),
        store=partial(recall.recall_vectors.store, database.pool),
        switch="CONVERSATION_RECALL_ENABLED")
    return await embed_missing(recall.config, recall.embedder, job, provenance, target,
                               EMBED_BATCH)


async def ensure_vector_index(recall: ConversationRecall, settings: Settings,
                              provenance: Provenance) -> bool:
    """The provenance's HNSW index on message vectors (pgvector only; built once, concurrently,
    so ingest goes on). True when searches can use it."""
    database = require_database(recall.database)
    return await recall.vectors.ensure_hnsw_index(database, settings, provenance,
                                                     table=VECTOR_TABLE)


def request_vector_index(recall: ConversationRecall, settings: Settings,
                         provenance: Provenance) -> None:
    """From the search path: build a missing index on the message vectors in the background
    (once per process: ``VectorBackend.request_hnsw_index``)."""
    recall.vectors.request_hnsw_index(recall.tasks, require_database(recall.database),
                                      settings, provenance, VECTOR_TABLE)


async def index_status(recall: ConversationRecall, *, settings: Settings) -> dict[str, Any]:
    """Keyword index coverage, vector coverage and the embedding job's state."""
    database = require_database(recall.database)
    async with cursor(database.pool) as cur:
        counts = await db.index_counts(cur)
    provenance = recall.embedder.configured_provenance(settings)
    async with cursor(database.pool) as cur:
        done, total = await message_vectors.vector_coverage(cur, provenance)
        job = await jobs_db.latest_of_kind(cur, EMBED_KIND)
    return {
        "enabled": bool(settings.CONVERSATION_RECALL_ENABLED),
        "keyword_index": counts,
        "vectors": {"done": done, "total": total, "provenance": provenance.as_dict()},
        "job": None if job is None else {
            "status": job["status"], "progress": job["progress"], "result": job["result"],
            "last_error": job["last_error"],
            "updated_at": job["updated_at"].isoformat() if job["updated_at"] else None},
    }

