"""Starting the memory vector backfill and reporting its progress and provenance."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from pawwake.database import require_database
from pawwake.db import jobs as jobs_db
from pawwake.db import memory_embeddings as vectors_db
from pawwake.db import memory_questions as questions_db
from pawwake.db.errors import DatabaseUnavailable
from pawwake.db.pool import cursor
from pawwake.llm.embeddings import EmbeddingError, Provenance
from pawwake.memory import vectors
from pawwake.memory.embedding_jobs import EMBED_KIND, enqueue_embedding
from pawwake.memory.embedding_worker import QUESTION_LABEL

if TYPE_CHECKING:
    from pawwake.memory.faces import MemoryEmbedding
    from pawwake.settings import Settings

log = logging.getLogger(__name__)

MEMORY_PART, QUESTION_PART = "memories", "questions"
_JOB_STATUS = {"pending": "queued", "running": "running", "done": "done", "failed": "failed",
               "dead": "failed", "discarded": "failed"}


class RebuildNeedsConfirmation(Exception):
    """Stored vectors come from another provider/model/dimension; rebuilding replaces them."""

    def __init__(self, state: vectors.ProvenanceState) -> None:
        stored = state.stored or {}
        super().__init__(
            f"Stored memory vectors were made by {stored.get('provider')}/"
            f"{stored.get('model')} ({stored.get('dim')} dims); the configured provider is"
            f" {state.configured.provider}/{state.configured.model}"
            f" ({state.configured.dim} dims). Rebuilding re-embeds every memory and replaces"
            " the old vectors: send {\"confirm_rebuild\": true} to proceed.")
        self.state = state


class VectorsDisabled(Exception):
    """MEMORY_VECTOR_ENABLED is off: there is nothing to backfill."""


async def start_backfill(embedding: MemoryEmbedding, *, settings: Settings,
                         confirm_rebuild: bool = False
                         ) -> dict[str, Any]:
    """Queue the embedding job (at most one unfinished); switch provenance when confirmed."""
    database = require_database(embedding.database, "database_unavailable")
    if not settings.MEMORY_VECTOR_ENABLED:
        raise VectorsDisabled("Vector search is off (MEMORY_VECTOR_ENABLED=false).")
    provenance = await embedding.embedder.provenance(settings)  # may raise EmbeddingError
    state = await vectors.provenance_state(database, provenance)
    rebuilding = False
    if state.needs_rebuild:
        if not confirm_rebuild:
            raise RebuildNeedsConfirmation(state)
        await vectors.confirm_provenance(database, provenance)
        rebuilding = True
        log.info("memory vector rebuild confirmed")
    async with cursor(database.pool) as cur:
        job_id = await enqueue_embedding(cur)
        if job_id is None:
            existing = await jobs_db.unfinished_of_kind(cur, EMBED_KIND)
            job_id = existing["id"] if existing else None
    embedding.jobs.wake()
    return {"job_id": job_id, "rebuild": rebuilding, "provenance": provenance.as_dict()}


async def backfill_status(embedding: MemoryEmbedding, *, settings: Settings) -> dict[str, Any]:
    """``{status, done, total, questions, part, provenance, stored_provenance, ...}``.

    ``done``/``total`` count memories, ``questions`` the memory model's written questions:
    one job embeds both, memories first, and reports the part it is in (``part``, while it
    runs), so neither count is ever shown as the other."""
    database = require_database(embedding.database, "database_unavailable")
    embedder = embedding.embedder
    error = None
    try:
        provenance: Provenance = await embedder.provenance(settings)
    except EmbeddingError as exc:
        provenance, error = embedder.configured_provenance(settings), str(exc)
    state = await vectors.provenance_state(database, provenance)
    async with cursor(database.pool) as cur:
        job = await jobs_db.latest_of_kind(cur, EMBED_KIND)
    status = _JOB_STATUS.get(job["status"], job["status"]) if job else "idle"
    progress = job["progress"] if job else {}
    running = status in ("queued", "running") and "total" in progress
    part = QUESTION_PART if running and progress.get("part") == QUESTION_LABEL else MEMORY_PART
    counted = (int(progress.get("done", 0)), int(progress["total"])) if running else None
    async with cursor(database.pool) as cur:  # the part the job reports is not counted again
        if counted is not None and part == MEMORY_PART:
            done, total = counted
        else:
            done, total = await vectors_db.coverage(cur, provenance)
        if counted is not None and part == QUESTION_PART:
            asked = counted
        else:
            asked = await questions_db.coverage(cur, provenance)
    return {
        "status": status,
        "done": done,
        "total": total,
        "questions": {"done": asked[0], "total": asked[1]},
        "part": part if running else None,
        "provenance": provenance.as_dict(),
        "stored_provenance": state.stored,
        "needs_rebuild": state.needs_rebuild,
        "vectors_enabled": bool(settings.MEMORY_VECTOR_ENABLED),
        "last_error": (job["last_error"] if job else None) or error,
        "job_id": job["id"] if job else None,
    }


def _database(embedding: MemoryEmbedding) -> Any:
    database = embedding.database
    if database is None:
        raise DatabaseUnavailable("The database is disabled (DATABASE_ENABLED=false).")
    return database
