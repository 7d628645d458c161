"""SQL shared by the vector tables (memory vectors and conversation message vectors).

Both tables hold one ``real[]`` vector per row of a source table, tagged with its provenance
(provider, model, dim) and the SHA-256 of the text it was made from. A ``VectorTable`` names
one of them; the functions here find rows lacking a current vector, store vectors, and give
the in-process numpy index its cheap views (newest write, count, digests, pages of vectors).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any, Protocol, cast

import numpy as np

from pawwake.db.pool import Cursor, TextRow, fetch_all, fetch_one

OF_PROVENANCE = "e.provider = %(provider)s AND e.model = %(model)s AND e.dim = %(dim)s"


@dataclass(frozen=True)
class VectorTable:
    """One vector table and the source rows it gives vectors to.

    In ``stale`` and ``scope`` the source row is ``s`` and the vector row ``e``."""

    name: str  # the vector table, e.g. "memory_embeddings"
    key: str  # its column referencing the source row's id, e.g. "memory_id"
    source: str  # the source table, e.g. "memories"
    stale: str  # true when a stored vector was made from other text than the row's
    scope: str = "true"  # which source rows need a vector at all


def sha_sql(alias: str) -> str:
    """SQL for the SHA-256 (hex) of ``alias.content``, the same digest as ``content_sha``."""
    return f"encode(sha256(convert_to({alias}.content, 'UTF8')), 'hex')"


def content_sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class VectorSource(Protocol):
    """What made a vector (``llm.embeddings.Provenance`` fits): vectors of two sources are
    never compared or mixed."""

    @property
    def provider(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def dim(self) -> int: ...


def provenance_params(provenance: VectorSource) -> dict[str, Any]:
    return {"provider": provenance.provider, "model": provenance.model,
            "dim": int(provenance.dim)}


def _joined(vector: np.ndarray) -> str:
    """The elements as ``%.7g`` (7 significant digits is float32 precision), comma-separated.

    One ``%`` over the whole row: formatting each element in a generator took 4x longer, and
    a batch of vectors is formatted on the event loop."""
    values = vector.tolist()
    return _pattern(len(values)) % tuple(values)


@lru_cache(maxsize=8)
def _pattern(length: int) -> str:
    return ",".join(["%.7g"] * length)


def array_literal(vector: np.ndarray) -> str:
    """A ``real[]`` text literal, compact."""
    return "{" + _joined(vector) + "}"


def vector_literal(vector: np.ndarray) -> str:
    """A pgvector text literal."""
    return "[" + _joined(vector) + "]"


# -- backfill ----------------------------------------------------------------------------------

async def rows_needing_vectors(cur: Cursor, table: VectorTable, provenance: VectorSource,
                               after_id: int, limit: int) -> list[TextRow]:
    """Source rows in scope without a current vector, in id order after ``after_id``."""
    return cast(list[TextRow], await fetch_all(
        cur,
        f"SELECT s.id, s.content FROM {table.source} s"
        f" LEFT JOIN {table.name} e ON e.{table.key} = s.id AND {OF_PROVENANCE}"
        f" WHERE s.id > %(after)s AND {table.scope}"
        f" AND (e.{table.key} IS NULL OR {table.stale})"
        " ORDER BY s.id LIMIT %(limit)s",
        {**provenance_params(provenance), "after": after_id, "limit": limit}))


async def coverage(cur: Cursor, table: VectorTable, provenance: VectorSource) -> tuple[int, int]:
    """(source rows in scope with a current vector, source rows in scope)."""
    row = await fetch_one(
        cur,
        f"SELECT count(*) FILTER (WHERE e.{table.key} IS NOT NULL AND NOT {table.stale})"
        f" AS done, count(*) AS total FROM {table.source} s"
        f" LEFT JOIN {table.name} e ON e.{table.key} = s.id AND {OF_PROVENANCE}"
        f" WHERE {table.scope}", provenance_params(provenance))
    assert row is not None
    return int(row["done"]), int(row["total"])


async def store_vectors(cur: Cursor, table: VectorTable, provenance: VectorSource,
                        rows: Sequence[tuple[int, str, np.ndarray]]) -> list[int]:
    """Upsert ``(source id, content_sha, vector)`` rows; returns the ids stored.

    A row is skipped when its source row was deleted or its content changed after it was
    read, so a stale vector is never stored under fresh content: the source row is
    share-locked, so an edit in flight either finishes first (and the digest check sees the
    new text) or waits and then replaces or deletes this vector itself.
    """
    if not rows:
        return []
    values = ",".join(["(%s::bigint, %s::text, %s::text)"] * len(rows))
    params: list[Any] = []
    for source_id, sha, vector in rows:
        params.extend((source_id, sha, array_literal(vector)))
    prov = provenance_params(provenance)
    await cur.execute(
        f"INSERT INTO {table.name}"
        f" ({table.key}, provider, model, dim, content_sha, embedding, created_at)"
        " SELECT v.id, %s, %s, %s, v.sha, v.emb::real[], clock_timestamp()"
        f" FROM (VALUES {values}) AS v (id, sha, emb)"
        f" JOIN {table.source} s ON s.id = v.id AND {sha_sql('s')} = v.sha FOR SHARE OF s"
        f" ON CONFLICT ({table.key}) DO UPDATE SET provider = EXCLUDED.provider,"
        " model = EXCLUDED.model, dim = EXCLUDED.dim, content_sha = EXCLUDED.content_sha,"
        " embedding = EXCLUDED.embedding, created_at = EXCLUDED.created_at"
        f" RETURNING {table.key}",
        (prov["provider"], prov["model"], prov["dim"], *params))
    return [row[0] for row in await cur.fetchall()]


# -- the numpy index's view of a table ----------------------------------------------------------

async def newest_vector(cur: Cursor, table: VectorTable, provenance: VectorSource
                        ) -> datetime | None:
    """When the newest vector of one provenance was written: the cheap "anything new?" check
    (one step down the table's ``(provider, model, dim, created_at)`` index)."""
    row = await fetch_one(
        cur, f"SELECT max(created_at) AS newest FROM {table.name} e WHERE {OF_PROVENANCE}",
        provenance_params(provenance))
    return row["newest"] if row else None


async def vector_count(cur: Cursor, table: VectorTable, provenance: VectorSource, *,
                       up_to: int | None = None) -> int:
    """How many vectors one provenance has (an index-only count; used to notice deletions),
    or at most ``up_to`` (the count stops there: what the backend rule needs to know)."""
    rows = (f"SELECT 1 FROM {table.name} e WHERE {OF_PROVENANCE}"
            + ("" if up_to is None else " LIMIT %(up_to)s"))
    row = await fetch_one(cur, f"SELECT count(*) AS n FROM ({rows}) r",
                          {**provenance_params(provenance), "up_to": up_to})
    return int(row["n"]) if row else 0


async def fetch_vectors(cur: Cursor, table: VectorTable, provenance: VectorSource, *,
                        after_id: int = 0, limit: int = 5000, since: datetime | None = None,
                        ids: Sequence[int] | None = None
                        ) -> list[tuple[int, str, datetime, np.ndarray]]:
    """Vectors of one provenance as ``(source id, content_sha, created_at, vector)``.

    Pages by id (``after_id``/``limit``); optionally only rows written at or after ``since``
    or only the given ``ids``.
    """
    where = [OF_PROVENANCE, f"e.{table.key} > %(after)s"]
    params: dict[str, Any] = {**provenance_params(provenance), "after": after_id,
                              "limit": limit}
    if since is not None:
        where.append("e.created_at >= %(since)s")
        params["since"] = since
    if ids is not None:
        where.append(f"e.{table.key} = ANY(%(ids)s::bigint[])")
        params["ids"] = list(ids)
    await cur.execute(
        f"SELECT e.{table.key}, e.content_sha, e.created_at, array_send(e.embedding)"
        f" FROM {table.name} e WHERE {' AND '.join(where)}"
        f" ORDER BY e.{table.key} LIMIT %(limit)s", params)
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


async def vector_shas_since(cur: Cursor, table: VectorTable, provenance: VectorSource,
                            since: datetime | None) -> list[tuple[int, str]]:
    """``(source id, content_sha)`` of rows written at or after ``since`` (all when None)."""
    await cur.execute(
        f"SELECT e.{table.key}, e.content_sha FROM {table.name} e WHERE {OF_PROVENANCE}"
        " AND (%(since)s::timestamptz IS NULL OR e.created_at >= %(since)s)",
        {**provenance_params(provenance), "since": since})
    return [(row[0], row[1]) for row in await cur.fetchall()]


async def vector_ids(cur: Cursor, table: VectorTable, provenance: VectorSource,
                     from_id: int = 0) -> list[int]:
    """The source ids with a vector of one provenance (from ``from_id`` on)."""
    await cur.execute(f"SELECT e.{table.key} FROM {table.name} e WHERE {OF_PROVENANCE}"
                      f" AND e.{table.key} >= %(from)s",
                      {**provenance_params(provenance), "from": from_id})
    return [row[0] for row in await cur.fetchall()]


async def newest_ids_from(cur: Cursor, table: VectorTable, provenance: VectorSource,
                          count: int) -> int:
    """The lowest source id among the newest ``count`` (highest ids) vectors of one
    provenance (0 when there are fewer)."""
    row = await fetch_one(
        cur, f"SELECT e.{table.key} AS id FROM {table.name} e WHERE {OF_PROVENANCE}"
             f" ORDER BY e.{table.key} DESC OFFSET %(skip)s LIMIT 1",
        {**provenance_params(provenance), "skip": max(0, count - 1)})
    return int(row["id"]) if row else 0
