"""SQL for the questions the memory model wrote for memories and their vectors.

``memory_questions`` holds one row per written question (kept in step with
``memories.model_questions`` by the triggers of migration 0026), ``memory_question_embeddings``
one vector per question, like ``memory_embeddings`` per memory. A question row is never
rewritten, so a vector of the configured provenance is current for as long as its row exists.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from pawwake.db import vector_rows
from pawwake.db.memory_embeddings import knn_params
from pawwake.db.pool import Cursor, TextRow, fetch_all
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


@dataclass
class QuestionMatches:
    """What a query's vector finds among the written questions: the memories of its nearest
    questions, best first, and each memory's best question cosine (those nearest, and the
    ``known`` memories that have a question vector)."""

    nearest: list[tuple[int, float]] = field(default_factory=list)  # (memory id, cosine)
    best: dict[int, float] = field(default_factory=dict)


async def nearest_questions(cur: Cursor, provenance: VectorSource, query: np.ndarray, *,
                            k: int, exclude: Sequence[int], known: Sequence[int]
                            ) -> QuestionMatches:
    """The memories (active, not excluded) of the ``k`` questions nearest to ``query``
    (pgvector HNSW), with their best cosine, and the best question cosine of each ``known``
    memory: one round trip."""
    dim = int(provenance.dim)
    distance = f"e.embedding::vector({dim}) <=> (SELECT v FROM q)"
    known_part = (
        f" UNION ALL SELECT 'known', mq.memory_id, max(1 - ({distance}))"
        " FROM memory_questions mq JOIN memory_question_embeddings e ON e.question_id = mq.id"
        f"  AND {OF_PROVENANCE} WHERE mq.memory_id = ANY(%(known)s::bigint[])"
        " GROUP BY mq.memory_id") if known else ""
    await cur.execute(
        "SET hnsw.ef_search = %(ef)s; SET hnsw.iterative_scan = relaxed_order;"
        f" WITH q AS MATERIALIZED (SELECT %(q)s::vector({dim}) AS v),"
        f" near AS MATERIALIZED (SELECT e.question_id, 1 - ({distance}) AS cosine"
        f"   FROM memory_question_embeddings e WHERE {OF_PROVENANCE}"
        f"   ORDER BY {distance} LIMIT %(k)s)"
        " SELECT 'near', mq.memory_id, max(n.cosine) FROM near n"
        " JOIN memory_questions mq ON mq.id = n.question_id"
        " JOIN memories m ON m.id = mq.memory_id"
        " WHERE m.is_active AND NOT (m.id = ANY(%(exclude)s::bigint[]))"
        f" GROUP BY mq.memory_id{known_part}",
        {**knn_params(provenance, query, k, exclude), "known": list(known)})
    found = QuestionMatches()
    for kind, memory_id, cosine in await cur.fetchall():
        value = float(cosine)
        if kind == "near":
            found.nearest.append((int(memory_id), value))
        found.best[int(memory_id)] = max(value, found.best.get(int(memory_id), value))
    found.nearest.sort(key=lambda item: (-item[1], item[0]))
    return found
