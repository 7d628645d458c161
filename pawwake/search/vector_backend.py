"""Which backend a vector search runs on, and pgvector's HNSW indexes: one rule for every
vector table (memory vectors, their written questions' vectors, conversation message vectors).

``VECTOR_BACKEND=auto`` (the default) searches a table in process (the numpy index,
``search.vector_index``) while it holds at most ``VECTOR_INDEX_MAX_ROWS`` vectors of the
model in use, and on pgvector (an HNSW expression index per provenance and table) above, when
the extension exists and the dimension fits the index; ``numpy`` and ``pgvector`` force one.
Below the bound the exact product in process answers as pgvector does (the same results on
the retrieval benchmark up to 3,000 memories with their written questions) for a few MB of
memory (about 1.7 KB a row of 384 dims) and no statement on PostgreSQL; above it the scan
grows with the rows while HNSW does not, and at 10,000 memories the in-process question
path no longer gives pgvector's results (more memories ride along on unrelated chats), nor
is it faster there (figures in CHANGELOG), so larger tables stay on pgvector.
The bound is 0 by default (pgvector whenever usable): on a quiet machine at 3,000 memories the
in-process search made a chat's added time slightly longer (its scan is followed by a round
trip for the rows, while the questions still go to pgvector), and no faster at 20 streams.

The written questions' vectors stay on pgvector whatever their number: the in-process
question path does not yet give pgvector's results (among 1,000 memories one more natural
question misses its memory, ``tests/test_memory_relevance.py``).

A table's rows are counted (up to the bound, so the count stays cheap) on its first search
and again at most every ``SIZE_SECONDS``: every process of a fleet counts the same table, so
they agree, and the HNSW indexes are built whenever pgvector could be used, so one is ready
when a table grows past the bound. The assembly builds one backend (memory's
``VectorStore`` is one) and hands it to memory search and conversation recall alike; the
indexes it knows exist, the builds it started and the counts are remembered on it, per
process.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import psycopg2

from pawwake.db import memory_embeddings as vectors_db
from pawwake.db import vector_rows
from pawwake.db.memory_embeddings import MEMORY_VECTORS
from pawwake.db.memory_questions import QUESTION_VECTORS
from pawwake.db.pool import DATABASE_ERRORS, connection, cursor
from pawwake.db.vector_rows import VectorTable

if TYPE_CHECKING:
    from pawwake.database import Database
    from pawwake.llm.embeddings import Provenance
    from pawwake.settings import Settings
    from pawwake.tasks import BackgroundTasks

log = logging.getLogger(__name__)

SIZE_SECONDS = 30.0  # a table's count is taken again after this long


def configured_backend(settings: Settings, has_pgvector: bool) -> str:
    """What the settings and the database make of vector search, as the status page and the
    health summary name it: ``numpy`` (no extension, or forced), ``pgvector`` (forced, or
    ``auto`` with no in-process bound) or ``auto`` (in process while a table is small)."""
    if not has_pgvector or settings.VECTOR_BACKEND == "numpy":
        return "numpy"
    if settings.VECTOR_BACKEND == "pgvector" or int(settings.VECTOR_INDEX_MAX_ROWS) <= 0:
        return "pgvector"
    return "auto"


@dataclass(frozen=True)
class _Count:
    rows: int  # the table's vectors of one provenance, counted up to ``cap``
    cap: int
    at: float  # time.monotonic() when counted


class VectorBackend:
    """The backend choice and pgvector's indexes, for every vector table of this process."""

    def __init__(self) -> None:
        self._known_indexes: set[str] = set()  # HNSW indexes seen to exist
        self._requested: set[str] = set()  # ... and those a search asked to be built
        self._warned = False
        self._counts: dict[tuple[str, str, str, int], _Count] = {}
        self._counting: dict[tuple[str, str, str, int], asyncio.Future[_Count]] = {}
        self.counted = 0  # count statements so far (figures tests read)

    async def choose(self, settings: Settings, database: Database, provenance: Provenance,
                     table: VectorTable = MEMORY_VECTORS) -> str:
        """``pgvector`` or ``numpy`` for a search of ``table`` (see the module docstring)."""
        if not self.pgvector_possible(settings, database, provenance):
            return "numpy"
        if settings.VECTOR_BACKEND == "pgvector" or table.name == QUESTION_VECTORS.name:
            return "pgvector"
        bound = int(settings.VECTOR_INDEX_MAX_ROWS)
        rows = await self.rows(database, provenance, table, bound + 1)
        return "numpy" if rows is not None and rows <= bound else "pgvector"

    def pgvector_possible(self, settings: Settings, database: Database,
                          provenance: Provenance) -> bool:
        """Whether searches of this provenance may run on pgvector at all: the extension is
        there, ``VECTOR_BACKEND`` is not ``numpy`` and the dimension fits an HNSW index."""
        choice = settings.VECTOR_BACKEND
        if choice == "numpy" or not database.pgvector:
            if choice == "pgvector" and not self._warned:
                self._warned = True
                log.warning("VECTOR_BACKEND=pgvector but the extension is missing; using numpy")
            return False
        return provenance.dim <= vectors_db.HNSW_MAX_DIM

    async def rows(self, database: Database, provenance: Provenance, table: VectorTable,
                   cap: int) -> int | None:
        """``table``'s vectors of ``provenance``, counted up to ``cap``: the first time now,
        then again at most every ``SIZE_SECONDS`` (one search waits for that count while the
        others go on with the last one). None when the database could not count."""
        key = (table.name, provenance.provider, provenance.model, int(provenance.dim))
        known = self._counts.get(key)
        if known is not None and known.cap == cap and (
                time.monotonic() - known.at < SIZE_SECONDS or key in self._counting):
            return known.rows
        counting = self._counting.get(key)
        if counting is None:
            counting = asyncio.ensure_future(self._count(database, provenance, table, cap))
            self._counting[key] = counting
            counting.add_done_callback(lambda _done: self._counting.pop(key, None))
        try:
            found = await asyncio.shield(counting)
        except DATABASE_ERRORS as exc:
            log.warning("could not count the vectors of %s: %s", table.name, type(exc).__name__)
            return None
        self._counts[key] = found
        return found.rows

    async def _count(self, database: Database, provenance: Provenance, table: VectorTable,
                     cap: int) -> _Count:
        async with cursor(database.pool) as cur:
            rows = await vector_rows.vector_count(cur, table, provenance, up_to=cap)
        self.counted += 1
        return _Count(rows, cap, time.monotonic())

    async def ensure_hnsw_index(self, database: Database, settings: Settings,
                                provenance: Provenance, table: str = "memory_embeddings"
                                ) -> bool:
        """Create the provenance's HNSW index on ``table`` (memory or conversation vectors)
        when pgvector may be used (also while a small table is searched in process, so the
        index is there when it grows past ``VECTOR_INDEX_MAX_ROWS``); True when it exists."""
        if not self.pgvector_possible(settings, database, provenance):
            return False
        name = vectors_db.hnsw_index_name(provenance, table)
        if name in self._known_indexes:
            return True
        async with cursor(database.pool) as cur:
            exists = await vectors_db.hnsw_index_exists(cur, provenance, table)
        if not exists:
            log.info("creating vector index %s", name)
            try:  # a plain connection: CREATE INDEX CONCURRENTLY runs outside any transaction
                async with connection(database.pool) as conn, conn.cursor() as cur:
                    await vectors_db.create_hnsw_index(cur, provenance, table=table)
            except psycopg2.Error as exc:
                log.warning("could not create vector index %s: %s", name, exc.pgcode)
                return False
        self._known_indexes.add(name)
        return True

    def request_hnsw_index(self, tasks: BackgroundTasks, database: Database,
                           settings: Settings, provenance: Provenance, table: str) -> None:
        """From the search path: build a missing index in the background, at most once per
        index and process (vectors stored before the index existed, or by another writer)."""
        name = vectors_db.hnsw_index_name(provenance, table)
        if name in self._requested:
            return
        self._requested.add(name)
        tasks.spawn(self.ensure_hnsw_index(database, settings, provenance, table),
                    name=f"vector-index-{table}")
