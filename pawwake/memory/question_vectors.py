"""The vectors of the questions a memory answers (written by the memory model): stored, and
the questions nearest to a query found, on the backend memory vectors use.

A user's question is worded like the questions the model wrote for its memory, not like the
memory ("我能吃花生酱吗？" / "The user is allergic to peanuts" / "What am I allergic to?"), so
each written question has a vector of its own and a memory counts by its best one: on the
natural questions among 300 other memories, the right memory is in the top five for 0.88 of
the questions by its best question's cosine, 0.67 by its own vector (figures in
``tests/data/retrieval/README.md``).

On pgvector one statement (``db.memory_questions.nearest_questions``) gives the memories of
the nearest questions and the best question cosine of the keyword candidates; on the numpy
index, both are products in process, with the questions' memories held here in arrays
(``memory.question_owners``; question rows never change owner, so the map only grows; new
questions are read by id at most every ``REFRESH_SECONDS``).

The numpy index holds the newest ``NUMPY_QUESTION_ROWS`` question vectors (default 100,000,
about 147 MB and one more scan as long as the memory index's at 100k memories), not all of
them: the model writes 2 to 4 questions a memory (at most 6), so at 100k memories all of
them would take 440-880 MB of float32 rows (a free host has 512 MB) and a search would scan
3-6 times the memory vectors. The memories whose questions are let go keep their own
vector and their questions' keywords (cut into their index terms); pgvector holds them all.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from pawwake.db import memory_questions as questions_db
from pawwake.db.memory_questions import QUESTION_VECTORS, QuestionMatches, Split
from pawwake.db.pool import cursor
from pawwake.memory.question_owners import QuestionOwners
from pawwake.search.vector_index import VectorIndex

if TYPE_CHECKING:
    import aiopg

    from pawwake.database import Database
    from pawwake.llm.embeddings import Provenance
    from pawwake.search.vector_backend import VectorBackend
    from pawwake.settings import Settings

NEAREST_QUESTIONS = 40  # questions a search looks at (several may belong to one memory)
REFRESH_SECONDS = 3.0
LATE_IDS = 1000  # question ids below the newest seen read again (a late commit's rows)


class QuestionVectors:
    """Question vectors of this process: the numpy index over them and who owns each."""

    def __init__(self, backend: VectorBackend, index: VectorIndex | None = None) -> None:
        self.backend = backend
        self.index = index or VectorIndex(table=QUESTION_VECTORS)
        self.owners = QuestionOwners()
        self._checked_at = -REFRESH_SECONDS
        self._lock = asyncio.Lock()

    async def store(self, database: Database, provenance: Provenance,
                    rows: Sequence[tuple[int, str, np.ndarray]]) -> list[int]:
        """Save question vectors (``(question id, content sha, vector)``) and add them to the
        numpy index; returns the ids stored (questions gone meanwhile are skipped)."""
        return await self.index.store(database.pool, provenance, rows)

    async def nearest(self, database: Database, settings: Settings, provenance: Provenance,
                      query: np.ndarray, *, known: Sequence[int], exclude: Sequence[int],
                      rows_within: int = 0, k: int = NEAREST_QUESTIONS,
                      split: Split | None = None, cosines_of: Sequence[int] | None = None
                      ) -> QuestionMatches:
        """The memories of the ``k`` questions nearest to ``query`` and the best question
        cosine of each of them and of the ``cosines_of`` memories (default ``known``; with
        ``split``, on each language side too). pgvector leaves out archived and excluded
        memories and brings the rows of the memories ranked within ``rows_within`` that are
        not ``known``; the numpy index leaves out the excluded ones (archived rows are
        dropped by the row fetch, as for memory vectors)."""
        wanted = list(known if cosines_of is None else cosines_of)
        if await self.backend.choose(settings, database, provenance,
                                     QUESTION_VECTORS) == "pgvector":
            async with cursor(database.pool) as cur:
                return await questions_db.nearest_questions(cur, provenance, query, k=k,
                                                            exclude=exclude, known=known,
                                                            rows_within=rows_within,
                                                            split=split, cosines_of=wanted)
        if not self.bound(settings):
            return QuestionMatches()
        found = await self.index.search(database.pool, provenance, query, k)
        await self._owners(database.pool, [i for i, _ in found])
        skip = set(exclude)
        matches = QuestionMatches()
        counted: list[tuple[int, int, float]] = []  # (question, memory, cosine)
        for question_id, cosine in found:
            memory_id = self.owners.owner(question_id)
            if memory_id is None or memory_id in skip:
                continue
            counted.append((question_id, memory_id, cosine))
            if memory_id not in matches.best:
                matches.nearest.append((memory_id, cosine))
                matches.best[memory_id] = cosine
        # With a split every question of a known memory counts, as on pgvector: its best
        # one on the other language's side may not be among the nearest.
        asked = self.owners.asked_by([m for m in wanted
                                      if split is not None or m not in matches.best])
        if split is None:
            cosines = await self.index.cosines_for(database.pool, provenance, query,
                                                   [question_id for question_id, _ in asked])
            for question_id, memory_id in asked:
                if (value := cosines.get(question_id)) is not None:
                    matches.best[memory_id] = max(value, matches.best.get(memory_id, value))
            return matches
        # Each question's cosine and its side of the split: one product over their rows.
        products = await self.index.products_for(
            database.pool, provenance, [query, split.direction],
            [*(question_id for question_id, _ in asked), *(q for q, _, _ in counted)])
        for question_id, memory_id in asked:
            if (held := products.get(question_id)) is not None:
                counted.append((question_id, memory_id, held[0]))
                matches.best[memory_id] = max(held[0], matches.best.get(memory_id, held[0]))
        for question_id, memory_id, cosine in counted:
            if (held := products.get(question_id)) is not None:
                matches.on_side(memory_id, split.side(held[1]), cosine)
        return matches

    def bound(self, settings: Settings) -> int:
        """Bound the numpy index by ``NUMPY_QUESTION_ROWS`` (a change reloads it on its next
        use); returns the bound."""
        self.index.most = int(settings.NUMPY_QUESTION_ROWS)
        return self.index.most

    async def _owners(self, pool: aiopg.Pool, found: Sequence[int]) -> None:
        """Learn the memories of new questions: every question past the newest id seen, at
        most every ``REFRESH_SECONDS``, and any of ``found`` still unknown."""
        unknown = [i for i in found if self.owners.owner(i) is None]
        if not unknown and time.monotonic() - self._checked_at < REFRESH_SECONDS:
            return
        async with self._lock:
            async with cursor(pool) as cur:
                if time.monotonic() - self._checked_at >= REFRESH_SECONDS:
                    self.owners.learn(await questions_db.owners(
                        cur, after_id=max(0, self.owners.newest - LATE_IDS)))
                    self._checked_at = time.monotonic()
                unknown = [i for i in found if self.owners.owner(i) is None]
                if unknown:
                    self.owners.learn(await questions_db.owners(cur, ids=unknown))
