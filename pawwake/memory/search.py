"""Hybrid memory search: IDF keywords + semantic similarity + importance + recency.

Candidates are the best keyword matches (GIN-indexed terms, planned by ``term_stats``) plus the
nearest vectors admitted by rank and margin within the query's neighbourhood, the semantic
threshold being only a noise floor (``fusion``). The keyword candidates are fetched while the
query is embedded; after the vector, one round trip (``VectorStore.neighbourhood``) brings
the neighbours, their rows and the keyword rows' cosines. Scores
follow ``scoring``; rows below ``MIN_SCORE_THRESHOLD`` are dropped before the
limit, as are ``exclude_ids`` (so the next candidates move up). ``mode`` is "hybrid" only when
a query vector was really used: a vector that misses ``QUERY_EMBEDDING_TIMEOUT`` makes the search
keyword-only, said in ``warning`` and the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from pawwake.database import Database, connected_database, require_database
from pawwake.db import memory_search as search_db
from pawwake.db.errors import DatabaseUnavailable
from pawwake.db.memory_embeddings import sent_vectors
from pawwake.db.pool import DATABASE_ERRORS, cursor
from pawwake.llm.embeddings import (
    EmbeddingError,
    Provenance,
    QueryEmbeddingShed,
    QueryEmbeddingTimeout,
    semantic_threshold,
)
from pawwake.local_time import local_today, zone_of
from pawwake.memory import vectors
from pawwake.priority_worker import CHAT
from pawwake.search import fusion, scoring
from pawwake.search.terms import ensure_tokenizer
from pawwake.settings import Settings
from pawwake.text import offload, tokens
from pawwake.text.query import embedding_text, needs_keywords, nothing_to_search

if TYPE_CHECKING:
    from pawwake.memory.faces import MemorySearch
    from pawwake.settings import Settings

log = logging.getLogger(__name__)

T = TypeVar("T")

MAX_LIMIT = 100
TOUCH_GRANULARITY_SECONDS = 600.0  # last_accessed is kept to about ten minutes


@dataclass
class SearchResult:
    memory: dict[str, Any]
    score: float
    parts: dict[str, float]  # raw 0..1 components before weighting
    similarity: float | None  # raw cosine with the query, when the row has a vector
    relevance: float = 0.0  # keyword and semantic share of the score (the injection floor's)

    @property
    def id(self) -> int:
        return int(self.memory["id"])


@dataclass
class SearchOutcome:
    results: list[SearchResult]
    mode: str  # "hybrid" | "keyword"
    keywords: list[str]
    warning: str | None = None
    threshold: float | None = None
    backend: str | None = None
    timings: dict[str, float] = field(default_factory=dict)  # milliseconds per step


@dataclass
class _Semantic:
    query: np.ndarray
    provenance: Provenance
    threshold: float
    backend: str


async def search_memories(search: MemorySearch, query: str, *, limit: int = 10,
                          exclude_ids: Iterable[int] = (),
                          settings: Settings,
                          touch: bool = True, priority: int = CHAT) -> SearchOutcome:
    """Search active memories for ``query``; see the module docstring for the scoring.

    The query embedding (the slow part with a local model) runs while the keyword candidates
    are fetched. ``touch=False`` leaves ``last_accessed`` to the caller (see ``touch_results``),
    so a chat request does not wait for that write. ``priority=BACKGROUND`` (a job's search)
    cuts and embeds the query behind every chat's.
    """
    database = search.database
    if database is None:
        raise DatabaseUnavailable("memory search needs the database")
    limit = max(1, min(MAX_LIMIT, int(limit)))
    exclude = sorted({int(i) for i in exclude_ids})
    await ensure_tokenizer(search.data_dir)
    clock = _Clock()
    # A message short enough to be embedded as sent starts its embedding now, while its
    # keywords are cut: the cutting then adds nothing to the time before the reply.
    early: asyncio.Future[tuple[_Semantic | None, str | None]] | None = None
    if not needs_keywords(query):
        started, coming = _start_vector(search, settings, query, clock.laps, priority)
        early = asyncio.ensure_future(started)
    try:
        keywords = await offload.query_keywords(query, priority=priority)
        clock.lap("tokenise")
        now = datetime.now(UTC)
        today = local_today(zone_of(settings), now)
        # The keyword pool is ranked before we know whether a vector will come; only the
        # pool's order depends on it, the final scores use the weights of the mode really used.
        expected = (scoring.hybrid_weights(settings) if settings.MEMORY_VECTOR_ENABLED
                    else scoring.KEYWORD_ONLY)
        if early is None:
            started, coming = _start_vector(search, settings,
                                               embedding_text(query, keywords), clock.laps,
                                               priority)
        read = _vectors_to_read(search, settings, database) if coming else None
        (semantic, warning), found_by_keywords = await asyncio.gather(
            early or started, clock.timed("keyword_fetch", _keyword_candidates(
                search, database, keywords, exclude, max(100, 4 * limit), expected, now, today,
                read)))
    except BaseException:
        if early is not None and not early.done():
            early.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await early
        raise
    clock.lap("retrieve")

    rows, term_weights = found_by_keywords.rows, found_by_keywords.term_weights
    cosines: dict[int, float] = {}
    normalised: dict[int, float] = {}
    hood: fusion.Neighbourhood | None = None
    if semantic is not None:
        known = [row["id"] for row in rows]
        read = found_by_keywords.vectors_of == semantic.provenance  # else ask the database
        found = await search.vectors.neighbourhood(
            database, settings, semantic.provenance, semantic.query, k=fusion.NEIGHBOURHOOD,
            exclude=exclude, known=known, rows_within=fusion.ADMIT_TOP_K,
            cosines_of=[] if read else known)
        cosines = found.cosines
        if read:
            cosines.update(found_by_keywords.stored.cosines(semantic.query))
        if not found.nearest:
            semantic = None
            warning = "No memory has a vector yet (run the embedding backfill); keywords only."
        else:
            cosines.update(found.nearest)
            rows, normalised, hood = await _semantic_candidates(
                database, rows, found, cosines, semantic.threshold, exclude)
        clock.lap("neighbours")

    weights = scoring.hybrid_weights(settings) if semantic else scoring.KEYWORD_ONLY
    results = _score(rows, found_by_keywords.fixed, term_weights, normalised, cosines, weights,
                     now, today, hood, floor=float(settings.MIN_SCORE_THRESHOLD))[:limit]
    clock.lap("scoring")
    if touch:
        await touch_results(search, results)
        clock.lap("touch")
    log.debug("memory search steps (ms): %s", clock)
    return SearchOutcome(
        results=results, mode="hybrid" if semantic else "keyword", keywords=keywords,
        warning=warning, threshold=semantic.threshold if semantic else None,
        backend=semantic.backend if semantic else None, timings=clock.laps)


async def _semantic_candidates(database: Database, rows: list[dict[str, Any]],
                               found: search_db.Neighbourhood,
                               cosines: Mapping[int, float], floor: float,
                               exclude: list[int]
                               ) -> tuple[list[dict[str, Any]], dict[int, float],
                                          fusion.Neighbourhood | None]:
    """The keyword rows plus the neighbours admitted by rank and margin (``fusion``), and
    every row's semantic part: its place in the query's neighbourhood. The admitted rows come
    with the neighbourhood (pgvector) or are fetched (numpy index, which may also hold
    archived memories: the fetch leaves them out)."""
    hood = fusion.Neighbourhood.of([c for _, c in found.nearest], floor)
    if hood is None:
        return rows, {}, None
    known = {row["id"] for row in rows}
    similar = [i for i in fusion.admitted(found.nearest, hood) if i not in known]
    if found.rows is not None:
        rows = rows + [found.rows[i] for i in similar if i in found.rows]
    elif similar:
        async with cursor(database.pool) as cur:
            rows = rows + await search_db.fetch_rows(cur, similar, exclude)
    return rows, {row["id"]: hood.score(cosines[row["id"]])
                  for row in rows if row["id"] in cosines}, hood


async def touch_results(search: MemorySearch, results: Sequence[SearchResult]) -> None:
    """Record that these memories were just returned (``last_accessed``, to ten minutes)."""
    database = connected_database(search.database)
    if database is not None and results:
        async with cursor(database.pool) as cur:
            await search_db.touch_accessed(cur, [r.id for r in results],
                                           TOUCH_GRANULARITY_SECONDS)


@dataclass
class _KeywordCandidates:
    rows: list[dict[str, Any]]
    term_weights: dict[str, float]  # the IDF weight of every query keyword
    fixed: dict[int, _Fixed]  # the rows' parts that do not depend on the query's vector
    stored: vectors.ReadVectors  # the rows' stored vectors (of ``vectors_of``)
    vectors_of: Provenance | None  # their provenance (None: not read)


def _vectors_to_read(search: MemorySearch, settings: Settings, database: Database
                     ) -> Provenance | None:
    """The provenance whose stored vectors the keyword fetch reads along (pgvector only: the
    numpy index has them in process), so the keyword rows' cosines need no statement once
    the query's vector is there."""
    if not settings.MEMORY_VECTOR_ENABLED:
        return None
    provenance = search.embedder.configured_provenance(settings)
    if search.vectors.backend(settings, database, provenance) != "pgvector":
        return None
    return provenance


async def _keyword_candidates(search: MemorySearch, database: Database, keywords: list[str],
                              exclude: list[int], pool_size: int, weights: scoring.Weights,
                              now: datetime, today: date, vectors_of: Provenance | None = None
                              ) -> _KeywordCandidates:
    """The best keyword rows, the IDF weight of every query keyword and the rows' parts that
    do not depend on the query's vector (worked out here, while the vector is computed);
    with ``vectors_of``, the rows' stored vectors of that provenance too."""
    if not keywords:
        return _KeywordCandidates([], {}, {}, vectors.ReadVectors.of({}), vectors_of)
    plan = await search.term_stats.plan(database.pool, keywords)
    async with cursor(database.pool) as cur:
        rows = await search_db.ranked_candidates(
            cur, collection=None if plan.exact_size else plan.collection,
            gather=plan.gather,
            windowed=plan.windowed, estimates=plan.estimates, window=plan.window,
            gather_cap=plan.gather_cap,
            exclude=exclude, limit=pool_size, now=now, today=today,
            rank_weights=(weights.keyword, weights.importance, weights.recency),
            vectors_of=vectors_of)
    if rows:
        term_weights = {t: float(w) for t, w in rows[0]["term_weights"].items()}
    else:  # nothing gathered: a gathered term occurs nowhere
        term_weights = {t: tokens.idf_weight(plan.collection, plan.estimates.get(t, 0))
                        for t in keywords}
    stored: dict[int, np.ndarray] = {}
    if vectors_of is not None:
        sent = [row.pop("vector") for row in rows]
        stored = {rows[n]["id"]: vector
                  for n, vector in sent_vectors(sent, int(vectors_of.dim)).items()}
    return _KeywordCandidates(rows, term_weights, _fixed_parts(rows, term_weights, now, today),
                              vectors.ReadVectors.of(stored), vectors_of)


@dataclass(frozen=True)
class _Fixed:
    """A row's score parts that do not depend on the query's vector."""

    keyword: float
    recency: float


def _fixed_parts(rows: Sequence[dict[str, Any]], term_weights: Mapping[str, float],
                 now: datetime, today: date) -> dict[int, _Fixed]:
    """Keyword share and recency of each row (its ``search_terms`` are consumed)."""
    total = sum(term_weights.values())
    fixed = {}
    for row in rows:
        present = set(row.pop("search_terms") or ())
        row.pop("term_weights", None)
        hit = sum(w for term, w in term_weights.items() if term in present)
        fixed[row["id"]] = _Fixed(
            scoring.keyword_score(hit, total),
            scoring.recency(scoring.age_days(row["created_at"], row["event_date"], now, today)))
    return fixed


def _score(rows: list[dict[str, Any]], fixed: Mapping[int, _Fixed],
           term_weights: Mapping[str, float],
           normalised: Mapping[int, float], cosines: Mapping[int, float],
           weights: scoring.Weights, now: datetime, today: date,
           hood: fusion.Neighbourhood | None, *, floor: float) -> list[SearchResult]:
    """Final scores, best first, without rows below ``floor``. ``fixed`` holds the parts
    already worked out (keyword rows); the other rows' are worked out here."""
    fixed = {**fixed, **_fixed_parts([row for row in rows if row["id"] not in fixed],
                                     term_weights, now, today)}
    keyword = {row["id"]: fixed[row["id"]].keyword for row in rows}
    if fusion.LITERAL_FIRST:
        normalised = fusion.literal_first(keyword, normalised, hood, weights.keyword,
                                          weights.semantic)
    fused = {i: (keyword[i], normalised.get(i, 0.0)) for i in keyword}
    if fusion.METHOD == "rrf":
        fused = fusion.reciprocal_ranks(keyword, normalised)
    results = []
    for row in rows:
        kw, sem = fused[row["id"]]
        parts = {
            "keyword": keyword[row["id"]],
            "semantic": normalised.get(row["id"], 0.0),
            "importance": row["importance"] / 10.0,
            "recency": fixed[row["id"]].recency,
        }
        score = scoring.combine(weights, keyword=kw, semantic=sem,
                                importance=row["importance"], recency_value=parts["recency"])
        if score >= floor:
            results.append(SearchResult(
                row, score, parts, cosines.get(row["id"]),
                fusion.relevance(kw, sem, weights.keyword, weights.semantic)))
    results.sort(key=lambda r: (-r.score, -r.id))
    return results


def _start_vector(search: MemorySearch, settings: Settings, query: str,
                  timings: dict[str, float] | None = None, priority: int = CHAT
                  ) -> tuple[Coroutine[Any, Any, tuple[_Semantic | None, str | None]], bool]:
    """Start the query's embedding now (a local model's lane takes it before the caller's next
    step runs). Returns what gives the query's vector when semantic search is possible, else
    the reason it is not (no reason for a message with nothing to search, which is not
    embedded at all), and whether an embedding is on its way."""
    if not settings.MEMORY_VECTOR_ENABLED:
        return _given((None, "Vector search is off (MEMORY_VECTOR_ENABLED=false); keywords"
                             " only.")), False
    if nothing_to_search(query):
        return _given((None, None)), False
    database = require_database(search.database)
    try:
        embedding = search.embedder.start_query(settings, query, timings=timings,
                                                  priority=priority)
    except QueryEmbeddingShed as exc:  # counted and logged by the embedder
        return _given((None, f"The embedding model is busy: {exc}; keywords only.")), False
    return _semantic_query(search, settings, database, embedding), True


async def _given(value: T) -> T:
    return value


async def _semantic_query(search: MemorySearch, settings: Settings, database: Database,
                          embedding: Awaitable[tuple[np.ndarray, Provenance]]
                          ) -> tuple[_Semantic | None, str | None]:
    """The started embedding's vector, checked against the stored vectors' provenance."""
    embedder = search.embedder
    # The stored vectors' provenance is read while the query is embedded, not after it.
    expected = embedder.configured_provenance(settings)
    checking = asyncio.ensure_future(vectors.provenance_state(database, expected))
    try:
        vector, provenance = await embedding
    except EmbeddingError as exc:
        checking.cancel()
        with contextlib.suppress(asyncio.CancelledError, *DATABASE_ERRORS):
            await checking
        if isinstance(exc, QueryEmbeddingTimeout):
            log.warning("memory search ran on keywords only: the query's vector missed its"
                        " %g s deadline (QUERY_EMBEDDING_TIMEOUT)", exc.seconds)
            return None, (f"The query's vector took longer than {exc.seconds:g} s"
                          " (QUERY_EMBEDDING_TIMEOUT); keywords only.")
        log.warning("query embedding failed: %s", exc)
        return None, f"Query embedding failed ({exc}); keywords only."
    except BaseException:
        checking.cancel()
        raise
    state = await checking
    if provenance != expected:  # the API answered with another dimension than configured
        state = await vectors.provenance_state(database, provenance)
    if state.needs_rebuild:
        stored = state.stored or {}
        return None, (
            f"Stored vectors were made by {stored.get('provider')}/{stored.get('model')}"
            f" ({stored.get('dim')} dims) but {provenance.provider}/{provenance.model}"
            f" ({provenance.dim} dims) is configured; keywords only until the vectors are"
            " rebuilt (POST /api/admin/backfill-memory-embeddings with confirm_rebuild).")
    return _Semantic(vector, provenance, semantic_threshold(settings, provenance.provider),
                     search.vectors.backend(settings, database, provenance)), None


class _Clock:
    """Milliseconds spent per step, for the benchmark and debug logs. Sequential steps are
    laps; ``keyword_fetch`` and the ``embed_*`` parts run side by side within ``retrieve``."""

    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = self.laps.get(name, 0.0) + (now - self._last) * 1000.0
        self._last = now

    async def timed(self, name: str, step: Awaitable[T]) -> T:
        start = time.perf_counter()
        try:
            return await step
        finally:
            self.laps[name] = (time.perf_counter() - start) * 1000.0

    def __str__(self) -> str:
        return " ".join(f"{name}={ms:.1f}" for name, ms in self.laps.items())
