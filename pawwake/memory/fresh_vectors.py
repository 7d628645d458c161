"""Vectors for memories just written, made by the write itself: found by meaning at once,
not after the background job has caught up.

A write that adds or changes text commits its rows together with the durable ``memory_embed``
job. When the write embeds the rows itself (vector search on, at most ``MAX_ROWS`` rows), that
job is queued ``FALLBACK_DELAY_SECONDS`` ahead so it does not embed the same rows meanwhile;
right after the commit the write embeds them and waits at most ``WAIT_SECONDS`` for them to be
stored. A slower provider finishes in the background (a tracked task); a failure leaves the
rows to the job, which embeds only what is still missing. Nothing depends on the write's own
attempt: a crash right after the commit still leaves the job.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import psycopg2

from pawwake.database import Database, connected_database
from pawwake.db.errors import DatabaseUnavailable
from pawwake.db.vector_rows import content_sha
from pawwake.llm.embeddings import EmbeddingError
from pawwake.memory import vectors

if TYPE_CHECKING:
    from pawwake.memory.faces import MemoryWrites
    from pawwake.settings import Settings

log = logging.getLogger(__name__)

MAX_ROWS = 64  # a larger import is embedded by the job alone
WAIT_SECONDS = 2.0  # the longest a write waits for its vectors before it answers
FALLBACK_DELAY_SECONDS = 10.0  # when the job looks for what the write did not embed


def job_delay(settings: Settings, count: int) -> float:
    """When the embedding job queued with a write of ``count`` rows should run."""
    return FALLBACK_DELAY_SECONDS if _embeds_on_write(settings, count) else 0.0


async def embed_written(writes: MemoryWrites, rows: Sequence[Mapping[str, Any]]) -> None:
    """After the commit of a write that queued the job with ``job_delay``: embed and store
    the rows' vectors (``id`` and ``content``), waiting at most ``WAIT_SECONDS``; or, for a
    write the job embeds alone, wake the job."""
    if not rows:
        return
    database = connected_database(writes.database)
    if database is None:
        return
    settings = writes.config.current()
    if not _embeds_on_write(settings, len(rows)):
        writes.jobs.wake()
        return
    texts = [(int(row["id"]), str(row["content"])) for row in rows]
    task = writes.tasks.spawn(_embed_and_store(writes, settings, database, texts),
                                name="memory-vectors-on-write")
    # Not cancelled when the wait ends or the request goes: the vectors still arrive.
    await asyncio.wait([task], timeout=WAIT_SECONDS)


def _embeds_on_write(settings: Settings, count: int) -> bool:
    return bool(settings.MEMORY_VECTOR_ENABLED) and 0 < count <= MAX_ROWS


async def _embed_and_store(writes: MemoryWrites, settings: Settings, database: Database,
                           texts: Sequence[tuple[int, str]]) -> None:
    """What the job would do for these rows: never mixing vectors of two models."""
    embedder = writes.embedder
    try:
        expected = embedder.configured_provenance(settings)
        if not await vectors.adopt_provenance(database, expected):
            return  # vectors of another model are stored: a confirmed rebuild decides
        matrix, made_by = await embedder.embed_passages(settings, [text for _, text in texts])
        if made_by != expected and not await vectors.adopt_provenance(database, made_by):
            return
        await writes.vectors.store(database, made_by, [
            (memory_id, content_sha(text), matrix[n]) for n, (memory_id, text) in
            enumerate(texts)])
    except EmbeddingError as exc:
        log.info("%s new memory vectors left to the embedding job: %s", len(texts), exc)
    except (psycopg2.Error, OSError, DatabaseUnavailable) as exc:
        log.warning("%s new memory vectors left to the embedding job: %s", len(texts),
                    type(exc).__name__)
