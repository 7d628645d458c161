"""The written questions' part of a memory search: the query's nearest questions looked up
beside its nearest memories, the memories they bring as candidates, and each candidate's
best question standing in that question's language (the evidence ``search.relevance``
reads).

A memory whose written question is nearest to the user's becomes a candidate even when its
own vector and its keywords did not bring it ("Can I eat a peanut butter sandwich?" /
"What am I allergic to?" / "The user is allergic to peanuts"); it is admitted when it ranks
among the ``ADMIT_TOP`` memories by best question and that question stands at least
``ADMIT_STANDING`` deviations above the query's background in its language (the fixed
reference set, so the bar is the same at 5 memories and at 10,000).

On pgvector the keyword candidates' question vectors are read while the query is embedded
(``ReadQuestions``): their best cosines are products in process once the vector is there,
and the statement after it looks up only the nearest questions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from pawwake.database import Database
from pawwake.db.memory_questions import QuestionMatches, Split
from pawwake.db.memory_search import CandidateRow
from pawwake.memory import vectors
from pawwake.memory.search.query_vector import QueryVector
from pawwake.settings import Settings

if TYPE_CHECKING:
    from pawwake.memory.faces import MemorySearch

ADMIT_TOP = 5  # memories (by their best question) that may be admitted
ADMIT_STANDING = 3.0  # deviations above the background a question must stand to admit


@dataclass(frozen=True)
class ReadQuestions:
    """The question vectors of some memories, read before the query's vector exists and made
    ready for products with it (``vectors.ReadVectors``, each row named by its memory)."""

    memories: frozenset[int]  # the memories whose questions were read (a vector or not)
    rows: vectors.ReadVectors  # one row per question

    @classmethod
    def of(cls, memories: Sequence[int], rows: Sequence[tuple[int, np.ndarray]]
           ) -> ReadQuestions:
        return cls(frozenset(memories), vectors.ReadVectors.of_rows(
            [memory_id for memory_id, _ in rows], [vector for _, vector in rows]))

    def count_into(self, matches: QuestionMatches, query: np.ndarray, split: Split) -> None:
        """Each read memory's best question cosine, overall and on each language side, into
        ``matches``: what the nearest questions' statement gives its ``cosines_of``. The
        questions are sorted worst first, so the dict built from them keeps each memory's
        best (a loop per question cost the step after the query's vector half a millisecond)."""
        if not self.rows.ids:
            return
        cosines = self.rows.similarities(query)
        sides = split.sides(self.rows.matrix)
        kept = np.flatnonzero(np.isfinite(cosines))
        kept = kept[np.argsort(cosines[kept], kind="stable")]
        owners = np.asarray(self.rows.ids)[kept].tolist()
        ordered = cosines[kept].tolist()
        for memory_id, cosine in dict(zip(owners, ordered, strict=True)).items():
            if cosine > matches.best.get(memory_id, -math.inf):
                matches.best[memory_id] = cosine
        placed = zip(owners, sides[kept].tolist(), strict=True)
        for (memory_id, side), cosine in dict(zip(placed, ordered, strict=True)).items():
            matches.on_side(memory_id, side, cosine)


async def nearest_questions(search: MemorySearch, database: Database, settings: Settings,
                            semantic: QueryVector, *, known: Sequence[int],
                            exclude: Sequence[int], read: ReadQuestions | None = None
                            ) -> QuestionMatches:
    """The query's nearest written questions (one statement on pgvector, run beside the
    nearest memories' one), with the rows of the leading memories; the best question of each
    ``known`` memory too, in process for those whose questions were ``read``."""
    split = Split(semantic.reference.direction, semantic.reference.midpoint)
    left = [i for i in known if i not in read.memories] if read is not None else list(known)
    found = await search.vectors.questions.nearest(
        database, settings, semantic.provenance, semantic.query, known=known,
        exclude=exclude, rows_within=ADMIT_TOP, split=split, cosines_of=left)
    if read is not None:
        read.count_into(found, semantic.query, split)
    return found


def standing(matches: QuestionMatches, semantic: QueryVector) -> dict[int, float]:
    """Each memory's best question as deviations above the query's background in that
    question's language (the side of the model's space its vector lies on): the model
    writes each question in both languages, and a Chinese query stands out among English
    texts by its cosine with the English question ("我能吃花生酱吗？" / "What am I allergic
    to, what can't I eat?": 4.0 deviations above the English background) more than among
    Chinese texts by its cosine with the Chinese one (2.5 above the Chinese background),
    since the model scores every Chinese text high for a Chinese query. A memory whose
    questions' sides are unknown counts its best cosine in the query's language."""
    background = semantic.background
    made = {}
    for memory_id, cosine in matches.best.items():
        sides = matches.sides.get(memory_id)
        made[memory_id] = (max(background.standing(c, side) for side, c in sides.items())
                           if sides else background.standing(cosine, semantic.language))
    return made


def admitted(matches: QuestionMatches, stands: dict[int, float], present: set[int]
             ) -> list[int]:
    """Memories brought by their questions that are not candidates yet, best first."""
    leading = [memory_id for memory_id, _ in matches.nearest[:ADMIT_TOP]]
    return [memory_id for memory_id in leading
            if memory_id not in present and stands.get(memory_id, 0.0) >= ADMIT_STANDING]


def rows_of(matches: QuestionMatches, ids: Sequence[int]) -> tuple[list[CandidateRow], list[int]]:
    """The rows the question statement brought for ``ids``, and the ids it did not (the
    numpy index brings none: the caller fetches them)."""
    rows = matches.rows or {}
    return [rows[i] for i in ids if i in rows], [i for i in ids if i not in rows]
