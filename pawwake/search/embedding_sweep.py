"""The batch loop of the embedding jobs (memory vectors and conversation message vectors).

Rows lacking a current vector are embedded in id order, a batch at a time, each batch stored
(and so committed) on its own: an interrupted run loses at most one batch and the next run
starts with what is still missing. Rows changed while a sweep ran are picked up by the next
sweep. Progress is ``done/total`` of the target's coverage.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import aiopg
import numpy as np

from pawwake.db.pool import TextRow, cursor
from pawwake.db.vector_rows import content_sha
from pawwake.jobs import Job, RetryLater, backoff_seconds
from pawwake.llm.embeddings import EmbeddingError, Provenance

if TYPE_CHECKING:
    from pawwake.live_settings import RuntimeConfig
    from pawwake.llm.embeddings import Embedder
    from pawwake.settings import Settings

log = logging.getLogger(__name__)

MAX_SWEEPS = 3

T = TypeVar("T")
VectorRows = Sequence[tuple[int, str, np.ndarray]]


@dataclass(frozen=True)
class EmbeddingTarget:
    """What a job embeds: rows lacking a vector, their coverage, and how vectors are kept."""

    label: str  # for the log: "memory", "conversation"
    needing: Callable[[Provenance, int, int], Awaitable[list[TextRow]]]  # after, limit
    coverage: Callable[[Provenance], Awaitable[tuple[int, int]]]  # (done, total)
    store: Callable[[Provenance, VectorRows], Awaitable[Sequence[int]]]  # ids stored
    # The setting that turns these vectors on, by name, read again before every batch: a
    # backfill switched off mid-way stops instead of running to its end.
    switch: str


def on_pool(pool: aiopg.Pool, query: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    """``query`` (a ``db/`` function taking a cursor first) run on its own pooled cursor per
    call, so a sweep holds no connection while it embeds."""
    async def call(*args: Any) -> T:
        async with cursor(pool) as cur:
            return await query(cur, *args)
    return call


async def embed_missing(config: RuntimeConfig, embedder: Embedder, job: Job,
                        provenance: Provenance, target: EmbeddingTarget,
                        batch: int) -> dict[str, Any]:
    """Embed every row ``target`` lists as lacking a current vector; returns the coverage.

    Stops for a retry when the configured provenance changes under it (vectors of two models
    must never mix), and ends when its setting is switched off."""
    if not await target.needing(provenance, 0, 1):
        return {"embedded": 0, "provenance": provenance.as_dict()}  # the common case: no count
    done, total = await target.coverage(provenance)
    await job.progress(part=target.label, done=done, total=total)
    embedded = 0
    for _sweep in range(MAX_SWEEPS):
        embedded_now, after = 0, 0
        while True:
            rows = await target.needing(provenance, after, batch)
            if not rows:
                break
            settings = await config.fresh()
            if not switched_on(settings, target.switch):
                log.info("%s vectors: %s turned off; the backfill stops (%s embedded)",
                         target.label, target.switch, embedded + embedded_now)
                return {"stopped": f"{target.switch} is off",
                        "embedded": embedded + embedded_now, "done": done, "total": total}
            if embedder.configured_provenance(settings) != provenance:
                raise RetryLater("embedding settings changed during the backfill", delay=0)
            texts = [row["content"] for row in rows]
            try:
                matrix, made_by = await embedder.embed_passages(settings, texts)
            except EmbeddingError as exc:
                raise retry_for(exc, job) from None
            if made_by != provenance:
                raise RetryLater("the embedding provider changed its answer size", delay=0)
            stored = await target.store(provenance, [
                (row["id"], content_sha(row["content"]), matrix[i])
                for i, row in enumerate(rows)])
            embedded_now += len(stored)
            done = min(total, done + len(stored))
            after = rows[-1]["id"]
            await job.progress(part=target.label, done=done, total=total)
            await job.keep_alive()
        embedded += embedded_now
        if embedded_now == 0:
            break
    done, total = await target.coverage(provenance)
    await job.progress(part=target.label, done=done, total=total)
    log.info("%s vectors: %s embedded, %s of %s current (%s)", target.label, embedded, done,
             total, provenance.model)
    return {"embedded": embedded, "done": done, "total": total,
            "provenance": provenance.as_dict()}


def switched_on(settings: Settings, name: str) -> bool:
    return bool(getattr(settings, name))


def retry_for(exc: EmbeddingError, job: Job) -> RetryLater:
    """A rate limit waits as long as the provider asks without using up an attempt; other
    failures back off."""
    if exc.rate_limited:
        return RetryLater.rate_limited(str(exc), exc.retry_after)
    return RetryLater(str(exc), delay=backoff_seconds(job.attempts))
