"""What every adoption transaction sets up first: no statement timeout, and lenient readers.

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

from pawwake.db.pool import Cursor

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
    """Call first in the transaction: timeouts off for it alone, readers defined."""
    await cur.execute("SET LOCAL statement_timeout = 0")
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
