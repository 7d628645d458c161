"""The keyword side of memory search: candidates by indexed terms, and each row's keyword parts.

A query keyword is a concept: the keyword itself and the other language's terms that count as
finding it (``tokens.cross_terms``, from the lexicon). Each row gets two keyword figures:
``keyword``, the IDF-weighted share of the query's keywords it holds (it ranks the candidates,
as it always did), and ``evidence``, the share of the concepts it holds through the keyword or
its other-language terms, weighted by how specific each keyword is in its language
(``tokens.language_weights``): it does not depend on what else is stored and feeds the
relevance the injection floor compares. Rows found only through other-language terms join
the candidates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import TYPE_CHECKING

import numpy as np

from pawwake.database import Database
from pawwake.db import memory_questions as questions_db
from pawwake.db import memory_search as search_db
from pawwake.db.memory_embeddings import sent_vectors
from pawwake.db.memory_search import CandidateRow
from pawwake.db.pool import cursor
from pawwake.llm.embeddings import Provenance
from pawwake.memory import vectors
from pawwake.memory.search.questions import ReadQuestions
from pawwake.search import scoring
from pawwake.settings import Settings
from pawwake.text import tokens

if TYPE_CHECKING:
    from pawwake.memory.faces import MemorySearch


@dataclass(frozen=True)
class Concept:
    """A query keyword and the other language's terms that count as finding it."""

    keyword: str
    terms: frozenset[str]  # the keyword and its other-language terms
    weight: float  # the store's IDF weight of the keyword
    specificity: float  # its owner's weight in the language (``tokens.language_weights``)
    owner: str  # the keyword itself, or the longer keyword it is a sub-word of


def concepts_of(keywords: Sequence[str], alternatives: Mapping[str, list[str]],
                term_weights: Mapping[str, float]) -> list[Concept]:
    """One concept per keyword. For the evidence, a sub-word the tokenizer added for a longer
    keyword ("马拉" of "马拉松") is one more way of finding that keyword (its ``owner``), not a
    keyword of its own."""
    specific = tokens.language_weights(list(keywords))
    made = []
    for keyword in keywords:
        owner = keyword
        while (longer := next((w for w in keywords if w != owner and owner in w), None)):
            owner = longer
        # A sub-word's own senses are not the longer word's ("天天" of "今天天气": every day).
        other = alternatives.get(keyword, ()) if owner == keyword else ()
        made.append(Concept(keyword, frozenset([keyword, *other]),
                            term_weights.get(keyword, 1.0), specific[owner], owner))
    return made


@dataclass(frozen=True)
class Fixed:
    """A row's parts that do not depend on the query's vector."""

    keyword: float  # share of the query's concepts held, store IDF weights (ranking)
    evidence: float  # the same share, language weights (relevance)
    recency: float


@dataclass
class KeywordCandidates:
    rows: list[CandidateRow]
    concepts: list[Concept]  # every query keyword with its weights
    fixed: dict[int, Fixed]  # the rows' parts that do not depend on the query's vector
    stored: vectors.ReadVectors  # the rows' stored vectors (of ``vectors_of``)
    vectors_of: Provenance | None  # their provenance (None: not read)
    questions: ReadQuestions | None = None  # the rows' question vectors (of ``vectors_of``)


async def vectors_to_read(search: MemorySearch, settings: Settings, database: Database
                          ) -> Provenance | None:
    """The provenance whose stored vectors the keyword fetch reads along, with the rows'
    question vectors (pgvector only: the numpy index has them in process), so the keyword
    rows' cosines need no statement once the query's vector is there."""
    if not settings.MEMORY_VECTOR_ENABLED:
        return None
    provenance = search.embedder.configured_provenance(settings)
    if await search.vectors.choose(settings, database, provenance) != "pgvector":
        return None
    return provenance


async def keyword_candidates(search: MemorySearch, database: Database, keywords: list[str],
                             alternatives: Mapping[str, list[str]],
                             exclude: list[int], pool_size: int, weights: scoring.Weights,
                             now: datetime, today: date, vectors_of: Provenance | None = None
                             ) -> KeywordCandidates:
    """The best keyword rows (found by a keyword or one of its ``alternatives``), the query's
    keywords as weighted concepts and the rows' parts that do not depend on the query's
    vector (worked out here, while the vector is computed); with ``vectors_of``, the rows'
    stored vectors of that provenance and those of their written questions too."""
    if not keywords:
        return KeywordCandidates([], [], {}, vectors.ReadVectors.of({}), vectors_of)
    every = list(dict.fromkeys([*keywords, *(t for k in keywords
                                             for t in alternatives.get(k, ()))]))
    plan = await search.term_stats.plan(database.pool, every)
    async with cursor(database.pool) as cur:
        rows = await search_db.ranked_candidates(
            cur, collection=None if plan.exact_size else plan.collection,
            gather=plan.gather,
            windowed=plan.windowed, estimates=plan.estimates, window=plan.window,
            gather_cap=plan.gather_cap,
            exclude=exclude, limit=pool_size, now=now, today=today,
            rank_weights=(weights.keyword, weights.importance, weights.recency),
            vectors_of=vectors_of, concept_of=concept_terms(keywords, alternatives))
        ids = [row["id"] for row in rows]
        asked = (ReadQuestions.of(ids, await questions_db.question_vectors_of(
            cur, vectors_of, ids)) if vectors_of is not None else None)
    term_weights = search_db.query_term_weights(rows)
    if term_weights is None:  # nothing gathered: a gathered term occurs nowhere
        term_weights = {t: tokens.idf_weight(plan.collection, plan.estimates.get(t, 0))
                        for t in every}
    concepts = concepts_of(keywords, alternatives, term_weights)
    stored: dict[int, np.ndarray] = {}
    if vectors_of is not None:
        sent = [row.pop("vector") for row in rows]
        stored = {rows[n]["id"]: vector
                  for n, vector in sent_vectors(sent, int(vectors_of.dim)).items()}
    return KeywordCandidates(rows, concepts, fixed_parts(rows, concepts, now, today),
                             vectors.ReadVectors.of(stored), vectors_of, asked)


def concept_terms(keywords: Sequence[str], alternatives: Mapping[str, list[str]]
                  ) -> dict[str, str]:
    """Each term searched for, mapped to the query keyword it stands for (the first one,
    should two keywords share a translation)."""
    made: dict[str, str] = {keyword: keyword for keyword in keywords}
    for keyword in keywords:
        for term in alternatives.get(keyword, ()):
            made.setdefault(term, keyword)
    return made


def fixed_parts(rows: Sequence[CandidateRow], concepts: Sequence[Concept],
                now: datetime, today: date) -> dict[int, Fixed]:
    """Keyword share, keyword evidence and recency of each row (its ``search_terms`` are
    consumed): a keyword is found when the row holds it or one of its other-language terms."""
    total = sum(c.weight for c in concepts)
    owners = {c.owner: c.specificity for c in concepts}
    specific = sum(owners.values())
    fixed = {}
    for row in rows:
        present = set(row.pop("search_terms") or ())
        row.pop("term_weights", None)
        found = {c.owner for c in concepts if not c.terms.isdisjoint(present)}
        fixed[row["id"]] = Fixed(
            scoring.keyword_score(sum(c.weight for c in concepts if c.keyword in present),
                                  total),
            scoring.keyword_score(sum(owners[o] for o in found), specific),
            scoring.recency(scoring.age_days(row["created_at"], row["event_date"], now, today)))
    return fixed
