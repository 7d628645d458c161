"""SQL for memory vectors: storing them, finding rows that lack one, provenance, pgvector KNN.

Vectors live in ``memory_embeddings.embedding real[]`` so the table works without pgvector;
with pgvector an HNSW expression index per provenance makes ``embedding::vector(d)`` searchable.
A vector is current when its provenance matches and ``content_sha`` is the SHA-256 of the
memory's content. Editing content deletes the vector, and storing one locks its memory row and
re-checks the digest, so "current" can be checked cheaply: no vector of the provenance, or a
row changed after its vector was written whose digest (computed in SQL) no longer matches.
"""

from __future__ import annotations

import binascii
import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from pawwake.db import vector_rows
from pawwake.db.array_literals import IdArray
from pawwake.db.pool import Cursor, TextRow, fetch_all, fetch_one
from pawwake.db.vector_rows import (
    VectorSource,
    VectorTable,
    array_literal,
    content_sha,
    sha_sql,
    vector_literal,
)
from pawwake.db.vector_rows import provenance_params as _prov
from pawwake.text.storable import storable_json

__all__ = ["array_literal", "content_sha", "vector_literal"]

PROVENANCE_FLAG = "memory_embedding_provenance"
HNSW_MAX_DIM = 2000  # pgvector's limit for an HNSW index on ``vector``
# Every memory (active or archived) gets a vector; an edit deletes it, so only a row changed
# after its vector was written needs its digest computed.
MEMORY_VECTORS = VectorTable(
    "memory_embeddings", "memory_id", "memories",
    stale=f"(s.updated_at > e.created_at AND e.content_sha <> {sha_sql('s')})")


# -- provenance of what is stored ------------------------------------------------------------

async def recorded_provenance(cur: Cursor) -> dict[str, Any] | None:
    """The provenance stored vectors were made with, as recorded when they were written."""
    row = await fetch_one(cur, "SELECT value FROM runtime_flags WHERE name = %s",
                          (PROVENANCE_FLAG,))
    value = row["value"] if row else None
    return value if isinstance(value, dict) else None


async def record_provenance(cur: Cursor, provenance: VectorSource) -> None:
    await cur.execute(
        "INSERT INTO runtime_flags (name, value) VALUES (%s, %s::jsonb)"
        " ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value, updated_at = now()",
        (PROVENANCE_FLAG, storable_json(_prov(provenance))))


async def has_vectors(cur: Cursor, provenance: dict[str, Any]) -> bool:
    row = await fetch_one(
        cur, "SELECT EXISTS (SELECT 1 FROM memory_embeddings WHERE provider = %(provider)s"
             " AND model = %(model)s AND dim = %(dim)s) AS present", provenance)
    return bool(row and row["present"])


# -- backfill and the numpy index ------------------------------------------------------------

async def rows_needing_vectors(cur: Cursor, provenance: VectorSource, after_id: int, limit: int
                               ) -> list[TextRow]:
    """Memories (active or not) without a current vector, in id order after ``after_id``."""
    return await vector_rows.rows_needing_vectors(cur, MEMORY_VECTORS, provenance, after_id,
                                                  limit)


async def coverage(cur: Cursor, provenance: VectorSource) -> tuple[int, int]:
    """(memories with a current vector, all memories)."""
    return await vector_rows.coverage(cur, MEMORY_VECTORS, provenance)


async def store_vectors(cur: Cursor, provenance: VectorSource,
                        rows: Sequence[tuple[int, str, np.ndarray]]) -> list[int]:
    """Upsert ``(memory_id, content_sha, vector)`` rows; returns the ids stored (see
    ``vector_rows.store_vectors``: a memory edited meanwhile is skipped)."""
    return await vector_rows.store_vectors(cur, MEMORY_VECTORS, provenance, rows)


async def vector_count(cur: Cursor, provenance: VectorSource) -> int:
    return await vector_rows.vector_count(cur, MEMORY_VECTORS, provenance)


# -- pgvector -------------------------------------------------------------------------------

VECTOR_TABLES = ("memory_embeddings", "conversation_embeddings",
                 "memory_question_embeddings")  # (provider, model, dim,
# embedding real[]) tables that get per-provenance HNSW indexes


def hnsw_index_name(provenance: VectorSource, table: str = "memory_embeddings") -> str:
    if table not in VECTOR_TABLES:
        raise ValueError(f"no vector index for table {table!r}")
    tag = hashlib.sha1(f"{provenance.provider}\0{provenance.model}".encode()).hexdigest()[:10]
    return f"{table}_hnsw_{int(provenance.dim)}_{tag}"


async def hnsw_index_exists(cur: Cursor, provenance: VectorSource,
                            table: str = "memory_embeddings") -> bool:
    """True when the provenance's index exists and is valid (a failed concurrent build
    leaves an invalid one behind)."""
    row = await fetch_one(cur, "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)",
                          (hnsw_index_name(provenance, table),))
    return bool(row and row["indisvalid"])


async def create_hnsw_index(cur: Cursor, provenance: VectorSource, *, memory_mb: int = 128,
                            seconds: float = 3600.0, table: str = "memory_embeddings") -> None:
    """A partial HNSW expression index for one provenance (cosine distance).

    Built concurrently so memory writes and deletes go on meanwhile; an invalid leftover of an
    interrupted build is dropped first.
    """
    dim, name = int(provenance.dim), hnsw_index_name(provenance, table)
    await cur.execute("SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)",
                      (name,))
    row = await cur.fetchone()
    if row and row[0]:
        return
    if row:
        await cur.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}", timeout=seconds)
    await cur.execute(f"SET maintenance_work_mem = '{int(memory_mb)}MB'")
    try:
        await cur.execute(
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON {table}"
            f" USING hnsw ((embedding::vector({dim})) vector_cosine_ops)"
            " WHERE dim = %(dim)s AND provider = %(provider)s AND model = %(model)s",
            _prov(provenance), timeout=seconds)
    finally:
        await cur.execute("RESET maintenance_work_mem")


def knn_sql(provenance: VectorSource) -> str:
    """Nearest active memories by cosine, via the provenance's HNSW index."""
    dim = int(provenance.dim)
    return (
        f"SET hnsw.ef_search = %(ef)s; SET hnsw.iterative_scan = relaxed_order;"
        f" SELECT e.memory_id, 1 - (e.embedding::vector({dim}) <=> %(q)s::vector({dim}))"
        " FROM memory_embeddings e JOIN memories m ON m.id = e.memory_id"
        " WHERE e.dim = %(dim)s AND e.provider = %(provider)s AND e.model = %(model)s"
        " AND m.is_active AND NOT (m.id = ANY(%(exclude)s::bigint[]))"
        f" ORDER BY e.embedding::vector({dim}) <=> %(q)s::vector({dim}) LIMIT %(k)s")


def knn_params(provenance: VectorSource, query: np.ndarray, k: int, exclude: Sequence[int]
               ) -> dict[str, Any]:
    return {**_prov(provenance), "q": vector_literal(query), "k": k,
            "ef": max(40, min(1000, k)), "exclude": IdArray(exclude)}


async def knn(cur: Cursor, provenance: VectorSource, query: np.ndarray, k: int,
              exclude: Sequence[int] = ()) -> list[tuple[int, float]]:
    await cur.execute(knn_sql(provenance), knn_params(provenance, query, k, exclude))
    return [(int(r[0]), float(r[1])) for r in await cur.fetchall()]


async def cosines_for(cur: Cursor, provenance: VectorSource, query: np.ndarray,
                      ids: Sequence[int]) -> dict[int, float]:
    """Cosine of the query with the stored vectors of ``ids`` (those that have one)."""
    if not ids:
        return {}
    dim = int(provenance.dim)
    rows = await fetch_all(
        cur,
        f"SELECT memory_id, 1 - (embedding::vector({dim}) <=> %(q)s::vector({dim})) AS cos"
        " FROM memory_embeddings WHERE memory_id = ANY(%(ids)s::bigint[])"
        " AND provider = %(provider)s AND model = %(model)s AND dim = %(dim)s",
        {**_prov(provenance), "q": vector_literal(query), "ids": IdArray(ids)})
    return {int(r["memory_id"]): float(r["cos"]) for r in rows}


def sent_vector_sql(column: str, dim: int) -> str:
    """SQL for a ``real[]`` column as pgvector's binary form in hex, for reading many vectors
    at once: half the bytes ``array_send`` gives as text, and decoded six times faster
    than base64 (which cost the event loop 2-3 ms on a search's 200 keyword rows)."""
    return f"encode(vector_send({column}::vector({int(dim)})), 'hex')"


def sent_vectors(values: Sequence[str | None], dim: int) -> dict[int, np.ndarray]:
    """Decode ``sent_vector_sql`` values (int16 dim, int16 unused, then big-endian float4s),
    by position; NULLs and other shapes are left out."""
    size = 4 + 4 * dim
    raw = {i: binascii.a2b_hex(value) for i, value in enumerate(values) if value is not None}
    kept = {i: blob for i, blob in raw.items() if len(blob) == size}
    if not kept:
        return {}
    words = np.frombuffer(b"".join(kept.values()), dtype=">f4").reshape(len(kept), dim + 1)
    matrix = words[:, 1:].astype(np.float32)
    return {i: matrix[n] for n, i in enumerate(kept)}
