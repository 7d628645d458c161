"""What every adoption transaction sets up first: no lock timeout, and lenient readers.

4.x stored JSON (message metadata, summaries, vectors) as text that may not parse. A cast
that fails would abort the whole batch, so these ``pg_temp`` functions answer NULL for
unreadable text instead, and the caller decides what to keep. They live only as long as
the session and are (re)made in the transaction that uses them, which also holds behind a
transaction-mode pooler.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg2

from pawwake.db.pool import Cursor, Row

_READERS = (
    "CREATE OR REPLACE FUNCTION pg_temp.pawwake_jsonb(raw text) RETURNS jsonb"
    " LANGUAGE plpgsql IMMUTABLE AS $f$ BEGIN RETURN raw::jsonb;"
    " EXCEPTION WHEN others THEN RETURN NULL; END $f$",
    # a vector written as '[1,2,3]' (pgvector's text form, or 4.x's embedding_json)
    "CREATE OR REPLACE FUNCTION pg_temp.pawwake_reals(raw text) RETURNS real[]"
    " LANGUAGE plpgsql IMMUTABLE AS $f$ BEGIN"
    " RETURN ('{' || btrim(raw, E'[] \\t\\n') || '}')::real[];"
    " EXCEPTION WHEN others THEN RETURN NULL; END $f$",
    "CREATE OR REPLACE FUNCTION pg_temp.pawwake_time(raw text) RETURNS timestamptz"
    " LANGUAGE plpgsql STABLE AS $f$ BEGIN RETURN raw::timestamptz;"
    " EXCEPTION WHEN others THEN RETURN NULL; END $f$",
)


async def prepare(cur: Cursor) -> None:
    """Call first in the transaction: no lock timeout (a managed server may set one per role;
    the migration lock is waited for), readers defined. Statements are unbounded by the
    caller (``statements_bounded(NO_BOUND)``)."""
    await cur.execute("SET LOCAL lock_timeout = 0")
    for sql in _READERS:
        await cur.execute(sql)


async def fast_or_lenient(cur: Cursor, statement: Callable[[bool], str], params: Any
                          ) -> list[tuple[Any, ...]]:
    """The rows of ``statement(False)``, whose plain casts are many times faster than the
    lenient readers; when a value of the batch does not parse, of ``statement(True)``
    instead, in the same transaction."""
    await cur.execute("SAVEPOINT pawwake_fast")
    try:
        await cur.execute(statement(False), params)
    except psycopg2.DataError:
        await cur.execute("ROLLBACK TO SAVEPOINT pawwake_fast")
        await cur.execute(statement(True), params)
        return list(await cur.fetchall())
    rows = list(await cur.fetchall())
    await cur.execute("RELEASE SAVEPOINT pawwake_fast")
    return rows


def batch_copy(source: str, target: str, values: str, *, where: str = "true",
               read: str = "*", join: str = "", conflict: str = "") -> str:
    """One batch of a copy: the next ``%(limit)s`` rows of ``source`` (alias ``t``) after id
    ``%(after)s``, in id order, inserted into ``target`` as ``values`` where ``where`` holds.
    Answers one row: (last source id read, or NULL when none was left; rows inserted)."""
    return (f"WITH batch AS MATERIALIZED (SELECT {read} FROM {source} t"
            " WHERE t.id > %(after)s ORDER BY t.id LIMIT %(limit)s),"
            f" inserted AS (INSERT INTO {target} SELECT {values} FROM batch t{join}"
            f" WHERE {where}{conflict} RETURNING 1)"
            " SELECT (SELECT max(id) FROM batch), (SELECT count(*) FROM inserted)")


async def run_batch(cur: Cursor, statement: Callable[[bool], str], params: dict[str, Any]
                    ) -> tuple[int | None, int]:
    """(last source id read, rows inserted) of a ``batch_copy`` statement."""
    rows = await fast_or_lenient(cur, statement, params)
    return (rows[0][0], int(rows[0][1])) if rows else (None, 0)


def counts_of(row: Row | None) -> dict[str, Any]:
    """A survey row of counts as plain ints, ready to be extended with lists."""
    return {key: int(value) for key, value in (row or {}).items()}
