"""SQL for memory vectors: storing them, finding rows that lack one, provenance, pgvector KNN.

Vectors live in ``memory_embeddings.embedding real[]`` so the table works without pgvector;
with pgvector an HNSW expression index per provenance makes ``embedding::vector(d)`` searchable.
A vector is current when its provenance matches and ``content_sha`` is the SHA-256 of the
memory's content. Editing content deletes the vector, and storing one locks its memory row and
re-checks the digest, so "current" can be checked cheaply: no vector of the provenance, or a
row changed after its vector was written whose digest (computed in SQL) no longer matches.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import aiopg
import numpy as np

from pawwake.db.pool import cursor, fetch_all, fetch_one

PROVENANCE_FLAG = "memory_embedding_provenance"
HNSW_MAX_DIM = 2000  # pgvector's limit for an HNSW index on ``vector``
_CONTENT_SHA_SQL = "encode(sha256(convert_to(m.content, 'UTF8')), 'hex')"
_OF_PROVENANCE = "e.provider = %(provider)s AND e.model = %(model)s AND e.dim = %(dim)s"
_STALE = f"(m.updated_at > e.created_at AND e.content_sha <> {_CONTENT_SHA_SQL})"


def content_sha(text: str) -> str:
    """The same digest as the SQL expression above."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _prov(provenance: Any) -> dict[str, Any]:
    return {"provider": provenance.provider, "model": provenance.model,
            "dim": int(provenance.dim)}


def array_literal(vector: np.ndarray) -> str:
    """A ``real[]`` text literal, compact (7 significant digits is float32 precision)."""
    return "{" + ",".join(f"{x:.7g}" for x in vector.tolist()) + "}"


def vector_literal(vector: np.ndarray) -> str:
    """A pgvector text literal."""
    return "[" + ",".join(f"{x:.7g}" for x in vector.tolist()) + "]"


# -- provenance of what is stored ------------------------------------------------------------

async def recorded_provenance(pool: aiopg.Pool) -> dict[str, Any] | None:
    """The provenance stored vectors were made with, as recorded when they were written."""
    row = await fetch_one(pool, "SELECT value FROM runtime_flags WHERE name = %s",
                          (PROVENANCE_FLAG,))
    value = row["value"] if row else None
    return value if isinstance(value, dict) else None


async def record_provenance(cur: Any, provenance: Any) -> None:
    await cur.execute(
        "INSERT INTO runtime_flags (name, value) VALUES (%s, %s::jsonb)"
        " ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value, updated_at = now()",
        (PROVENANCE_FLAG, json.dumps(_prov(provenance))))


async def has_vectors(pool: aiopg.Pool, provenance: dict[str, Any]) -> bool:
    row = await fetch_one(
        pool, "SELECT EXISTS (SELECT 1 FROM memory_embeddings WHERE provider = %(provider)s"
              " AND model = %(model)s AND dim = %(dim)s) AS present", provenance)
    return bool(row and row["present"])


# -- backfill ----------------------------------------------------------------------------------

async def rows_needing_vectors(pool: aiopg.Pool, provenance: Any, after_id: int, limit: int
                               ) -> list[dict[str, Any]]:
    """Memories (active or not) without a current vector, in id order after ``after_id``."""
    return await fetch_all(
        pool,
        "SELECT m.id, m.content FROM memories m"
        f" LEFT JOIN memory_embeddings e ON e.memory_id = m.id AND {_OF_PROVENANCE}"
        f" WHERE m.id > %(after)s AND (e.memory_id IS NULL OR {_STALE})"
        " ORDER BY m.id LIMIT %(limit)s",
        {**_prov(provenance), "after": after_id, "limit": limit})


async def coverage(pool: aiopg.Pool, provenance: Any) -> tuple[int, int]:
    """(memories with a current vector, all memories)."""
    row = await fetch_one(
        pool,
        f"SELECT count(*) FILTER (WHERE e.memory_id IS NOT NULL AND NOT {_STALE}) AS done,"
        " count(*) AS total FROM memories m"
        f" LEFT JOIN memory_embeddings e ON e.memory_id = m.id AND {_OF_PROVENANCE}",
        _prov(provenance))
    assert row is not None
    return int(row["done"]), int(row["total"])


async def store_vectors(pool: aiopg.Pool, provenance: Any,
                        rows: Sequence[tuple[int, str, np.ndarray]]) -> list[int]:
    """Upsert ``(memory_id, content_sha, vector)`` rows; returns the ids stored.

    A row is skipped when its memory was deleted or its content changed after it was read, so
    a stale vector is never stored under fresh content: the memory row is share-locked, so an
    edit in flight either finishes first (and the digest check sees the new text) or waits and
    then deletes this vector itself.
    """
    if not rows:
        return []
    values = ",".join(["(%s::bigint, %s::text, %s::text)"] * len(rows))
    params: list[Any] = []
    for memory_id, sha, vector in rows:
        params.extend((memory_id, sha, array_literal(vector)))
    prov = _prov(provenance)
    async with cursor(pool) as cur:
        await cur.execute(
            "INSERT INTO memory_embeddings"
            " (memory_id, provider, model, dim, content_sha, embedding, created_at)"
            f" SELECT v.id, %s, %s, %s, v.sha, v.emb::real[], clock_timestamp()"
            f" FROM (VALUES {values}) AS v (id, sha, emb)"
            f" JOIN memories m ON m.id = v.id AND {_CONTENT_SHA_SQL} = v.sha FOR SHARE OF m"
            " ON CONFLICT (memory_id) DO UPDATE SET provider = EXCLUDED.provider,"
            " model = EXCLUDED.model, dim = EXCLUDED.dim, content_sha = EXCLUDED.content_sha,"
            " embedding = EXCLUDED.embedding, created_at = EXCLUDED.created_at"
            " RETURNING memory_id",
            (prov["provider"], prov["model"], prov["dim"], *params))
        return [row[0] for row in await cur.fetchall()]


# -- the numpy index's view of the table ------------------------------------------------------

async def newest_vector(pool: aiopg.Pool, provenance: Any) -> datetime | None:
    """When the newest vector of one provenance was written: the cheap "anything new?" check
    (one step down the ``memory_embeddings_recent`` index)."""
    row = await fetch_one(
        pool, "SELECT max(created_at) AS newest FROM memory_embeddings"
              " WHERE provider = %(provider)s AND model = %(model)s AND dim = %(dim)s",
        _prov(provenance))
    return row["newest"] if row else None


async def vector_count(pool: aiopg.Pool, provenance: Any) -> int:
    """How many vectors one provenance has (an index-only count; used to notice deletions)."""
    row = await fetch_one(
        pool, "SELECT count(*) AS n FROM memory_embeddings"
              " WHERE provider = %(provider)s AND model = %(model)s AND dim = %(dim)s",
        _prov(provenance))
    return int(row["n"]) if row else 0


async def fetch_vectors(pool: aiopg.Pool, provenance: Any, *, after_id: int = 0,
                        limit: int = 5000, since: datetime | None = None,
                        ids: Sequence[int] | None = None
                        ) -> list[tuple[int, str, datetime, np.ndarray]]:
    """Vectors of one provenance as ``(memory_id, content_sha, created_at, vector)``.

    Pages by id (``after_id``/``limit``); optionally only rows written at or after ``since``
    or only the given ``ids``.
    """
    where = ["provider = %(provider)s", "model = %(model)s", "dim = %(dim)s",
             "memory_id > %(after)s"]
    params: dict[str, Any] = {**_prov(provenance), "after": after_id, "limit": limit}
    if since is not None:
        where.append("created_at >= %(since)s")
        params["since"] = since
    if ids is not None:
        where.append("memory_id = ANY(%(ids)s::bigint[])")
        params["ids"] = list(ids)
    async with cursor(pool) as cur:
        await cur.execute(
            "SELECT memory_id, content_sha, created_at, array_send(embedding)"
            f" FROM memory_embeddings WHERE {' AND '.join(where)}"
            " ORDER BY memory_id LIMIT %(limit)s", params)
        rows = await cur.fetchall()
    dim = int(provenance.dim)
    size = _ARRAY_HEADER + 8 * dim
    rows = [r for r in rows if len(r[3]) == size]  # one dimension, no NULL elements
    if not rows:
        return []
    matrix = _binary_float4_arrays(b"".join(r[3] for r in rows), len(rows), dim)
    return [(r[0], r[1], r[2], matrix[i]) for i, r in enumerate(rows)]


_ARRAY_HEADER = 20  # ndim, has-nulls flag, element type, length, lower bound (int32 each)


def _binary_float4_arrays(data: bytes, count: int, dim: int) -> np.ndarray:
    """Decode ``array_send(real[])`` output: after the header each element is a big-endian
    int32 length (4) followed by the big-endian float32 value. Much faster than text."""
    words = np.frombuffer(data, dtype=">f4").reshape(count, _ARRAY_HEADER // 4 + 2 * dim)
    return words[:, _ARRAY_HEADER // 4 + 1::2].astype(np.float32)


async def vector_shas_since(pool: aiopg.Pool, provenance: Any, since: datetime | None
                            ) -> list[tuple[int, str]]:
    """``(memory_id, content_sha)`` of rows written at or after ``since`` (all when None)."""
    async with cursor(pool) as cur:
        await cur.execute(
            "SELECT memory_id, content_sha FROM memory_embeddings WHERE provider = %(provider)s"
            " AND model = %(model)s AND dim = %(dim)s"
            " AND (%(since)s::timestamptz IS NULL OR created_at >= %(since)s)",
            {**_prov(provenance), "since": since})
        return [(row[0], row[1]) for row in await cur.fetchall()]


async def vector_ids(pool: aiopg.Pool, provenance: Any) -> list[int]:
    async with cursor(pool) as cur:
        await cur.execute(
            "SELECT memory_id FROM memory_embeddings WHERE provider = %(provider)s"
            " AND model = %(model)s AND dim = %(dim)s", _prov(provenance))
        return [row[0] for row in await cur.fetchall()]


# -- pgvector -------------------------------------------------------------------------------

VECTOR_TABLES = ("memory_embeddings", "conversation_embeddings")  # (provider, model, dim,
# embedding real[]) tables that get per-provenance HNSW indexes


def hnsw_index_name(provenance: Any, table: str = "memory_embeddings") -> str:
    if table not in VECTOR_TABLES:
        raise ValueError(f"no vector index for table {table!r}")
    tag = hashlib.sha1(f"{provenance.provider}\0{provenance.model}".encode()).hexdigest()[:10]
    return f"{table}_hnsw_{int(provenance.dim)}_{tag}"


async def hnsw_index_exists(pool: aiopg.Pool, provenance: Any,
                            table: str = "memory_embeddings") -> bool:
    """True when the provenance's index exists and is valid (a failed concurrent build
    leaves an invalid one behind)."""
    row = await fetch_one(pool, "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)",
                          (hnsw_index_name(provenance, table),))
    return bool(row and row["indisvalid"])


async def create_hnsw_index(pool: aiopg.Pool, provenance: Any, *, memory_mb: int = 128,
                            seconds: float = 3600.0, table: str = "memory_embeddings") -> None:
    """A partial HNSW expression index for one provenance (cosine distance).

    Built concurrently so memory writes and deletes go on meanwhile; an invalid leftover of an
    interrupted build is dropped first.
    """
    dim, name = int(provenance.dim), hnsw_index_name(provenance, table)
    async with cursor(pool) as cur:
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


def knn_sql(provenance: Any) -> str:
    """Nearest active memories by cosine, via the provenance's HNSW index."""
    dim = int(provenance.dim)
    return (
        f"SET hnsw.ef_search = %(ef)s; SET hnsw.iterative_scan = relaxed_order;"
        f" SELECT e.memory_id, 1 - (e.embedding::vector({dim}) <=> %(q)s::vector({dim}))"
        " FROM memory_embeddings e JOIN memories m ON m.id = e.memory_id"
        " WHERE e.dim = %(dim)s AND e.provider = %(provider)s AND e.model = %(model)s"
        " AND m.is_active AND NOT (m.id = ANY(%(exclude)s::bigint[]))"
        f" ORDER BY e.embedding::vector({dim}) <=> %(q)s::vector({dim}) LIMIT %(k)s")


def knn_params(provenance: Any, query: np.ndarray, k: int, exclude: Sequence[int]
               ) -> dict[str, Any]:
    return {**_prov(provenance), "q": vector_literal(query), "k": k,
            "ef": max(40, min(1000, k)), "exclude": list(exclude)}


async def knn(pool: aiopg.Pool, provenance: Any, query: np.ndarray, k: int,
              exclude: Sequence[int] = ()) -> list[tuple[int, float]]:
    async with cursor(pool) as cur:
        await cur.execute(knn_sql(provenance), knn_params(provenance, query, k, exclude))
        return [(int(r[0]), float(r[1])) for r in await cur.fetchall()]


async def cosines_for(pool: aiopg.Pool, provenance: Any, query: np.ndarray,
                      ids: Sequence[int]) -> dict[int, float]:
    """Cosine of the query with the stored vectors of ``ids`` (those that have one)."""
    if not ids:
        return {}
    dim = int(provenance.dim)
    rows = await fetch_all(
        pool,
        f"SELECT memory_id, 1 - (embedding::vector({dim}) <=> %(q)s::vector({dim})) AS cos"
        " FROM memory_embeddings WHERE memory_id = ANY(%(ids)s::bigint[])"
        " AND provider = %(provider)s AND model = %(model)s AND dim = %(dim)s",
        {**_prov(provenance), "q": vector_literal(query), "ids": list(ids)})
    return {int(r["memory_id"]): float(r["cos"]) for r in rows}
