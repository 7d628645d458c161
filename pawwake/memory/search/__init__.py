"""Hybrid memory search: IDF keywords + semantic similarity + importance + recency.

Candidates are the best keyword matches (GIN-indexed terms, planned by ``term_stats``) plus the
nearest vectors admitted by rank and margin within the query's neighbourhood, the semantic
threshold being only a noise floor (``fusion``). The keyword candidates are fetched while the
query is embedded, with their stored vectors and their written questions' vectors (pgvector);
after the vector, one round trip (``VectorStore.neighbourhood``) brings the neighbours and
their rows, and one the nearest written questions; the keyword rows' cosines are products in
process. Scores
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
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from pawwake.database import Database, connected_database
from pawwake.db import memory_search as search_db
from pawwake.db.errors import DatabaseUnavailable
from pawwake.db.memory_search import CandidateRow
from pawwake.db.pool import cursor
from pawwake.local_time import local_today, zone_of
from pawwake.memory.search import questions
from pawwake.memory.search.clock import StepClock
from pawwake.memory.search.keywords import keyword_candidates, vectors_to_read
from pawwake.memory.search.query_vector import QueryVector, start_vector
from pawwake.memory.search.ranking import scored, within_limit
from pawwake.memory.search.results import (
    FALLBACK_CODES,
    Fallback,
    SearchOutcome,
    SearchResult,
)
from pawwake.priority_worker import CHAT
from pawwake.search import fusion, relevance, scoring
from pawwake.search.terms import ensure_tokenizer
from pawwake.text import offload, tokens
from pawwake.text.query import embedding_text, needs_keywords

if TYPE_CHECKING:
    from pawwake.memory.faces import MemorySearch
    from pawwake.settings import Settings

__all__ = ["FALLBACK_CODES", "MAX_LIMIT", "Fallback", "SearchOutcome", "SearchResult",
           "search_memories", "touch_results"]

log = logging.getLogger(__name__)


MAX_LIMIT = 100
# Keyword rows a search fetches and scores: at least this many, and twice its limit. A chat's
# search (50 candidates) took 200 before; 100 inject the same memories on the retrieval
# benchmark at every store size, for about a fifth less CPU per search (the statement's rows,
# their vectors, and their scoring on the event loop).
KEYWORD_POOL = 100
ACROSS_K = 10  # candidates a Chinese query takes from its language-neutral neighbours
TOUCH_GRANULARITY_SECONDS = 600.0  # last_accessed is kept to about ten minutes


async def search_memories(search: MemorySearch, query: str, *, limit: int = 10,
                          exclude_ids: Iterable[int] = (), held_back: Iterable[int] = (),
                          settings: Settings,
                          touch: bool = True, priority: int = CHAT,
                          fusing: fusion.Fusion = fusion.CALIBRATED,
                          judging: relevance.Relevance = relevance.CALIBRATED
                          ) -> SearchOutcome:
    """Search active memories for ``query``; see the module docstring for the scoring
    (``fusing``: how keyword and semantic parts are fused, the calibrated sum unless a
    benchmark compares another; ``judging``: the relevance model's coefficients, likewise).

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
    clock = StepClock()
    # A message short enough to be embedded as sent starts its embedding now, while its
    # keywords are cut: the cutting then adds nothing to the time before the reply.
    early: asyncio.Future[tuple[QueryVector | None, Fallback | None]] | None = None
    if not needs_keywords(query):
        started, coming = start_vector(search, settings, query, clock.laps, priority)
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
            started, coming = start_vector(search, settings,
                                               embedding_text(query, keywords), clock.laps,
                                               priority)
        read = await vectors_to_read(search, settings, database) if coming else None
        (semantic, warning), found_by_keywords, held_rows = await asyncio.gather(
            early or started, clock.timed("keyword_fetch", keyword_candidates(
                search, database, keywords, alternatives, exclude, keyword_pool(limit),
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
    asked_standing: dict[int, float] = {}
    normalised: dict[int, float] = {}
    hood: fusion.Neighbourhood | None = None
    if semantic is not None:
        known = [row["id"] for row in rows]
        read = found_by_keywords.vectors_of == semantic.provenance  # else ask the database
        # A Chinese query also looks from where Chinese texts no longer pull it: the English
        # memory it is about ranks below every Chinese one by raw cosine.
        across = (semantic.reference.across(semantic.query) if semantic.language == "zh"
                  else None)
        # The written questions' statement runs beside the nearest memories' one. (Sent as one
        # statement, both scans in one server process, the step took longer at one stream,
        # 6.7 ms against 5.7 at 10,000 memories, and 20 streams were no faster. Nor did working
        # out the read vectors' products while both statements ran shorten it: on two cores the
        # two server processes already take both. Replayed at 10,000 memories, prepared: each
        # alone 1.8 and 2.2 ms (about 1.0-1.3 ms of server execution), the same one twice at
        # once 2.1 ms, these two at once 3.4-4.7 ms, so they slow each other down when
        # gathered; HNSW indexes over halfvec casts (11 and 22 MB) changed none of it.)
        found, asked = await asyncio.gather(
            search.vectors.neighbourhood(
                database, settings, semantic.provenance, semantic.query,
                k=fusion.NEIGHBOURHOOD, exclude=exclude, known=known,
                rows_within=fusion.ADMIT_TOP_K, cosines_of=[*([] if read else known), *held],
                across=across, across_k=ACROSS_K, direction=semantic.reference.direction),
            questions.nearest_questions(search, database, settings, semantic,
                                        known=[*known, *held], exclude=exclude,
                                        read=found_by_keywords.questions if read else None))
        cosines = found.cosines
        asked_standing = questions.standing(asked, semantic)
        if read:
            cosines.update(found_by_keywords.stored.cosines(semantic.query))
        if not found.nearest:
            semantic = None
            warning = Fallback("no_vectors", "No memory has a vector yet (run the embedding"
                                             " backfill); keywords only.")
        else:
            cosines.update(found.nearest)
            cosines.update(found.across)
            brought = questions.admitted(asked, asked_standing, {row["id"] for row in rows})
            cosines.update(asked.cosines)
            if asked.rows is None and brought:  # numpy: their own cosines in process
                cosines.update(await search.vectors.index.cosines_for(
                    database.pool, semantic.provenance, semantic.query, brought))
            rows, normalised, hood = await _semantic_candidates(
                database, rows, found, cosines, semantic.threshold, exclude,
                brought, asked.rows)
        clock.lap("neighbours")

    weights = scoring.hybrid_weights(settings) if semantic else scoring.KEYWORD_ONLY
    relevant_enough = float(settings.MEMORY_INJECT_MIN_RELEVANCE)
    size = (await search.term_stats.counts(database.pool)).size if rows or held_rows else 0
    results = within_limit(scored(rows, found_by_keywords.fixed, concepts, normalised, cosines,
                                   weights, now, today, hood, semantic, size,
                                   floor=float(settings.MIN_SCORE_THRESHOLD),
                                   relevant_enough=relevant_enough, fusing=fusing,
                                 judging=judging, questions=asked_standing), limit,
                            relevant_enough)
    held_results = scored(held_rows, {}, concepts,
                          {row["id"]: hood.score(cosines[row["id"]]) for row in held_rows
                           if hood is not None and row["id"] in cosines},
                          cosines, weights, now, today, hood, semantic, size,
                          floor=float(settings.MIN_SCORE_THRESHOLD),
                          relevant_enough=relevant_enough, fusing=fusing,
                          judging=judging, questions=asked_standing) if held_rows else []
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


def keyword_pool(limit: int) -> int:
    """How many keyword rows a search of ``limit`` results fetches (``KEYWORD_POOL``)."""
    return max(KEYWORD_POOL, 2 * limit)


async def _semantic_candidates(database: Database, rows: list[CandidateRow],
                               found: search_db.Neighbourhood,
                               cosines: Mapping[int, float], floor: float,
                               exclude: list[int], brought: Sequence[int] = (),
                               brought_rows: Mapping[int, CandidateRow] | None = None
                               ) -> tuple[list[CandidateRow], dict[int, float],
                                          fusion.Neighbourhood | None]:
    """The keyword rows plus the neighbours admitted by rank and margin (``fusion``) and the
    memories ``brought`` by their written questions, and every row's semantic part: its
    place in the query's neighbourhood. The admitted rows come with their statements
    (pgvector: ``found.rows``, ``brought_rows``) or are fetched in one statement (numpy
    index, which may also hold archived memories: the fetch leaves them out)."""
    hood = fusion.Neighbourhood.of([c for _, c in found.nearest], floor)
    if hood is None:
        return rows, {}, None
    known = {row["id"] for row in rows}
    similar = [i for i in fusion.admitted(found.nearest, hood) if i not in known]
    similar += [i for i, _ in found.across if i not in known and i not in similar]
    similar += [i for i in brought if i not in known and i not in similar]
    given = {**(brought_rows or {}), **(found.rows or {})}
    missing = [i for i in similar if i not in given]
    rows = rows + [given[i] for i in similar if i in given]
    if missing and (found.rows is None or brought_rows is None):
        async with cursor(database.pool) as cur:
            rows = rows + await search_db.fetch_rows(cur, missing, exclude)
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
