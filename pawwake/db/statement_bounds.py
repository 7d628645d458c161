"""How long a database statement may run, by the kind of work that waits for it.

A request's statements answer a person or a client: seconds (``REQUEST_STATEMENT_SECONDS``,
set for every request by ``request_statements.py``). Background work (jobs, start-up warm-ups,
anything outside a request) may take minutes. Migrations run unbounded. The bound is
PostgreSQL's own ``statement_timeout``, sent as ``SET LOCAL`` with each transaction or
autocommit statement: it lasts exactly that long, so behind a transaction-mode pooler
(PgBouncer) nothing leaks to the next user of a server connection, as a plain ``SET`` would.
With it goes ``client_connection_check_interval`` (PostgreSQL 14+): a statement whose client
has gone (a request cancelled when its client hung up closes its connection) stops within a
second, also while it waits for a lock, and also behind PgBouncer, which then closes its
server link.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import psycopg2.errors
import psycopg2.extensions
import psycopg2.sql

from pawwake.db.errors import DatabaseUnavailable

REQUEST_STATEMENT_SECONDS = 15.0
BACKGROUND_STATEMENT_SECONDS = 300.0
NO_BOUND = 0.0
CLIENT_CHECK_MS = 1000
_CLIENT_CHECK_SINCE = 140000  # server_version_num of PostgreSQL 14
# aiopg's own wait for an answer, a little beyond the bound: PostgreSQL's clean refusal comes
# first (aiopg's timeout closes the connection instead). Unbounded work waits up to a day.
_CLIENT_GRACE_SECONDS = 5.0
_UNBOUNDED_CLIENT_SECONDS = 86400.0

_statement_seconds: ContextVar[float] = ContextVar("statement_seconds",
                                                   default=BACKGROUND_STATEMENT_SECONDS)


class StatementTimeout(DatabaseUnavailable):
    """PostgreSQL stopped a statement at its bound (503 ``database_timeout``): the request was
    too slow, the database is still there."""

    def __init__(self) -> None:
        super().__init__(f"The database took longer than {_statement_seconds.get():g} s on "
                         "this request, so it was stopped; try again, or narrow the request "
                         "down.", "database_timeout")


@contextmanager
def statements_bounded(seconds: float) -> Iterator[None]:
    """Statements run inside (by this task, and by tasks it starts meanwhile) may each take
    ``seconds`` (NO_BOUND: as long as they need)."""
    token = _statement_seconds.set(seconds)
    try:
        yield
    finally:
        _statement_seconds.reset(token)


def bounds_sql(server_version: int) -> str:
    """The ``SET LOCAL`` statements of the bounds in force."""
    sql = f"SET LOCAL statement_timeout = {round(_statement_seconds.get() * 1000)}"
    if server_version >= _CLIENT_CHECK_SINCE:
        sql += f"; SET LOCAL client_connection_check_interval = {CLIENT_CHECK_MS}"
    return sql


def client_seconds() -> float:
    """How long aiopg waits for a statement's answer under the bound in force."""
    seconds = _statement_seconds.get()
    return seconds + _CLIENT_GRACE_SECONDS if seconds else _UNBOUNDED_CLIENT_SECONDS


class BoundedStatements(psycopg2.extensions.cursor):
    """The cursor of ``pool.cursor()`` (autocommit): every statement is sent behind its bounds,
    as one query string. PostgreSQL runs such a string as one implicit transaction, so the
    ``SET LOCAL`` covers exactly that statement and costs no extra round trip."""

    def execute(self, query: str | bytes | psycopg2.sql.Composable, vars: Any = None
                ) -> None:
        super().execute(bounds_sql(self.connection.server_version) + "; "
                        + query_text(self, query), vars)


def query_text(cur: psycopg2.extensions.cursor, query: str | bytes | psycopg2.sql.Composable
               ) -> str:
    """A statement as text, for a cursor that sends other statements ahead of it."""
    if isinstance(query, psycopg2.sql.Composable):
        return query.as_string(cur)
    return query.decode("utf-8") if isinstance(query, bytes) else query


@contextmanager
def stopped_statements_raised() -> Iterator[None]:
    """Turn a statement PostgreSQL stopped into ``StatementTimeout``. aiopg raises it as a
    ``CancelledError`` of a task nobody cancelled: told apart from a real cancellation (a
    client that hung up, a shutdown) by the task's pending cancellation requests."""
    try:
        yield
    except psycopg2.errors.QueryCanceled:
        raise StatementTimeout() from None
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling() == 0:
            raise StatementTimeout() from None
        raise


def report_stopped_statements_ourselves(loop: asyncio.AbstractEventLoop) -> None:
    """aiopg also hands each stopped statement to the loop's exception handler, which logs an
    ERROR with a traceback; the refusal is logged once, as a warning, where it is answered."""
    previous = loop.get_exception_handler()
    if getattr(previous, "quiet_on_stopped_statements", False):
        return

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if isinstance(context.get("exception"), psycopg2.errors.QueryCanceled):
            return
        if previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    handler.quiet_on_stopped_statements = True  # type: ignore[attr-defined]
    loop.set_exception_handler(handler)
