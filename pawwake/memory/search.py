"""Hybrid memory search: IDF keywords + semantic similarity + importance + recency.

Candidates are the best keyword matches (GIN-indexed terms, planned by ``term_stats``) plus the
nearest vectors admitted by rank and margin within the query's neighbourhood, the semantic
threshold being only a noise floor (``fusion``). The keyword candidates are fetched while the
query is embedded; after the vector, one round trip (``VectorStore.neighbourhood``) brings
the neighbours, their rows and the keyword rows' cosines. Scores
follow ``scoring``; rows below ``MIN_SCORE_THRESHOLD`` are dropped before the
limit (unless relevant enough to be injected), as are ``exclude_ids`` (so the next candidates
move up). Each result carries its relevance (``search.relevance``), what the injection floor
compares: its cosine's standing above the query's background on a fixed reference set in the
memory's language (``search.background``) and its keyword evidence. A Chinese query also takes
the nearest memories of its language-neutral vector (``Reference.across``), where the English
memory it is about is found. ``mode`` is "hybrid" only when
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
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import numpy as np

from pawwake.database import Database, connected_database, require_database
from pawwake.db import memory_search as search_db
from pawwake.db.errors import DatabaseUnavailable
from pawwake.db.memory_search import CandidateRow, MemoryHit
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
from pawwake.memory.keyword_candidates import (
    Concept,
    Fixed,
    fixed_parts,
    keyword_candidates,
    vectors_to_read,
)
from pawwake.priority_worker import CHAT
from pawwake.search import fusion, scoring
from pawwake.search.background import Background, Reference, reference_for
from pawwake.search.relevance import Evidence
from pawwake.search.terms import ensure_tokenizer
from pawwake.settings import Settings
from pawwake.text import offload, tokens
from pawwake.text.language import language_of
from pawwake.text.query import embedding_text, needs_keywords, nothing_to_search

if TYPE_CHECKING:
    from pawwake.memory.faces import MemorySearch
    from pawwake.settings import Settings

log = logging.getLogger(__name__)

T = TypeVar("T")

MAX_LIMIT = 100
ACROSS_K = 10  # candidates a Chinese query takes from its language-neutral neighbours
TOUCH_GRANULARITY_SECONDS = 600.0  # last_accessed is kept to about ten minutes


@dataclass
class SearchResult:
    memory: MemoryHit
    score: float
    parts: dict[str, float]  # raw 0..1 components before weighting
    similarity: float | None  # raw cosine with the query, when the row has a vector
    relevance: float = 0.0  # what the injection floor compares (``search.relevance``)
    evidence: Evidence | None = None  # what the relevance was worked out from

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
    floor: float = 0.0  # the injection floor in force: injected <=> relevance >= floor
    timings: dict[str, float] = field(default_factory=dict)  # milliseconds per step
    fallback: str | None = None  # why the search ran on keywords only (``Fallback.code``)
    held_back: list[SearchResult] = field(default_factory=list)  # ``held_back``, scored


class Fallback(NamedTuple):
    """Why a search ran on keywords only: one of ``FALLBACK_CODES`` (``busy``: the query was
    shed under load) and the English warning."""

    code: str
    message: str


FALLBACK_CODES = ("busy", "timeout", "failed", "vectors_off", "rebuild", "no_vectors")


@dataclass
class _Semantic:
    query: np.ndarray
    provenance: Provenance
    threshold: float
    backend: str
    reference: Reference
    background: Background
    language: str  # the query's


async def search_memories(search: MemorySearch, query: str, *, limit: int = 10,
                          exclude_ids: Iterable[int] = (), held_back: Iterable[int] = (),
                          settings: Settings,
                          touch: bool = True, priority: int = CHAT,
                          fusing: fusion.Fusion = fusion.CALIBRATED) -> SearchOutcome:
    """Search active memories for ``query``; see the module docstring for the scoring
    (``fusing``: how keyword and semantic parts are fused, the calibrated sum unless a
    benchmark compares another).

    The query embedding (the slow part with a local model) runs while the keyword candidates
    are fetched. ``touch=False`` leaves ``last_accessed`` to the caller (see ``touch_results``),
    so a chat request does not wait for that write. ``priority=BACKGROUND`` (a job's search)
    cuts and embeds the query behind every chat's. ``held_back`` ids are left out like
    ``exclude_ids`` but scored as the other candidates are (``SearchOutcome.held_back``), so a
    caller can say what they would have scored.
    """
    database = search.database
    if database is None:
        raise DatabaseUnavailable("memory search needs the database")
    limit = max(1, min(MAX_LIMIT, int(limit)))
    held = sorted({int(i) for i in held_back})
    exclude = sorted({int(i) for i in exclude_ids} | set(held))
    await ensure_tokenizer(search.data_dir)
    clock = _Clock()
    # A message short enough to be embedded as sent starts its embedding now, while its
    # keywords are cut: the cutting then adds nothing to the time before the reply.
    early: asyncio.Future[tuple[_Semantic | None, Fallback | None]] | None = None
    if not needs_keywords(query):
        started, coming = _start_vector(search, settings, query, clock.laps, priority)
        early = asyncio.ensure_future(started)
    try:
        keywords = await offload.query_keywords(query, priority=priority)
        alternatives = tokens.cross_terms(keywords)
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
        read = vectors_to_read(search, settings, database) if coming else None
        (semantic, warning), found_by_keywords, held_rows = await asyncio.gather(
            early or started, clock.timed("keyword_fetch", keyword_candidates(
                search, database, keywords, alternatives, exclude, max(100, 4 * limit),
                expected, now, today, read)), _held_rows(database, held))
    except BaseException:
        if early is not None and not early.done():
            early.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await early
        raise
    clock.lap("retrieve")

    rows, concepts = found_by_keywords.rows, found_by_keywords.concepts
    cosines: dict[int, float] = {}
    normalised: dict[int, float] = {}
    hood: fusion.Neighbourhood | None = None
    if semantic is not None:
        known = [row["id"] for row in rows]
        read = found_by_keywords.vectors_of == semantic.provenance  # else ask the database
        # A Chinese query also looks from where Chinese texts no longer pull it: the English
        # memory it is about ranks below every Chinese one by raw cosine.
        across = (semantic.reference.across(semantic.query) if semantic.language == "zh"
                  else None)
        found = await search.vectors.neighbourhood(
            database, settings, semantic.provenance, semantic.query, k=fusion.NEIGHBOURHOOD,
            exclude=exclude, known=known, rows_within=fusion.ADMIT_TOP_K,
            cosines_of=[*([] if read else known), *held], across=across, across_k=ACROSS_K)
        cosines = found.cosines
        if read:
            cosines.update(found_by_keywords.stored.cosines(semantic.query))
        if not found.nearest:
            semantic = None
            warning = Fallback("no_vectors", "No memory has a vector yet (run the embedding"
                                             " backfill); keywords only.")
        else:
            cosines.update(found.nearest)
            cosines.update(found.across)
            rows, normalised, hood = await _semantic_candidates(
                database, rows, found, cosines, semantic.threshold, exclude)
        clock.lap("neighbours")

    weights = scoring.hybrid_weights(settings) if semantic else scoring.KEYWORD_ONLY
    relevant_enough = float(settings.MEMORY_INJECT_MIN_RELEVANCE)
    size = (await search.term_stats.counts(database.pool)).size if rows or held_rows else 0
    results = _within_limit(_score(rows, found_by_keywords.fixed, concepts, normalised, cosines,
                                   weights, now, today, hood, semantic, size,
                                   floor=float(settings.MIN_SCORE_THRESHOLD),
                                   relevant_enough=relevant_enough, fusing=fusing), limit,
                            relevant_enough)
    held_results = _score(held_rows, {}, concepts,
                          {row["id"]: hood.score(cosines[row["id"]]) for row in held_rows
                           if hood is not None and row["id"] in cosines},
                          cosines, weights, now, today, hood, semantic, size,
                          floor=float(settings.MIN_SCORE_THRESHOLD),
                          relevant_enough=relevant_enough, fusing=fusing) if held_rows else []
    clock.lap("scoring")
    if touch:
        await touch_results(search, results)
        clock.lap("touch")
    log.debug("memory search steps (ms): %s", clock)
    return SearchOutcome(
        results=results, mode="hybrid" if semantic else "keyword", keywords=keywords,
        warning=warning.message if warning else None,
        threshold=semantic.threshold if semantic else None,
        backend=semantic.backend if semantic else None, timings=clock.laps,
        floor=float(settings.MEMORY_INJECT_MIN_RELEVANCE),
        fallback=warning.code if warning else None, held_back=held_results)


async def _semantic_candidates(database: Database, rows: list[CandidateRow],
                               found: search_db.Neighbourhood,
                               cosines: Mapping[int, float], floor: float,
                               exclude: list[int]
                               ) -> tuple[list[CandidateRow], dict[int, float],
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
    similar += [i for i, _ in found.across if i not in known and i not in similar]
    if found.rows is not None:
        rows = rows + [found.rows[i] for i in similar if i in found.rows]
    elif similar:
        async with cursor(database.pool) as cur:
            rows = rows + await search_db.fetch_rows(cur, similar, exclude)
    return rows, {row["id"]: hood.score(cosines[row["id"]])
                  for row in rows if row["id"] in cosines}, hood


async def _held_rows(database: Database, held: Sequence[int]) -> list[CandidateRow]:
    """The active rows among ``held`` (with their terms), fetched beside the keyword pool."""
    if not held:
        return []
    async with cursor(database.pool) as cur:
        return await search_db.fetch_rows(cur, held, [])


async def touch_results(search: MemorySearch, results: Sequence[SearchResult]) -> None:
    """Record that these memories were just returned (``last_accessed``, to ten minutes)."""
    database = connected_database(search.database)
    if database is not None and results:
        async with cursor(database.pool) as cur:
            await search_db.touch_accessed(cur, [r.id for r in results],
                                           TOUCH_GRANULARITY_SECONDS)


def _score(rows: list[CandidateRow], fixed: Mapping[int, Fixed],
           concepts: Sequence[Concept],
           normalised: Mapping[int, float], cosines: Mapping[int, float],
           weights: scoring.Weights, now: datetime, today: date,
           hood: fusion.Neighbourhood | None, semantic: _Semantic | None,
           store_size: int, *, floor: float, relevant_enough: float, fusing: fusion.Fusion
           ) -> list[SearchResult]:
    """Final scores, best first, each with its relevance (``search.relevance``); rows below
    ``floor`` are left out unless their relevance reaches ``relevant_enough`` (a Chinese
    question that finds an English memory through the lexicon ranks low, its semantic part
    small, and is still what the chat is about). ``fixed`` holds the parts already worked
    out (keyword rows); the other rows' are worked out here."""
    fixed = {**fixed, **fixed_parts([row for row in rows if row["id"] not in fixed],
                                    concepts, now, today)}
    keyword = {row["id"]: fixed[row["id"]].keyword for row in rows}
    if fusing.literal_first:
        normalised = fusion.literal_first(keyword, normalised, hood, weights.keyword,
                                          weights.semantic)
    fused = {i: (keyword[i], normalised.get(i, 0.0)) for i in keyword}
    if fusing.method == "rrf":
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
        cosine = cosines.get(row["id"])
        evidence = _evidence(row, cosine, fixed[row["id"]].evidence, semantic, store_size)
        relevant = evidence.relevance()
        if score >= floor or relevant >= relevant_enough:
            results.append(SearchResult(row, score, parts, cosine, relevant, evidence))
    results.sort(key=lambda r: (-r.score, -r.id))
    return results


def _within_limit(results: list[SearchResult], limit: int, relevant_enough: float
                  ) -> list[SearchResult]:
    """The best ``limit`` by score, except that a result relevant enough to be injected is
    not cut for one that is not: it takes the place of the lowest such one (a memory found
    only across languages scores low and is still what the chat is about)."""
    kept, rest = results[:limit], results[limit:]
    waiting = [r for r in rest if r.relevance >= relevant_enough]
    for index in range(len(kept) - 1, -1, -1):
        if not waiting:
            break
        if kept[index].relevance < relevant_enough:
            kept[index] = waiting.pop(0)
    kept.sort(key=lambda r: (-r.score, -r.id))
    return kept


def _evidence(row: MemoryHit, cosine: float | None, keyword: float,
              semantic: _Semantic | None, store_size: int) -> Evidence:
    language = language_of(str(row["content"]))
    if semantic is None or cosine is None:
        return Evidence(None, keyword, False, store_size)
    return Evidence(semantic.background.standing(cosine, language), keyword,
                    language != semantic.language, store_size)


def _start_vector(search: MemorySearch, settings: Settings, query: str,
                  timings: dict[str, float] | None = None, priority: int = CHAT
                  ) -> tuple[Coroutine[Any, Any, tuple[_Semantic | None, Fallback | None]], bool]:
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
                          ) -> tuple[_Semantic | None, Fallback | None]:
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
    return _Semantic(vector, provenance, semantic_threshold(settings, provenance.provider),
                     search.vectors.backend(settings, database, provenance),
                     reference, reference.background(vector), language_of(query_text)), None


async def _dropped(started: asyncio.Future[Any]) -> None:
    """Let go of a side computation the search no longer needs (its failure included)."""
    if not started.done():
        started.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await started


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
