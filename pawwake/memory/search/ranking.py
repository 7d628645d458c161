"""The final ranking of memory search: every candidate's parts fused into its score, its
relevance worked out from its evidence (``search.relevance``), and the limit applied so that
a result relevant enough to be injected is not cut for one that is not."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date, datetime

from pawwake.db.memory_search import CandidateRow, MemoryHit
from pawwake.memory.search.keywords import Concept, Fixed, fixed_parts
from pawwake.memory.search.query_vector import QueryVector
from pawwake.memory.search.results import SearchResult
from pawwake.search import fusion, scoring
from pawwake.search.relevance import CALIBRATED, Evidence, Relevance
from pawwake.text.language import language_of


def scored(rows: list[CandidateRow], fixed: Mapping[int, Fixed],
           concepts: Sequence[Concept],
           normalised: Mapping[int, float], cosines: Mapping[int, float],
           weights: scoring.Weights, now: datetime, today: date,
           hood: fusion.Neighbourhood | None, semantic: QueryVector | None,
           store_size: int, *, floor: float, relevant_enough: float, fusing: fusion.Fusion,
           judging: Relevance = CALIBRATED, questions: Mapping[int, float] | None = None
           ) -> list[SearchResult]:
    """Final scores, best first, each with its relevance (``search.relevance``); rows below
    ``floor`` are left out unless their relevance reaches ``relevant_enough`` (a Chinese
    question that finds an English memory through the lexicon ranks low, its semantic part
    small, and is still what the chat is about). ``fixed`` holds the parts already worked
    out (keyword rows); the other rows' are worked out here. ``questions``: each memory's
    best written question's standing (``memory.search.questions``)."""
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
        evidence = _evidence(row, cosine, fixed[row["id"]].evidence, semantic, store_size,
                             (questions or {}).get(row["id"]))
        relevant = judging.of(evidence)
        if score >= floor or relevant >= relevant_enough:
            results.append(SearchResult(row, score, parts, cosine, relevant, evidence))
    results.sort(key=lambda r: (-r.score, -r.id))
    return results


def within_limit(results: list[SearchResult], limit: int, relevant_enough: float
                  ) -> list[SearchResult]:
    """The best ``limit`` by score, except that a result relevant enough to be injected is
    not cut for one that is not: it takes the place of the lowest such one (a memory found
    only across languages scores low and is still what the chat is about). When more than
    ``limit`` are relevant enough, the most relevant are kept, as the injection takes them
    (among dozens of other people's birthdays, the one whose written question is the user's
    own scores below them by keywords and cosine, and stands above them by relevance)."""
    relevant = [r for r in results if r.relevance >= relevant_enough]
    if len(relevant) >= limit:
        kept = sorted(relevant, key=lambda r: (-r.relevance, -r.score, -r.id))[:limit]
    else:
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
              semantic: QueryVector | None, store_size: int, question: float | None = None
              ) -> Evidence:
    language = language_of(str(row["content"]))
    if semantic is None or cosine is None:
        return Evidence(None, keyword, False, store_size)
    return Evidence(semantic.background.standing(cosine, language), keyword,
                    language != semantic.language, store_size, question)
