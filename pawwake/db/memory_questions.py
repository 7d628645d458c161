"""SQL for the questions the memory model wrote for memories and their vectors.

``memory_questions`` holds one row per written question (kept in step with
``memories.model_questions`` by the triggers of migration 0026), ``memory_question_embeddings``
one vector per question, like ``memory_embeddings`` per memory. A question row is never
rewritten, so a vector of the configured provenance is current for as long as its row exists.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from pawwake.db import prepared, vector_rows
from pawwake.db.array_literals import IdArray
from pawwake.db.memory_embeddings import knn_params, sent_vector_sql, sent_vectors, vector_literal
from pawwake.db.memory_search import MEMORY_COLUMNS, CandidateRow
from pawwake.db.pool import Cursor, TextRow, fetch_all, rows_as_dicts
from pawwake.db.vector_rows import OF_PROVENANCE, VectorSource, VectorTable

QUESTION_VECTORS = VectorTable("memory_question_embeddings", "question_id", "memory_questions",
                               stale="false")


async def rows_needing_vectors(cur: Cursor, provenance: VectorSource, after_id: int, limit: int
                               ) -> list[TextRow]:
    """Questions (of active or archived memories) without a vector, in id order."""
    return await vector_rows.rows_needing_vectors(cur, QUESTION_VECTORS, provenance, after_id,
                                                  limit)


async def owners(cur: Cursor, *, after_id: int = 0, ids: Sequence[int] | None = None
                 ) -> list[tuple[int, int]]:
    """``(question id, memory id)`` of the questions past ``after_id`` or among ``ids``."""
    if ids is not None:
        await cur.execute("SELECT id, memory_id FROM memory_questions"
                          " WHERE id = ANY(%s::bigint[])", (list(ids),))
    else:
        await cur.execute("SELECT id, memory_id FROM memory_questions WHERE id > %s"
                          " ORDER BY id", (after_id,))
    return [(int(row[0]), int(row[1])) for row in await cur.fetchall()]


async def questions_of(cur: Cursor, memory_id: int) -> list[str]:
    """One memory's questions as stored, in the order they were written."""
    rows = await fetch_all(cur, "SELECT content FROM memory_questions WHERE memory_id = %s"
                                " ORDER BY id", (memory_id,))
    return [str(row["content"]) for row in rows]


async def coverage(cur: Cursor, provenance: VectorSource) -> tuple[int, int]:
    """(questions with a vector of ``provenance``, all questions)."""
    return await vector_rows.coverage(cur, QUESTION_VECTORS, provenance)


async def question_vectors_of(cur: Cursor, provenance: VectorSource, memory_ids: Sequence[int]
                              ) -> list[tuple[int, np.ndarray]]:
    """``(memory id, vector)`` of every written question of ``memory_ids`` that has a vector
    of ``provenance``: read while the query is embedded, so the keyword candidates' question
    cosines cost no statement once its vector is there."""
    if not memory_ids:
        return []
    dim = int(provenance.dim)
    await cur.execute(
        f"SELECT mq.memory_id, {sent_vector_sql('e.embedding', dim)} FROM memory_questions mq"
        f" JOIN memory_question_embeddings e ON e.question_id = mq.id AND {OF_PROVENANCE}"
        " WHERE mq.memory_id = ANY(%(ids)s::bigint[])",
        {**vector_rows.provenance_params(provenance), "ids": IdArray(memory_ids)})
    rows = await cur.fetchall()
    decoded = sent_vectors([row[1] for row in rows], dim)
    return [(int(rows[n][0]), vector) for n, vector in decoded.items()]


@dataclass
class QuestionMatches:
    """What a query's vector finds among the written questions: the memories of its nearest
    questions, best first, and each memory's best question cosine (those nearest, and the
    ``known`` memories that have a question vector). On pgvector also the rows of the
    leading memories not ``known``, and their own vector's cosine with the query
    (``rows``, ``cosines``; None and empty on the numpy index). Asked with a ``Split``,
    each memory's best question cosine on each language side too (``sides``)."""

    nearest: list[tuple[int, float]] = field(default_factory=list)  # (memory id, cosine)
    best: dict[int, float] = field(default_factory=dict)
    rows: dict[int, CandidateRow] | None = None
    cosines: dict[int, float] = field(default_factory=dict)
    sides: dict[int, dict[str, float]] = field(default_factory=dict)  # memory -> side -> cos

    def on_side(self, memory_id: int, side: str, cosine: float) -> None:
        """Count one question's cosine on its language side."""
        held = self.sides.setdefault(memory_id, {})
        held[side] = max(cosine, held.get(side, cosine))


@dataclass(frozen=True)
class Split:
    """Where a question vector's language side is read: its product with ``direction``
    past ``midpoint`` is the Chinese side (``search.background.Reference``: the direction
    from the English reference memories' centre to the Chinese ones', halfway between)."""

    direction: np.ndarray
    midpoint: float

    def chinese(self, along: Any) -> Any:
        """Whether a product with ``direction`` (a float, or an array of them) is past the
        midpoint: the one rule ``side`` and ``sides`` read."""
        return along > self.midpoint

    def side(self, along: float) -> str:
        return "zh" if self.chinese(along) else "en"

    def sides(self, vectors: np.ndarray) -> np.ndarray:
        """``side`` of each row of ``vectors`` (an array of "zh" and "en"), in one product."""
        return np.where(self.chinese(vectors @ np.asarray(self.direction, dtype=np.float64)),
                        "zh", "en")


async def nearest_questions(cur: Cursor, provenance: VectorSource, query: np.ndarray, *,
                            k: int, exclude: Sequence[int], known: Sequence[int],
                            rows_within: int, split: Split | None = None,
                            cosines_of: Sequence[int] | None = None) -> QuestionMatches:
    """The memories (active, not excluded) of the ``k`` questions nearest to ``query``
    (pgvector HNSW) with their best cosine, the rows and own cosines of those ranked within
    ``rows_within`` that are not ``known``, and the best question cosine of each
    ``cosines_of`` memory (default ``known``; those whose question vectors were read
    beforehand need none): one round trip. With ``split``, the best on each language side
    too."""
    dim = int(provenance.dim)
    wanted = list(known if cosines_of is None else cosines_of)
    distance = f"e.embedding::vector({dim}) <=> (SELECT v FROM q)"
    chinese = (f"-(e.embedding::vector({dim}) <#> %(towards)s::vector({dim})) > %(midpoint)s"
               if split is not None else "NULL::boolean")
    blanks = ", ".join(["NULL"] * (len(MEMORY_COLUMNS.split(", ")) + 2))  # own, columns, terms
    known_part = (
        f" UNION ALL SELECT 'known', mq.memory_id, max(1 - ({distance})),"
        f" max(1 - ({distance})) FILTER (WHERE {chinese}),"
        f" max(1 - ({distance})) FILTER (WHERE NOT ({chinese})), {blanks}"
        " FROM memory_questions mq JOIN memory_question_embeddings e ON e.question_id = mq.id"
        f"  AND {OF_PROVENANCE} WHERE mq.memory_id = ANY(%(wanted)s::bigint[])"
        " GROUP BY mq.memory_id") if wanted else ""
    own = f"1 - (me.embedding::vector({dim}) <=> (SELECT v FROM q))"
    params = {**knn_params(provenance, query, k, exclude), "known": IdArray(known),
              "wanted": IdArray(wanted), "within": rows_within}
    if split is not None:
        params.update(towards=vector_literal(split.direction), midpoint=split.midpoint)
    await prepared.execute(
        cur,
        f"WITH q AS MATERIALIZED (SELECT %(q)s::vector({dim}) AS v),"
        f" near AS MATERIALIZED (SELECT e.question_id, 1 - ({distance}) AS cosine,"
        f"   {chinese} AS zh"
        f"   FROM memory_question_embeddings e WHERE {OF_PROVENANCE}"
        f"   ORDER BY {distance} LIMIT %(k)s),"
        " best AS (SELECT mq.memory_id AS id, max(n.cosine) AS cosine,"
        "   max(n.cosine) FILTER (WHERE n.zh) AS zh,"
        "   max(n.cosine) FILTER (WHERE NOT n.zh) AS en FROM near n"
        "   JOIN memory_questions mq ON mq.id = n.question_id"
        "   JOIN memories m ON m.id = mq.memory_id"
        "   WHERE m.is_active AND NOT (m.id = ANY(%(exclude)s::bigint[]))"
        "   GROUP BY mq.memory_id),"
        " ranked AS (SELECT id, cosine, zh, en, rank() OVER (ORDER BY cosine DESC) AS place"
        "   FROM best)"
        f" SELECT 'near' AS kind, r.id AS hit, r.cosine, r.zh AS zh_cosine,"
        f" r.en AS en_cosine, {own} AS own, {MEMORY_COLUMNS},"
        " m.search_terms FROM ranked r LEFT JOIN memories m ON m.id = r.id"
        "  AND r.place <= %(within)s AND NOT (r.id = ANY(%(known)s::bigint[]))"
        f" LEFT JOIN memory_embeddings me ON me.memory_id = m.id"
        f"  AND me.provider = %(provider)s AND me.model = %(model)s AND me.dim = %(dim)s"
        f"{known_part}", params,
        ahead="SET hnsw.ef_search = %(ef)s; SET hnsw.iterative_scan = relaxed_order; ")
    found = QuestionMatches(rows={})
    assert found.rows is not None
    for row in rows_as_dicts(cur, await cur.fetchall()):
        kind, memory_id, cosine = row.pop("kind"), int(row.pop("hit")), float(row.pop("cosine"))
        own_cosine = row.pop("own")
        for side in ("zh", "en"):
            on_side = row.pop(f"{side}_cosine")
            if on_side is not None:
                found.on_side(memory_id, side, float(on_side))
        if kind == "near":
            found.nearest.append((memory_id, cosine))
            if row["id"] is not None:
                found.rows[memory_id] = cast(CandidateRow, row)
                if own_cosine is not None:
                    found.cosines[memory_id] = float(own_cosine)
        found.best[memory_id] = max(cosine, found.best.get(memory_id, cosine))
    found.nearest.sort(key=lambda item: (-item[1], item[0]))
    return found
