"""The aiopg connection pool and a transaction helper."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiopg
import psycopg2
import psycopg2.extras

from pawwake.db import text_params  # noqa: F401  (cleans every text parameter)
from pawwake.db.errors import DatabaseUnavailable

log = logging.getLogger(__name__)


class PoolTimeout(DatabaseUnavailable, TimeoutError):
    """No connection within the pool's timeout (still a TimeoutError for older handlers)."""


# Errors that mean "the database is not reachable", not "this request is wrong": callers
# answer 503 for these. QueryCanceled and friends subclass OperationalError and count too.
UNAVAILABLE_ERRORS: tuple[type[BaseException], ...] = (
    psycopg2.OperationalError, psycopg2.InterfaceError, DatabaseUnavailable)

psycopg2.extras.register_default_jsonb(loads=__import__("json").loads, globally=True)


async def create_pool(dsn: str, *, minsize: int = 1, maxsize: int = 10) -> aiopg.Pool:
    """Open a pool; ``sslmode`` and other libpq options pass through inside the DSN."""
    return await aiopg.create_pool(dsn, minsize=minsize, maxsize=maxsize, timeout=30,
                                   pool_recycle=300)


@asynccontextmanager
async def connection(pool: aiopg.Pool) -> AsyncIterator[aiopg.Connection]:
    """A pooled connection. A pool that cannot hand one out in time raises DatabaseUnavailable;
    a connection that broke (server restarted, network gone) makes the pool drop its idle
    ones too, so the next request connects afresh instead of meeting another stale one."""
    try:
        conn = await pool.acquire()
    except TimeoutError:
        raise PoolTimeout("No database connection within the pool timeout.") from None
    try:
        yield conn
    except (psycopg2.OperationalError, psycopg2.InterfaceError):
        if conn.closed:
            _discard_idle(pool)
        raise
    finally:
        await pool.release(conn)


def _discard_idle(pool: aiopg.Pool) -> None:
    if not pool.closed and not getattr(pool, "_closing", False):
        task = asyncio.get_running_loop().create_task(pool.clear(), name="pool-clear")
        _CLEARING.add(task)
        task.add_done_callback(_CLEARING.discard)


_CLEARING: set[asyncio.Task[None]] = set()


@asynccontextmanager
async def transaction(pool: aiopg.Pool) -> AsyncIterator[Any]:
    """Yield a cursor inside BEGIN … COMMIT; any exception rolls the whole write back."""
    async with connection(pool) as conn, conn.cursor() as cur:
        await cur.execute("BEGIN")
        try:
            yield cur
        except BaseException:
            await cur.execute("ROLLBACK")
            raise
        else:
            await cur.execute("COMMIT")


@asynccontextmanager
async def cursor(pool: aiopg.Pool) -> AsyncIterator[Any]:
    """Yield an autocommit cursor for single statements."""
    async with connection(pool) as conn, conn.cursor() as cur:
        yield cur


async def fetch_all(pool: aiopg.Pool, sql: str, params: Any = None) -> list[dict[str, Any]]:
    """Run a query and return its rows as dicts."""
    async with cursor(pool) as cur:
        await cur.execute(sql, params)
        return rows_as_dicts(cur, await cur.fetchall())


async def fetch_one(pool: aiopg.Pool, sql: str, params: Any = None) -> dict[str, Any] | None:
    async with cursor(pool) as cur:
        await cur.execute(sql, params)
        row = await cur.fetchone()
        return rows_as_dicts(cur, [row])[0] if row is not None else None


async def execute(pool: aiopg.Pool, sql: str, params: Any = None) -> int:
    """Run one statement; return the affected row count."""
    async with cursor(pool) as cur:
        await cur.execute(sql, params)
        return cur.rowcount


def rows_as_dicts(cur: Any, rows: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    names = [d.name for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in rows]
