"""Which backend a vector search runs on, and pgvector's HNSW indexes: one choice for both
vector tables (memory vectors and conversation message vectors).

Searches run on pgvector (an HNSW expression index per provenance and table) when the
extension exists, ``VECTOR_BACKEND`` allows it and the dimension fits the index, else on the
in-process numpy index (``search.vector_index``). The assembly builds one backend (memory's
``VectorStore`` is one) and hands it to memory search and conversation recall alike; the
indexes it knows exist and the builds it started are remembered on it, per process.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import psycopg2

from pawwake.db import memory_embeddings as vectors_db
from pawwake.db.pool import connection, cursor

if TYPE_CHECKING:
    from pawwake.database import Database
    from pawwake.llm.embeddings import Provenance
    from pawwake.settings import Settings
    from pawwake.tasks import BackgroundTasks

log = logging.getLogger(__name__)


class VectorBackend:
    """The backend choice and pgvector's indexes, for every vector table of this process."""

    def __init__(self) -> None:
        self._known_indexes: set[str] = set()  # HNSW indexes seen to exist
        self._requested: set[str] = set()  # ... and those a search asked to be built
        self._warned = False

    def backend(self, settings: Settings, database: Database, provenance: Provenance) -> str:
        """``pgvector`` or ``numpy`` for this search."""
        choice = settings.VECTOR_BACKEND
        if choice == "numpy" or not database.pgvector:
            if choice == "pgvector" and not self._warned:
                self._warned = True
                log.warning("VECTOR_BACKEND=pgvector but the extension is missing; using numpy")
            return "numpy"
        if provenance.dim > vectors_db.HNSW_MAX_DIM:
            return "numpy"
        return "pgvector"

    async def ensure_hnsw_index(self, database: Database, settings: Settings,
                                provenance: Provenance, table: str = "memory_embeddings"
                                ) -> bool:
        """Create the provenance's HNSW index on ``table`` (memory or conversation vectors)
        when pgvector is in use; True when it exists."""
        if self.backend(settings, database, provenance) != "pgvector":
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
