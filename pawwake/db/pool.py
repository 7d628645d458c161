"""The aiopg connection pool, and the two ways callers hold a cursor: ``transaction`` and
``cursor``; both bound every statement they run (``db/statement_bounds.py``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, NotRequired, TypedDict

import aiopg
import psycopg2
import psycopg2.extensions
import psycopg2.extras

from pawwake.db import statement_bounds as bounds
from pawwake.db import text_params  # noqa: F401  (cleans every text parameter)
from pawwake.db.errors import DatabaseUnavailable

log = logging.getLogger(__name__)

# Every public ``db/`` function takes one of these first: a cursor the caller got from
# ``transaction(pool)`` (several writes, all or nothing) or ``cursor(pool)`` (autocommit).
Cursor = aiopg.Cursor
Row = dict[str, Any]  # a row keyed by column name, for shapes not worth a TypedDict
Params = Sequence[Any] | Mapping[str, Any] | None


class TextRow(TypedDict):
    """A source row to cut terms from or embed: its id and text."""

    id: int
    content: str
    written: NotRequired[list[str]]  # memories: what the memory model wrote to find it


class PoolTimeout(DatabaseUnavailable, TimeoutError):
    """No connection within the pool's timeout (still a TimeoutError for older handlers)."""


class ConnectionLost(DatabaseUnavailable):
    """The connection died under a statement or while it was opened. aiopg says so with a
    plain ``OSError``, or a ``TimeoutError`` when the server stopped answering; turned into
    this here, so "the database is away" is one set of errors everywhere above."""

    def __init__(self) -> None:
        super().__init__("The connection to the database was lost; try again shortly.")


# The database is away: not reachable, the connection broke, a statement was stopped, or it
# is turned off; not "this request is wrong". Callers answer 503 (or spool, or degrade) for
# these, and only for these. QueryCanceled and friends subclass OperationalError and count.
UNAVAILABLE_ERRORS: tuple[type[BaseException], ...] = (
    psycopg2.OperationalError, psycopg2.InterfaceError, DatabaseUnavailable)
# Away, or refusing a statement (a constraint, a bug): what best-effort work (usage rows, lease
# renewals, seen marks, warm-ups) logs and carries on after, rather than failing its caller.
DATABASE_ERRORS: tuple[type[BaseException], ...] = (psycopg2.Error, *UNAVAILABLE_ERRORS)

psycopg2.extras.register_default_jsonb(loads=__import__("json").loads, globally=True)


async def create_pool(dsn: str, *, minsize: int = 1, maxsize: int = 10,
                      on_connect: Callable[[aiopg.Connection], Awaitable[None]] | None = None
                      ) -> aiopg.Pool:
    """Open a pool; ``sslmode`` and other libpq options pass through inside the DSN.
    ``on_connect`` runs for each new connection (``db/prepared.py`` ``allow``)."""
    bounds.report_stopped_statements_ourselves(asyncio.get_running_loop())
    try:
        return await aiopg.create_pool(dsn, minsize=minsize, maxsize=maxsize, timeout=30,
                                       pool_recycle=300, on_connect=on_connect)
    except OSError as exc:  # TimeoutError included: the server did not answer in time
        raise ConnectionLost() from exc


async def server_connection_limit(cur: Cursor) -> int:
    """The server's ``max_connections`` (behind a pooler, the server's own, not the pooler's):
    what the pools of every gateway process together must stay under."""
    await cur.execute("SHOW max_connections")
    row = await cur.fetchone()
    return int(row[0])


@asynccontextmanager
async def connection(pool: aiopg.Pool) -> AsyncIterator[aiopg.Connection]:
    """A pooled connection. A pool that cannot hand one out in time raises DatabaseUnavailable;
    a connection that broke (server restarted, network gone) makes the pool drop its idle
    ones too, so the next request connects afresh instead of meeting another stale one."""
    try:
        conn = await pool.acquire()
    except TimeoutError:
        raise PoolTimeout("No database connection within the pool timeout.") from None
    except OSError as exc:
        raise ConnectionLost() from exc
    try:
        with bounds.stopped_statements_raised():
            yield conn
    except (psycopg2.OperationalError, psycopg2.InterfaceError):
        if conn.closed:
            _discard_idle(pool)
        raise
    except OSError as exc:
        # aiopg's wait for an answer ran out (TimeoutError) or its socket failed: it closed
        # the connection. Anything else (a deadline of the caller's, the connection intact)
        # is the caller's own error and passes unchanged.
        if isinstance(exc, DatabaseUnavailable) or not conn.closed:
            raise
        _discard_idle(pool)
        raise ConnectionLost() from exc
    finally:
        await pool.release(conn)


def _discard_idle(pool: aiopg.Pool) -> None:
    if not pool.closed and not getattr(pool, "_closing", False):
        task = asyncio.get_running_loop().create_task(pool.clear(), name="pool-clear")
        _CLEARING.add(task)
        task.add_done_callback(_CLEARING.discard)


_CLEARING: set[asyncio.Task[None]] = set()


class OpeningCursor(psycopg2.extensions.cursor):
    """The cursor of ``transaction``: its BEGIN and bounds travel with its first statement,
    and ``deferred`` writes with the next one or the COMMIT, as one query string, so they
    cost no round trip of their own (a turn's store was a dozen; on a database across the
    network each is milliseconds). PostgreSQL runs the string in order, inside the block."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.opening: str | None = None  # sent ahead of the next statement, once
        self.pending: list[str] = []  # deferred writes, as sent

    def execute(self, query: Any, vars: Any = None) -> None:
        ahead = [*([self.opening] if self.opening is not None else []), *self.pending]
        self.opening, self.pending = None, []
        if ahead:
            if vars is not None:  # the query is formatted: what goes ahead is already sent text
                ahead = [part.replace("%", "%%") for part in ahead]
            query = "; ".join([*ahead, bounds.query_text(self, query)])
        super().execute(query, vars)


@asynccontextmanager
async def transaction(pool: aiopg.Pool) -> AsyncIterator[Cursor]:
    """Yield a cursor inside BEGIN … COMMIT; any exception rolls the whole write back.

    Callers own transactions: every ``db/`` function takes a cursor, so the writes of one
    operation share this one by passing it along. BEGIN goes with the first statement
    (``OpeningCursor``); a transaction that ran none sends nothing."""
    async with connection(pool) as conn, conn.cursor(cursor_factory=OpeningCursor,
                                                     timeout=bounds.client_seconds()) as cur:
        raw = cur.raw
        raw.opening = "BEGIN; " + bounds.bounds_sql(conn.server_version)
        try:
            yield cur
            if raw.opening is None or raw.pending:
                await cur.execute("COMMIT")  # a deferred write that fails lands below
        except BaseException:
            raw.pending = []
            # a cancelled statement closed the connection: nothing left to roll back
            if raw.opening is None and not conn.closed:
                with contextlib.suppress(psycopg2.Error):
                    await cur.execute("ROLLBACK")
            raise


async def deferred(cur: Cursor, sql: str, params: Params = None) -> None:
    """A write whose outcome the caller does not read: inside ``transaction`` it is sent
    with the next statement or the COMMIT (an error then fails the whole transaction, as
    it would have anyway); on an autocommit cursor it runs now."""
    raw = cur.raw
    if isinstance(raw, OpeningCursor):
        raw.pending.append(raw.mogrify(sql, params).decode("utf-8"))
    else:
        await cur.execute(sql, params)


@asynccontextmanager
async def cursor(pool: aiopg.Pool) -> AsyncIterator[Cursor]:
    """Yield an autocommit cursor: each statement commits on its own (reads, single writes)."""
    async with connection(pool) as conn, conn.cursor(cursor_factory=bounds.BoundedStatements,
                                                     timeout=bounds.client_seconds()) as cur:
        yield cur


async def fetch_all(cur: Cursor, sql: str, params: Params = None) -> list[Row]:
    """Run a query and return its rows as dicts."""
    await cur.execute(sql, params)
    return rows_as_dicts(cur, await cur.fetchall())


async def fetch_one(cur: Cursor, sql: str, params: Params = None) -> Row | None:
    await cur.execute(sql, params)
    row = await cur.fetchone()
    return rows_as_dicts(cur, [row])[0] if row is not None else None


async def execute(cur: Cursor, sql: str, params: Params = None) -> int:
    """Run one statement; return the affected row count."""
    await cur.execute(sql, params)
    return cur.rowcount


def rows_as_dicts(cur: Cursor, rows: Sequence[Sequence[Any]]) -> list[Row]:
    """Rows keyed by the column names of the statement ``cur`` just ran."""
    names = [d.name for d in cur.description or ()]
    return [dict(zip(names, row, strict=True)) for row in rows]
