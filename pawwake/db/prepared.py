"""Statements planned once per connection (``PREPARE``, then ``EXECUTE`` with a generic plan):
memory search's keyword statement and its two statements after the query's vector, and the
reminder claim every chat makes.

Planning was about half of the vector statements' server time at 10,000 memories (the
neighbourhood 2.0 of 3.6 ms, the written questions 1.5 of 3.8 ms), and they are on a chat's
critical path: the reply waits for them. The keyword statement's planning was about 2 ms of
every chat's database time, the claim's (0.4 ms) nearly all of its own. A prepared
statement's plan is made on a connection's first use and reused by every later statement on
it.

Only where every statement of a connection reaches the same server session: the embedded
server, or a ``DATABASE_URL`` the operator declares direct (``DATABASE_DIRECT``). Behind a
transaction-mode pooler (PgBouncer, Supavisor) the next statement may reach another server
connection, where the name is unknown; there the statement is sent as it always was.

The name is a digest of the statement's text. The provenance (provider, model, dimension) and
the row counts are written into that text, not sent as parameters: the planner only takes the
partial HNSW index of a provenance when it sees those values, and a generic plan that does not
know how many rows a LIMIT keeps reads whole tables. Nothing here can fail a search that would
have run unprepared: a statement PostgreSQL will not prepare is sent unprepared from then on,
and a name the session lost (or already has) is prepared again or reused, once.
"""

from __future__ import annotations

import hashlib
import re
import weakref
from collections.abc import Mapping
from typing import Any

import aiopg
import psycopg2
import psycopg2.extensions

from pawwake.db.pool import Cursor, Row, rows_as_dicts

MOST_PER_CONNECTION = 64  # distinct statements kept prepared on one connection
PROVENANCE = ("provider", "model", "dim")
# Row counts (LIMIT, rank cut-offs): as parameters, a generic plan guesses a tenth of the
# table for them and joins every memory by a sequential scan; each is a constant of the
# search anyway. (A value that changes as the store grows, such as the collection's size in an
# IDF weight, must stay a parameter: each value would be a statement of its own.)
SIZES = ("k", "within", "across_k", "window", "gather_cap", "limit")
WRITTEN_IN = (*PROVENANCE, *SIZES)  # parameters written into the prepared text
_PLACEHOLDER = re.compile(r"%\((\w+)\)s")
_GENERIC = "SET LOCAL plan_cache_mode = force_generic_plan"

# Per server session: the names prepared on it (absent: the connection may not prepare).
_prepared: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()
_refused: set[str] = set()  # statements PostgreSQL would not prepare: sent as they are


async def allow(conn: aiopg.Connection) -> None:
    """Let this new connection prepare statements (``create_pool``'s ``on_connect``, only for
    connections known to be direct)."""
    _prepared[conn.raw] = set()


async def execute(cur: Cursor, sql: str, params: Mapping[str, Any], *, ahead: str = ""
                  ) -> None:
    """Run ``ahead`` (plain statements, such as ``SET``) and then ``sql`` prepared, with
    ``params`` (named placeholders; those in ``WRITTEN_IN`` are written into the prepared
    text). Unprepared where the connection does not allow it."""
    known = _prepared.get(cur.raw.connection)
    if known is None:
        await cur.execute(ahead + sql, params)
        return
    body, order = _numbered(_written(cur, sql, params))
    name = "pawwake_" + hashlib.sha256(body.encode("utf-8")).hexdigest()[:24]
    if name in _refused or (name not in known and len(known) >= MOST_PER_CONNECTION):
        await cur.execute(ahead + sql, params)
        return
    run = f"{_GENERIC}; EXECUTE {name}" + (f"({', '.join(f'%({n})s' for n in order)})"
                                           if order else "")
    prepare = f"PREPARE {name} AS {body}; "
    fresh = name not in known
    known.add(name)
    try:
        await cur.execute(ahead + (prepare if fresh else "") + run, params)
    except psycopg2.errors.InvalidSqlStatementName:  # the session lost it: prepare again
        if not _idle(cur):
            known.discard(name)
            raise
        await cur.execute(ahead + prepare + run, params)
    except psycopg2.errors.DuplicatePreparedStatement:  # the session had it already
        if not _idle(cur):
            raise
        await cur.execute(ahead + run, params)
    except psycopg2.Error as exc:
        if not fresh or not (exc.pgcode or "").startswith("42") or not _idle(cur):
            raise  # the statement's own failure (a timeout, bad data): it stays prepared
        known.discard(name)  # PostgreSQL would not prepare it: never try again
        _refused.add(name)
        await cur.execute(ahead + sql, params)


async def fetch_all(cur: Cursor, sql: str, params: Mapping[str, Any]) -> list[Row]:
    """``execute`` and its rows keyed by column name."""
    await execute(cur, sql, params)
    return rows_as_dicts(cur, await cur.fetchall())


def _written(cur: Cursor, sql: str, params: Mapping[str, Any]) -> str:
    """``sql`` with the ``WRITTEN_IN`` parameters replaced by their quoted values (``%``
    doubled, as the text is formatted again with the other parameters)."""
    for name in WRITTEN_IN:
        if f"%({name})s" in sql:
            value = cur.raw.mogrify("%s", (params[name],)).decode("utf-8")
            sql = sql.replace(f"%({name})s", value.replace("%", "%%"))
    return sql


def _numbered(sql: str) -> tuple[str, list[str]]:
    """``sql`` with each named placeholder as ``$n`` (the same name, the same number), and
    the names in number order."""
    order: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(1) not in order:
            order.append(match.group(1))
        return f"${order.index(match.group(1)) + 1}"

    return _PLACEHOLDER.sub(number, sql), order


def _idle(cur: Cursor) -> bool:
    """Whether the connection is outside any transaction, so the statement can be sent again
    (an autocommit cursor's failed statement leaves it so; a failed ``transaction()`` not)."""
    status = cur.raw.connection.info.transaction_status
    return bool(status == psycopg2.extensions.TRANSACTION_STATUS_IDLE)
