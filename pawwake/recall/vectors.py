"""Nearest conversation messages to a query vector, on pgvector or the in-process numpy index.

Both backends read neighbours best first and keep those whose message is searchable, not
excluded and embedded from its current text; when filtered ones leave fewer than ``k``, the
read widens (x4, up to ``NEAREST_FETCH_CAP`` neighbours). The numpy index holds the message
vectors of the provenance in process (loaded once, then refreshed incrementally, see
``search.vector_index``), so a search reads no vectors from the database, only the few
neighbours' rows to check them: trash, restore, edits and deletes count at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import aiopg
import numpy as np

from pawwake.db import message_vectors as db
from pawwake.db.pool import cursor
from pawwake.llm.embeddings import Provenance
from pawwake.recall import background
from pawwake.recall.background import Background
from pawwake.search.vector_backend import VectorBackend
from pawwake.search.vector_index import VectorIndex, warm_if_numpy
from pawwake.tasks import running_beside

if TYPE_CHECKING:
    from pawwake.database import Database
    from pawwake.live_settings import RuntimeConfig
    from pawwake.llm.embeddings import Embedder

log = logging.getLogger(__name__)

NEAREST_FETCH_CAP = 4000  # most neighbours read before giving up on filling k
BACKGROUND_TTL = 60.0  # seconds a pgvector background is used before it is averaged again
MIN_CHANGE = 32  # vectors added or removed before a numpy background is averaged again


class MessageVectors:
    """Message vectors of this process: storing them and finding the nearest ones."""

    def __init__(self, index: VectorIndex | None = None) -> None:
        self.index = index or VectorIndex(table=db.MESSAGE_VECTORS)
        self._backgrounds: dict[Provenance, tuple[Background | None, float]] = {}
        self._refreshing: dict[Provenance, asyncio.Future[Background | None]] = {}

    async def store(self, pool: aiopg.Pool, provenance: Provenance,
                    rows: Sequence[tuple[int, str, np.ndarray]]) -> list[int]:
        """Save vectors and add them to the numpy index; returns the message ids stored."""
        return await self.index.store(pool, provenance, rows)

    async def nearest(self, pool: aiopg.Pool, provenance: Provenance, query: np.ndarray,
                      k: int, exclude_sessions: Sequence[str], *, pgvector: bool,
                      keep_below: int = 0) -> list[dict[str, Any]]:
        """The ``k`` searchable messages closest to ``query`` (id, session_id, created_at,
        raw cosine), best first; messages of ``exclude_sessions`` from the message
        ``keep_below`` on (in (created_at, id) order) are left out."""
        fetch = 3 * k
        while True:
            if pgvector:
                async with cursor(pool) as cur:
                    found, exhausted = await db.nearest_indexed(
                        cur, provenance, query, k, exclude_sessions, fetch=fetch,
                        keep_below=keep_below)
            else:
                near = await self.index.search(pool, provenance, query, fetch)
                async with cursor(pool) as cur:
                    found = await db.live_neighbours(cur, provenance, near, k, exclude_sessions,
                                                     keep_below=keep_below)
                exhausted = len(near) < fetch
            if len(found) >= k or exhausted or fetch >= NEAREST_FETCH_CAP:
                return found
            fetch = min(NEAREST_FETCH_CAP, fetch * 4)

    async def nearest_with_facts(self, pool: aiopg.Pool, provenance: Provenance,
                                 direction: np.ndarray, k: int, exclude_sessions: Sequence[str],
                                 *, pgvector: bool, keep_below: int = 0,
                                 also: Sequence[int] = (), also_limit: int = 0,
                                 vectors: Sequence[np.ndarray] = (), with_text: bool = False,
                                 adjacent_best: int = 0
                                 ) -> tuple[list[dict[str, Any]], dict[int, CandidateFacts]]:
        """``nearest`` in ``direction`` and ``facts`` (with ``vectors``) of those neighbours
        and of the first ``also_limit`` of ``also`` (best first) that are not among them, in
        one statement where the two made two: the neighbours (id, session_id, created_at,
        cosine, best first) and every such candidate's facts."""
        fetch = 3 * k
        while True:
            dots: dict[int, list[float]] = {}
            if pgvector:
                async with cursor(pool) as cur:
                    rows, fetched = await db.nearest_with_facts(
                        cur, provenance, k, exclude_sessions, keep_below=keep_below,
                        query=direction, fetch=fetch, also=also, also_limit=also_limit,
                        vectors=vectors, with_text=with_text, adjacent_best=adjacent_best)
                exhausted = fetched < fetch
            else:
                near = await self.index.search(pool, provenance, direction, fetch)
                # the products of every candidate the statement may keep
                dots = await self._dots(pool, provenance, vectors,
                                        [i for i, _ in near] + list(also[:also_limit + k]))
                async with cursor(pool) as cur:
                    rows, _ = await db.nearest_with_facts(
                        cur, provenance, k, exclude_sessions, keep_below=keep_below,
                        near=near, seen={i: _seen_from_background(d) for i, d in dots.items()},
                        also=also, also_limit=also_limit, with_text=with_text,
                        adjacent_best=adjacent_best)
                exhausted = len(near) < fetch
            found = [row for row in rows if row["near"] is not None]
            if len(found) >= k or exhausted or fetch >= NEAREST_FETCH_CAP:
                break
            fetch = min(NEAREST_FETCH_CAP, fetch * 4)
        found.sort(key=lambda row: (-row["near"], -row["id"]))
        neighbours = [{"id": row["id"], "session_id": row["session_id"],
                       "created_at": row["created_at"], "cosine": row["near"]} for row in found]
        return neighbours, {int(row["id"]): _facts_of(row, row.get("dots") if pgvector
                                                      else dots.get(int(row["id"])))
                            for row in rows}

    async def _dots(self, pool: aiopg.Pool, provenance: Provenance,
                    vectors: Sequence[np.ndarray], message_ids: Sequence[int]
                    ) -> dict[int, list[float]]:
        """Each message's dot products with ``vectors`` on the numpy index (those it holds)."""
        if not vectors:
            return {}
        return await self.index.products_for(pool, provenance, vectors, message_ids)

    async def background(self, pool: aiopg.Pool, provenance: Provenance, *, pgvector: bool
                         ) -> Background | None:
        """The mean of the provenance's message vectors (``recall.background``), None while
        there are too few. Kept between searches: on numpy until the index grew or shrank by
        a tenth, on pgvector (the mean of the newest ``SAMPLE``) for ``BACKGROUND_TTL``. Once
        it is out of date the search still uses it and a new mean is averaged beside, off
        the search's path (it read thousands of vectors, once a minute, in some chat's time);
        only the first search of a provenance waits for it."""
        kept = self._backgrounds.get(provenance)
        if kept is None:
            return await self._averaged(pool, provenance, pgvector)
        if self._out_of_date(kept, pgvector):
            refreshing = self._refreshing.get(provenance)
            if refreshing is None or refreshing.done():
                task = asyncio.ensure_future(self._averaged(pool, provenance, pgvector))
                task.add_done_callback(_refresh_failed)
                self._refreshing[provenance] = task
        return kept[0]

    def _out_of_date(self, kept: tuple[Background | None, float], pgvector: bool) -> bool:
        if pgvector:
            return time.monotonic() - kept[1] >= BACKGROUND_TTL
        if kept[0] is None:
            return True
        return abs(self.index.size - kept[0].count) > max(MIN_CHANGE, kept[0].count // 10)

    async def _averaged(self, pool: aiopg.Pool, provenance: Provenance, pgvector: bool
                        ) -> Background | None:
        now = time.monotonic()
        if pgvector:
            async with cursor(pool) as cur:
                mean, count = await db.background_vector(cur, provenance, background.SAMPLE)
        else:
            mean, count = await self.index.mean(pool, provenance)
        found = (Background(mean, count) if mean is not None
                 and count >= background.MIN_VECTORS else None)
        self._backgrounds[provenance] = (found, now)
        return found

    async def facts(self, pool: aiopg.Pool, provenance: Provenance | None,
                    message_ids: Sequence[int], vectors: Sequence[np.ndarray], *,
                    pgvector: bool, with_text: bool = False, adjacent_best: int = 0
                    ) -> dict[int, CandidateFacts]:
        """Each message's dot products with ``vectors`` (the query, the background; empty in
        keyword mode), ``with_text`` its text's head, and for the ``adjacent_best`` closest
        to the first vector seen from the second its neighbours in its session: one
        statement, the dot products from the numpy index when it holds the vectors."""
        if not message_ids:
            return {}
        dots: dict[int, list[float]] = {}
        adjacent: list[int] = []
        if vectors and not pgvector:
            assert provenance is not None
            dots = await self._dots(pool, provenance, vectors, message_ids)
            adjacent = sorted(dots, key=lambda i: -_seen_from_background(dots[i]))[
                :adjacent_best]
        async with cursor(pool) as cur:
            rows = await db.candidate_facts(
                cur, message_ids, provenance=provenance, vectors=list(vectors) if pgvector
                else [], with_text=with_text, adjacent=adjacent,
                adjacent_best=adjacent_best if pgvector else 0)
        return {int(row["id"]): _facts_of(row, row.get("dots") if pgvector
                                          else dots.get(int(row["id"]))) for row in rows}


def _facts_of(row: Mapping[str, Any], dots: Sequence[float] | None) -> CandidateFacts:
    return CandidateFacts(row["prev_id"], row["next_id"],
                          tuple(float(v) for v in dots) if dots else None, row.get("head"),
                          row.get("role"))


def _seen_from_background(dots: Sequence[float]) -> float:
    """message . query less message . background: how close it is to the question beyond
    what every message shares (the order ``nearest`` reads in)."""
    return dots[0] - dots[1] if len(dots) > 1 else dots[0]


@dataclass(frozen=True)
class CandidateFacts:
    """What ``MessageVectors.facts`` found about one candidate message."""

    prev_id: int | None  # the searchable message before it in its session
    next_id: int | None  # ... and after it
    dots: tuple[float, ...] | None  # with the vectors asked for, when it has a current vector
    head: str | None  # the head of its text, when asked for
    role: str | None = None  # who wrote it: user or assistant


@asynccontextmanager
async def warming_message_vectors(vectors: MessageVectors, config: RuntimeConfig,
                                  database: Database | None, embedder: Embedder,
                                  memory_vectors: VectorBackend) -> AsyncIterator[None]:
    """While the app runs (after the embedder): the message vectors, preloaded in the
    background when recall searches will use the numpy index."""
    async with running_beside(_warm(vectors, config, database, embedder, memory_vectors),
                              name="warm-message-vectors"):
        yield


async def _warm(vectors: MessageVectors, config: RuntimeConfig, database: Database | None,
                embedder: Embedder, memory_vectors: VectorBackend) -> None:
    if database is None:
        return
    await database.wait_ready()  # at start, or whenever a late database arrives
    settings = await config.fresh()
    if not settings.CONVERSATION_RECALL_ENABLED:
        return
    await warm_if_numpy(vectors.index, memory_vectors, settings, database, embedder, "message")


def _refresh_failed(task: asyncio.Future[Background | None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("averaging the recall background failed (the older one stays in use): %s",
                    type(task.exception()).__name__)
