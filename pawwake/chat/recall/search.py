"""Conversation recall: find past conversations in their own words, as stable fragments.

Keyword candidates come from the GIN-indexed terms, semantic ones from message vectors whose
raw cosine reaches ``CONVERSATION_MIN_SCORE_THRESHOLD``; sessions are ranked by
``recall.rank`` over a pool of ``max(20, 3 * max_sessions)`` and each chosen session gives one
fragment: its best matching messages with ``context`` neighbours on each side. Stateless:
callers pass the sessions and fragment ids to leave out (the next candidates move up).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pawwake.chat.recall import index as conversation_index
from pawwake.chat.recall import stats as recall_stats
from pawwake.chat.recall.rank import (
    CONTEXT_CHARS,
    MATCH_CHARS,
    SessionHits,
    fragment_id,
    rank_sessions,
    trim,
)
from pawwake.db import fragments as db
from pawwake.db.pool import cursor
from pawwake.llm.embeddings import DEFAULT_THRESHOLDS, EmbeddingError
from pawwake.search import fusion
from pawwake.search.scoring import keyword_score
from pawwake.settings import Settings
from pawwake.text import offload, tokens
from pawwake.text.query import embedding_text, nothing_to_search

if TYPE_CHECKING:
    from pawwake.services import Services
    from pawwake.settings import Settings

log = logging.getLogger(__name__)

KEYWORD_ROWS = 1000
CATCH_UP_LIMIT = 2000  # messages indexed on the search path when a writer left them bare


@dataclass
class RecallOutcome:
    fragments: list[dict[str, Any]]
    mode: str  # "hybrid" | "keyword"
    keywords: list[str]
    warning: str | None = None
    threshold: float | None = None
    candidates: int = 0
    extras: dict[str, Any] = field(default_factory=dict)


def conversation_threshold(settings: Settings, provider: str) -> float:
    """The configured raw-cosine floor, used as set; empty follows the provider (local e5
    cosines sit around 0.7-0.9 even for unrelated texts)."""
    value = settings.CONVERSATION_MIN_SCORE_THRESHOLD
    return DEFAULT_THRESHOLDS[provider] if value is None else float(value)


async def search_fragments(services: Services, query: str, *, max_sessions: int = 3,
                           context: int = 1, mode: str = "hybrid",
                           exclude_session_ids: Iterable[str] = (),
                           exclude_fragment_ids: Iterable[str] = (),
                           keep_excluded_below: int = 0,
                           settings: Settings) -> RecallOutcome:
    """Search stored conversations for ``query``; see the module docstring.

    ``keep_excluded_below``: messages of excluded sessions before this message (in
    (created_at, id) order) stay searchable: the current thread's history that slid out of
    the live zones."""
    database = services.require_database()
    excluded_sessions = sorted(set(exclude_session_ids))
    excluded_fragments = set(exclude_fragment_ids)
    await conversation_index.index_pending(services, limit=CATCH_UP_LIMIT)
    keywords = await offload.query_keywords(query)
    pool_size = max(20, 3 * max_sessions)
    sessions: dict[str, SessionHits] = {}

    if keywords:
        stats = recall_stats.for_pool(database.pool)
        count, frequencies = await stats.frequencies(database.pool, keywords)
        async with cursor(database.pool) as cur:
            rows = await db.keyword_matches(cur, keywords, excluded_sessions,
                                            KEYWORD_ROWS, keep_below=keep_excluded_below,
                                            **stats.match_options(keywords))
        weights = {t: tokens.idf_weight(count, frequencies.get(t, 0)) for t in keywords}
        total = sum(weights.values())
        for row in rows:
            present = set(row["search_terms"] or ())
            share = keyword_score(sum(w for t, w in weights.items() if t in present), total)
            hits = sessions.setdefault(row["session_id"], SessionHits(row["session_id"]))
            hits.keyword = max(hits.keyword, share)
            hits.add(row["id"], row["created_at"], share)

    semantic_mode, warning, threshold, hood = False, None, None, None
    if mode == "hybrid":
        semantic_mode, warning, threshold, hood = await _semantic(
            services, settings, embedding_text(query, keywords), excluded_sessions,
            keep_excluded_below, pool_size, sessions)
    ranked_pool = sorted(sessions.values(), key=lambda s: (
        -(s.keyword + (s.cosine or 0.0)), -(s.latest.timestamp() if s.latest else 0),
        s.session_id))[:pool_size]
    weights_tuple = (float(settings.CONVERSATION_HW_KEYWORD),
                     float(settings.CONVERSATION_HW_SEMANTIC) if semantic_mode else 0.0,
                     float(settings.CONVERSATION_HW_RECENCY))
    ranked = rank_sessions(ranked_pool, now=datetime.now(UTC), weights=weights_tuple,
                           hood=hood)
    chosen = []
    for item in ranked:
        fid = fragment_id(item.hits.matched_ids())
        if fid in excluded_fragments:
            continue
        chosen.append((item, fid))
        if len(chosen) >= max_sessions:
            break
    fragments = await _build_fragments(database.pool, chosen, context)
    return RecallOutcome(fragments=fragments, mode="hybrid" if semantic_mode else "keyword",
                         keywords=keywords, warning=warning, threshold=threshold,
                         candidates=len(ranked_pool))


async def _semantic(services: Services, settings: Settings, query: str,
                    excluded_sessions: list[str], keep_excluded_below: int, pool_size: int,
                    sessions: dict[str, SessionHits]
                    ) -> tuple[bool, str | None, float | None, fusion.Neighbourhood | None]:
    """Add the messages admitted by rank in the query's neighbourhood (``search.fusion``) to
    ``sessions``; returns (used, warning, noise floor, neighbourhood)."""
    database = services.require_database()
    if nothing_to_search(query):  # not worth a model call
        return False, None, None, None
    try:
        vector, provenance = await services.embedder.embed_query(settings, query)
    except EmbeddingError as exc:
        log.warning("query embedding for recall failed: %s", exc)
        return False, f"Query embedding failed ({exc}); keywords only.", None, None
    threshold = conversation_threshold(settings, provenance.provider)
    pgvector = services.vectors.backend(settings, database, provenance) == "pgvector"
    if pgvector:
        conversation_index.request_vector_index(services, settings, provenance)
    neighbours = await services.recall_vectors.nearest(
        database.pool, provenance, vector, max(100, 5 * pool_size), excluded_sessions,
        pgvector=pgvector, keep_below=keep_excluded_below)
    if not neighbours:
        return False, ("No conversation message has a vector yet (the embedding job fills"
                       " them); keywords only."), None, None
    nearest = sorted(neighbours, key=lambda row: -row["cosine"])[:fusion.NEIGHBOURHOOD]
    hood = fusion.Neighbourhood.of([row["cosine"] for row in nearest], threshold)
    assert hood is not None
    admitted = set(fusion.admitted([(row["id"], row["cosine"]) for row in nearest], hood))
    for row in nearest:
        if row["id"] not in admitted:
            continue
        hits = sessions.setdefault(row["session_id"], SessionHits(row["session_id"]))
        hits.cosine = max(hits.cosine or 0.0, row["cosine"])
        hits.add(row["id"], row["created_at"], row["cosine"])
    return True, None, threshold, hood


async def _build_fragments(pool: Any, chosen: list[tuple[Any, str]], context: int
                           ) -> list[dict[str, Any]]:
    matched = {i for item, _ in chosen for i in item.hits.matched_ids()}
    async with cursor(pool) as cur:
        rows = await db.context_windows(cur, sorted(matched), context)
    by_session: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_session.setdefault(row["session_id"], []).append(row)
    fragments = []
    for item, fid in chosen:
        hits = item.hits
        ids = set(hits.matched_ids())
        messages = [{
            "role": row["role"],
            "content": trim(row["content"], MATCH_CHARS if row["id"] in ids else CONTEXT_CHARS),
            "created_at": row["created_at"].isoformat(),
            "matched": row["id"] in ids,
        } for row in by_session.get(hits.session_id, [])]
        fragments.append({
            "fragment_id": fid,
            "session_id": hits.session_id,
            "score": item.score,
            "parts": item.parts,
            "latest_match_at": hits.latest.isoformat() if hits.latest else None,
            "messages": messages,
        })
    return fragments
