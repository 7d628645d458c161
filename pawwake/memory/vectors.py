"""Memory vectors: where they are stored and searched, and whose model made them.

Search runs in process on the numpy index while the table is small, on pgvector (an HNSW
expression index per provenance) above ``VECTOR_INDEX_MAX_ROWS`` when the extension exists,
or as ``VECTOR_BACKEND`` forces (the rule and the indexes: ``search.vector_backend``, shared
with conversation recall). The provenance of stored
vectors is recorded; when the configured provider/model/dimension differs from it, stored
vectors are not comparable any more, searches fall back to keywords and a rebuild needs an
explicit confirmation.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pawwake.database import Database
from pawwake.db import memory_embeddings as vectors_db
from pawwake.db import memory_search as search_db
from pawwake.db.pool import connection, cursor
from pawwake.llm.embeddings import Provenance
from pawwake.memory.question_vectors import QuestionVectors
from pawwake.search.vector_backend import VectorBackend
from pawwake.search.vector_index import VectorIndex
from pawwake.settings import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProvenanceState:
    configured: Provenance
    stored: dict[str, Any] | None  # what the stored vectors were made with (None: none yet)
    needs_rebuild: bool


async def provenance_state(database: Database, configured: Provenance) -> ProvenanceState:
    """Compare the configured provenance with the recorded one.

    A rebuild is needed only when vectors of another provenance exist: with none stored there
    is nothing to lose and the configured one is simply adopted on the next backfill.
    """
    async with cursor(database.pool) as cur:
        stored = await vectors_db.recorded_provenance(cur)
        if stored is None or stored == configured.as_dict():
            return ProvenanceState(configured, stored, needs_rebuild=False)
        present = await vectors_db.has_vectors(cur, stored)
    return ProvenanceState(configured, stored, needs_rebuild=present)


async def adopt_provenance(database: Database, configured: Provenance) -> bool:
    """Record ``configured`` as the stored vectors' provenance unless that would mix models.

    Returns False when vectors of another provenance exist (a confirmed rebuild must switch).
    """
    state = await provenance_state(database, configured)
    if state.needs_rebuild:
        return False
    if state.stored != configured.as_dict():
        await confirm_provenance(database, configured)
    return True


async def confirm_provenance(database: Database, configured: Provenance) -> None:
    """Switch to ``configured``: older vectors stop counting and are replaced by the backfill."""
    async with connection(database.pool) as conn, conn.cursor() as cur:
        await vectors_db.record_provenance(cur, configured)
    log.info("memory vectors now use %s/%s (%s dims)", configured.provider, configured.model,
             configured.dim)


class VectorStore(VectorBackend):
    """Memory vectors: stored, and their neighbours found, on the backend the gateway's
    choice (``VectorBackend``) gives a search (one per process), with the vectors of the
    questions the memory model wrote for them (``questions``) on the same backend."""

    def __init__(self, index: VectorIndex | None = None) -> None:
        super().__init__()
        self.index = index or VectorIndex()
        self.questions = QuestionVectors(self)

    async def store(self, database: Database, provenance: Provenance,
                    rows: Sequence[tuple[int, str, np.ndarray]]) -> list[int]:
        """Save vectors and add them to this process's numpy index; returns the ids stored."""
        return await self.index.store(database.pool, provenance, rows)

    async def nearest(self, database: Database, settings: Settings,
                      provenance: Provenance, query: np.ndarray, k: int,
                      exclude: Iterable[int] = ()) -> list[tuple[int, float]]:
        """The ``k`` nearest memories by cosine, best first. pgvector returns active rows
        only; the numpy index may include archived ones (dropped later by the row fetch)."""
        exclude = list(exclude)
        if await self.choose(settings, database, provenance) == "pgvector":
            async with cursor(database.pool) as cur:
                found = await vectors_db.knn(cur, provenance, query, k, exclude)
            return sorted(found, key=lambda item: -item[1])
        return await self.index.search(database.pool, provenance, query, k, exclude)

    async def neighbourhood(self, database: Database, settings: Settings,
                            provenance: Provenance, query: np.ndarray, *, k: int,
                            exclude: Sequence[int], known: Sequence[int], rows_within: int,
                            cosines_of: Sequence[int] | None = None,
                            across: np.ndarray | None = None, across_k: int = 0,
                            direction: np.ndarray | None = None
                            ) -> search_db.Neighbourhood:
        """``nearest`` and the cosines of ``cosines_of`` (default ``known``) at once, and
        with ``across`` its ``across_k`` nearest with their cosine with ``query``. On
        pgvector one statement also brings the rows of the neighbours ranked within
        ``rows_within`` that are not ``known`` (``rows``); on numpy both are in process and
        ``rows`` is None, and an ``across`` in the plane of ``query`` and the fixed
        ``direction`` costs no second scan of the rows."""
        wanted = list(known if cosines_of is None else cosines_of)
        if await self.choose(settings, database, provenance) == "pgvector":
            async with cursor(database.pool) as cur:
                return await search_db.neighbourhood(cur, provenance, query, k=k,
                                                     exclude=exclude, known=known,
                                                     rows_within=rows_within,
                                                     cosines_of=wanted, across=across,
                                                     across_k=across_k)
        ids: list[int] = []
        if across is None or across_k <= 0:
            nearest = await self.index.search(database.pool, provenance, query, k, exclude)
        elif direction is None:
            nearest = await self.index.search(database.pool, provenance, query, k, exclude)
            ids = [i for i, _ in await self.index.search(database.pool, provenance, across,
                                                         across_k, exclude)]
        else:
            nearest, near_across = await self.index.search_pair(
                database.pool, provenance, query, k, across, across_k, direction, exclude)
            ids = [i for i, _ in near_across]
        wanted += ids
        cosines = (await self.index.cosines_for(database.pool, provenance, query, wanted)
                   if wanted else {})
        found_across = [(i, cosines[i]) for i in ids if i in cosines]
        return search_db.Neighbourhood(nearest, cosines, None, found_across)


@dataclass(frozen=True)
class ReadVectors:
    """Stored vectors read before the query's vector exists, made ready for ``cosines`` (the
    conversion is done then, not after the vector)."""

    ids: list[int]
    matrix: np.ndarray  # float64 rows
    squares: np.ndarray  # each row's squared norm

    @classmethod
    def of(cls, stored: Mapping[int, np.ndarray]) -> ReadVectors:
        return cls.of_rows(list(stored), list(stored.values()))

    @classmethod
    def of_rows(cls, ids: Sequence[int], rows: Sequence[np.ndarray]) -> ReadVectors:
        """One row per vector, ``ids`` naming each (an id may repeat: a memory's questions)."""
        if not rows:
            return cls([], np.zeros((0, 0)), np.zeros(0))
        matrix = np.vstack(list(rows)).astype(np.float64)
        return cls(list(ids), matrix, (matrix * matrix).sum(axis=1))

    def similarities(self, query: np.ndarray) -> np.ndarray:
        """Each row's cosine with ``query``, in row order (NaN for a zero row)."""
        vector = np.asarray(query, dtype=np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            similarity = (self.matrix @ vector) / np.sqrt(self.squares * float(vector @ vector))
        return np.clip(similarity, -1.0, 1.0)

    def cosines(self, query: np.ndarray) -> dict[int, float]:
        """Cosine of ``query`` with each row as pgvector gives it (``1 - (a <=> b)``), in
        double precision: pgvector sums in single precision, so the last digits may differ."""
        if not self.ids:
            return {}
        return {memory_id: float(value)
                for memory_id, value in zip(self.ids, self.similarities(query).tolist(),
                                            strict=True)
                if math.isfinite(value)}
