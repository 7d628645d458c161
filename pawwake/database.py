"""The database as the rest of the app sees it: a pool, its kind, its features and its state.

The database may arrive after start-up: an unreachable server does not stop the gateway. It
forwards chat with the file persona meanwhile, ``/api`` answers 503, and a background task
keeps connecting (backoff capped at ``RECONNECT_MAX_SECONDS``); once connected and migrated,
the app switches to full mode by itself. An embedded server that dies later (killed, out of
memory) is restarted within seconds (``_Connector.supervise``); meanwhile the state is
``unavailable`` and finished turns wait in the turn spool. The ``Database`` object (one per app, in the faces)
(``None`` only with DATABASE_ENABLED=false) is therefore a holder whose pool appears later:
ask ``connected_database(database)`` or ``database.ready`` before reading, or wait with
``database.wait_ready()`` in background work.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import aiopg

from pawwake.cancelling import cancel_and_wait
from pawwake.db import prepared
from pawwake.db.embedded import embedded_alive, restart_embedded, start_embedded, stop_embedded
from pawwake.db.errors import DatabaseUnavailable
from pawwake.db.migrate import migrate
from pawwake.db.pool import (
    UNAVAILABLE_ERRORS,
    ConnectionLost,
    create_pool,
    cursor,
    fetch_one,
    server_connection_limit,
    transaction,
)
from pawwake.db.statement_bounds import NO_BOUND, statements_bounded

if TYPE_CHECKING:
    from pawwake.live_settings import RuntimeConfig
    from pawwake.settings import Settings

log = logging.getLogger(__name__)

# Copies in a 4.x database moved aside by ``migrate``, on the new pool (``upgrade/adopt.py``).
Adopt = Callable[[aiopg.Pool, "Settings"], Awaitable[object]]

STARTUP_WAIT_SECONDS = 15.0  # start-up waits at most this long for the first attempt, then serves
RECONNECT_FIRST_SECONDS = 1.0
RECONNECT_MAX_SECONDS = 30.0
PROBE_EVERY_SECONDS = 5.0  # the health state re-checks a connected database at most this often
WATCH_EVERY_SECONDS = 1.0  # how often the embedded server's postmaster is looked at
RESTART_RETRY_FIRST_SECONDS = 0.5  # a restart refused (old backends still exiting) retries
RESTART_RETRY_MAX_SECONDS = 5.0
CONNECT_STOP_SECONDS = 5.0  # a cancelled attempt closes its pool meanwhile: the server waits


class Database:
    """The configured database. ``state`` is ``connecting`` (never reached yet), ``ready``
    or ``unavailable`` (a connection attempt or a query found it unreachable)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind  # "embedded" | "external"
        self.state = "connecting"
        self.pgvector = False
        self.features: dict[str, Any] = {}
        self.last_error: str | None = None  # the exception type of the last failed attempt
        self._pool: aiopg.Pool | None = None
        self._arrived = asyncio.Event()
        self._probed_at = 0.0
        self._probe: asyncio.Task[None] | None = None
        self.connector: _Connector | None = None  # set while the app runs

    @property
    def ready(self) -> bool:
        """Connected and migrated (the server may still go away later)."""
        return self._pool is not None

    @property
    def pool(self) -> aiopg.Pool:
        if self._pool is None:
            raise DatabaseUnavailable("The database is not connected yet; the gateway keeps "
                                      "trying in the background.")
        return self._pool

    def connected(self, pool: aiopg.Pool, features: dict[str, Any]) -> None:
        self._pool = pool
        self.features = features
        self.pgvector = bool(features["pgvector"])
        self.state = "ready"
        self._probed_at = time.monotonic()
        self._arrived.set()

    async def wait_ready(self) -> None:
        """Return once the database is connected (at once when it already is)."""
        await self._arrived.wait()

    async def run_when_ready(self, start: Callable[[], Any]) -> None:
        """Call ``start`` once connected; cancel the awaiting task to give up."""
        await self.wait_ready()
        start()

    def mark_unreachable(self) -> None:
        """A query just failed for want of the server: say so until a probe finds it back."""
        if self.ready:
            self.state = "unavailable"
            self._probed_at = time.monotonic()

    async def server_back(self) -> None:
        """The server was restarted: connections to the old one are dropped, and the state
        follows a fresh check."""
        if self._pool is not None:
            await self._pool.clear()
            await self._check()
            self._probed_at = time.monotonic()

    def current_state(self) -> str:
        """The state for health displays. A stale or "unavailable" one is re-checked in the
        background, so the caller never waits on the database and the next look is fresh."""
        due = self.state == "unavailable" or \
            time.monotonic() - self._probed_at > PROBE_EVERY_SECONDS
        if self.ready and due and (self._probe is None or self._probe.done()):
            self._probed_at = time.monotonic()
            self._probe = asyncio.get_running_loop().create_task(self._check(),
                                                                 name="database-probe")
        return self.state

    async def _check(self) -> None:
        try:
            async with cursor(self.pool) as cur:
                await fetch_one(cur, "SELECT 1 AS ok")
        except UNAVAILABLE_ERRORS:
            self.state = "unavailable"
        else:
            self.state = "ready"

    async def close(self) -> None:
        if self._probe is not None:
            await cancel_and_wait(self._probe)
        if self._pool is not None:
            self._pool.close()
            await self._pool.wait_closed()


def require_database(database: Database | None, code: str = "database_disabled") -> Database:
    """``database``, or ``DatabaseUnavailable`` with ``code`` (answered 503) when it is turned
    off. Its ``pool`` answers 503 ``database_unavailable`` while it is not connected yet."""
    if database is None:
        raise DatabaseUnavailable("The database is turned off (DATABASE_ENABLED=false).", code)
    return database


def connected_database(database: Database | None) -> Database | None:
    """The database if it is here now; ``None`` when it is turned off or not connected yet.
    Reads on the chat path use this and simply skip what needs the database."""
    return database if database is not None and database.ready else None


def database_state(database: Database | None) -> str:
    """``disabled`` | ``connecting`` | ``ready`` | ``unavailable``, for GET / and the status
    page."""
    return "disabled" if database is None else database.current_state()


class _Connector:
    """Connects (starting the embedded server when no URL is set), migrates and attaches the
    runtime config, retrying with backoff until it succeeds or is stopped."""

    def __init__(self, database: Database, settings: Settings, config: RuntimeConfig,
                 adopt: Adopt) -> None:
        self.database = database
        self.settings = settings
        self.config = config
        self.adopt = adopt
        self.server: Any = None
        self.task: asyncio.Task[None] | None = None
        self._starting: asyncio.Future[Any] | None = None  # the embedded server's start
        self.attempted = asyncio.Event()  # set after the first attempt, whatever its outcome

    async def run(self) -> None:
        delay = RECONNECT_FIRST_SECONDS
        while True:
            try:
                await self._connect_once()
                break
            except Exception as exc:  # whatever it was: say so, try again later
                self.database.state = "unavailable"
                self.database.last_error = type(exc).__name__
                if isinstance(exc, UNAVAILABLE_ERRORS):
                    log.warning("database unreachable (%s: %s); retrying in %.0f s",
                                type(exc).__name__, self._describe(exc), delay)
                else:
                    log.error("could not open the database (%s: %s); retrying in %.0f s",
                              type(exc).__name__, self._describe(exc), delay)
            finally:
                self.attempted.set()
            await asyncio.sleep(delay)
            delay = min(RECONNECT_MAX_SECONDS, delay * 2)
        if self.server is not None:
            await self.supervise()

    async def supervise(self) -> None:
        """Watch the embedded server while the app runs and restart it when it dies. The
        pool's connections to the dead server are dropped once it is back; the turn spool
        and the job workers find it again by themselves."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(WATCH_EVERY_SECONDS)
            if embedded_alive(self.server):
                continue
            started = time.monotonic()
            log.error("embedded PostgreSQL (pid %s) died; restarting it",
                      self.server.get_pid())
            self.database.state = "unavailable"
            self.database.last_error = "ServerDied"
            delay = RESTART_RETRY_FIRST_SECONDS
            while True:
                try:
                    pid = await loop.run_in_executor(None, restart_embedded, self.server)
                    break
                except Exception as exc:  # e.g. the old backends still hold shared memory
                    log.warning("embedded PostgreSQL did not start yet (%s); retrying in "
                                "%.1f s", type(exc).__name__, delay)
                    await asyncio.sleep(delay)
                    delay = min(RESTART_RETRY_MAX_SECONDS, delay * 2)
            await self.database.server_back()
            log.warning("embedded PostgreSQL restarted in %.1f s (pid %d); database %s",
                        time.monotonic() - started, pid, self.database.state)

    def _describe(self, exc: BaseException) -> str:
        """The error's first line without the DATABASE_URL's password (libpq may echo parts
        of a malformed URL)."""
        if isinstance(exc, ConnectionLost) and exc.__cause__ is not None:
            exc = exc.__cause__  # what the socket said
        lines = str(exc).strip().splitlines()
        text = lines[0][:300] if lines else ""
        secret = _password_of(self.settings.DATABASE_URL)
        return text.replace(secret, "****") if secret else text

    async def _connect_once(self) -> None:
        settings = self.settings
        dsn = settings.DATABASE_URL
        if not dsn:
            if self.server is None:
                loop = asyncio.get_running_loop()
                self._starting = loop.run_in_executor(None, start_embedded,
                                                      settings.PAWWAKE_DATA_DIR)
                # Shielded: a shutdown meanwhile still learns of the server, to stop it.
                self.server = await asyncio.shield(self._starting)
            dsn = self.server.get_uri()
        direct = not settings.DATABASE_URL or settings.DATABASE_DIRECT
        pool = await create_pool(dsn, maxsize=settings.DATABASE_POOL_SIZE,
                                 on_connect=prepared.allow if direct else None)
        try:
            with statements_bounded(NO_BOUND):  # a migration takes as long as it takes
                async with transaction(pool) as cur:
                    features = await migrate(cur)
                    server_connections = await server_connection_limit(cur)
                if features["legacy"]:  # a 4.x database, moved aside by migrate: copy it in
                    await self.adopt(pool, settings)
            await self.config.attach(pool)
        except BaseException:
            pool.close()
            await pool.wait_closed()
            raise
        self.database.connected(pool, features)
        log.info("database ready (%s, %s; this process opens at most %d of the server's %d"
                 " connections)", self.database.kind,
                 "pgvector" if self.database.pgvector else "numpy vectors",
                 settings.DATABASE_POOL_SIZE, server_connections)

    async def stop(self) -> None:
        """Give up connecting (shutdown): returns promptly whatever the attempt was doing."""
        if self.task is not None and not await cancel_and_wait(self.task, CONNECT_STOP_SECONDS):
            log.warning("the database connection attempt did not stop")
        if self.server is None and self._starting is not None:
            with contextlib.suppress(Exception):
                self.server = await self._starting


def _password_of(dsn: str) -> str:
    if "://" in dsn:
        try:
            return urlsplit(dsn).password or ""
        except ValueError:
            return ""
    match = re.search(r"password\s*=\s*'?([^'\s]+)", dsn)
    return match.group(1) if match else ""


async def stop_connecting(database: Database | None) -> None:
    """At shutdown: the reconnect loop stops before anything else closes."""
    if database is not None and database.connector is not None:
        await database.connector.stop()


@asynccontextmanager
async def open_database(database: Database | None, settings: Settings,
                        config: RuntimeConfig, adopt: Adopt) -> AsyncIterator[None]:
    """Connect before the app serves (waiting a bounded time; after that the connection is
    made in the background), close after. ``adopt`` copies in a 4.x database that
    ``migrate`` moved aside (``upgrade/adopt.py`` ``finish_adoption``)."""
    if database is None:
        log.info("DATABASE_ENABLED=false: pure forwarding, no database connection")
        yield
        return
    connector = _Connector(database, settings, config, adopt)
    database.connector = connector
    config.expect_database()
    connector.task = asyncio.create_task(connector.run(), name="database-connect")
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(connector.attempted.wait(), STARTUP_WAIT_SECONDS)
    if not database.ready:
        log.warning("starting without the database: chat is forwarded with the file persona "
                    "and /api answers 503 until it connects")
    try:
        yield
    finally:
        await connector.stop()
        await config.close()
        await database.close()
        if connector.server is not None:
            await asyncio.get_running_loop().run_in_executor(None, stop_embedded,
                                                             connector.server)
