"""4.x vectors into ours, when the model and dimension that made them are the ones in force.

4.x kept one vector per row, in a pgvector ``embedding`` column or as JSON text in
``embedding_json``; ours keeps them in ``memory_embeddings`` / ``conversation_embeddings``
tagged with their provenance and the digest of the text they were made from. Only vectors of
exactly the expected dimension are copied; every other row is left to the background
embedding jobs.
"""

from __future__ import annotations

from typing import Any

from pawwake.db.legacy.helpers import batch_copy, run_batch
from pawwake.db.legacy.schema import LegacySchema
from pawwake.db.pool import Cursor, fetch_one
from pawwake.db.vector_rows import sha_sql

# (4.x table, our vector table, its key column, our source table)
TARGETS = {"memories": ("memory_embeddings", "memory_id", "memories"),
           "conversations": ("conversation_embeddings", "message_id", "conversations")}


async def copy_batch(cur: Cursor, legacy: LegacySchema, table: str, provenance: dict[str, Any],
                     after: int, limit: int) -> tuple[int | None, int]:
    """Copy the vectors of the next ``limit`` source rows after id ``after`` that fit
    ``provenance`` (provider, model, dim): (last id read, vectors stored)."""
    if legacy.vector_column(table) is None:
        return None, 0
    target, key, source = TARGETS[table]

    def statement(lenient: bool) -> str:
        return batch_copy(
            f"{legacy.schema}.{table}",
            f"{target} ({key}, provider, model, dim, content_sha, embedding)",
            f"s.id, %(provider)s, %(model)s, %(dim)s, {sha_sql('s')}, t.v",
            read=f"t.id, {legacy.vector_column(table, lenient=lenient)} AS v",
            join=f" JOIN {source} s ON s.id = t.id",
            where="cardinality(t.v) = %(dim)s AND btrim(s.content) <> ''",
            conflict=f" ON CONFLICT ({key}) DO NOTHING")

    return await run_batch(cur, statement, {"after": after, "limit": limit, **provenance})


async def survey(cur: Cursor, legacy: LegacySchema, table: str) -> dict[str, Any]:
    """How many rows carry a vector, and of which dimensions (the three most common)."""
    column = legacy.vector_column(table, lenient=True)
    if column is None or not legacy.has(table):
        return {"with_vector": 0, "dims": {}}
    await cur.execute(
        f"SELECT cardinality({column}) AS dim, count(*)"
        f" FROM {legacy.schema}.{table} t WHERE {column} IS NOT NULL GROUP BY 1"
        " ORDER BY 2 DESC LIMIT 3")
    dims = {str(dim): int(n) for dim, n in await cur.fetchall()}
    row = await fetch_one(cur, f"SELECT count(*) AS n FROM {legacy.schema}.{table} t"
                               f" WHERE {column} IS NOT NULL")
    return {"with_vector": int(row["n"]) if row else 0, "dims": dims}
