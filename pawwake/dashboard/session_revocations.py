"""Server-side end of dashboard sessions: a logout revokes the cookie in every gateway process.

The session cookie is encrypted and self-contained, so without this a copy taken before a
logout would keep working until it expires. A revoked session id is remembered in this process
and, when there is a database, in ``dashboard_revoked_sessions`` for the other processes and
restarts. If the database cannot be asked, this process's own memory still answers (and says
so in the log): the dashboard stays usable during an outage.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from datetime import UTC, datetime

import aiopg
from aiohttp import web

from pawwake.app_faces import DATABASE
from pawwake.db import dashboard_sessions as db
from pawwake.db.pool import cursor, transaction

log = logging.getLogger(__name__)

DB_TIMEOUT_SECONDS = 3.0  # a dashboard page never waits long on a database that is away
DB_RETRY_SECONDS = 15.0  # after a failure, pages do not wait on the database again this soon
MAX_LOCAL = 10_000


def sid_hash(sid: str) -> str:
    """Only a hash of the session id is stored: the table never holds a usable secret."""
    return hashlib.sha256(b"pawwake-session\x00" + sid.encode("utf-8")).hexdigest()


def database_pool(request: web.Request) -> aiopg.Pool | None:
    database = request.config_dict.get(DATABASE)
    return database.pool if database is not None and database.ready else None


class SessionRevocations:
    """Revoked session ids (hashed) with the time their cookie would have expired anyway."""

    def __init__(self, session_lifetime: int) -> None:
        self.session_lifetime = session_lifetime  # seconds a session cookie holds at most
        self._local: dict[str, float] = {}
        self._db_quiet_until = 0.0  # monotonic time before which the database is not asked

    async def revoke(self, pool: aiopg.Pool | None, sid: str, login_at: object) -> None:
        key = sid_hash(sid)
        started = login_at if isinstance(login_at, int) else int(time.time())
        expires = started + self.session_lifetime
        self._remember(key, expires)
        if pool is None:
            return
        try:
            await asyncio.wait_for(_revoke(pool, key, datetime.fromtimestamp(expires, UTC)),
                                   DB_TIMEOUT_SECONDS)
        except Exception as exc:  # the logout still holds in this process
            log.warning("could not record a dashboard logout in the database (%s); it holds "
                        "in this process only", type(exc).__name__)

    async def is_revoked(self, pool: aiopg.Pool | None, sid: str) -> bool:
        key = sid_hash(sid)
        expires = self._local.get(key)
        if expires is not None and expires > time.time():
            return True
        if pool is None or time.monotonic() < self._db_quiet_until:
            return False
        try:
            revoked = await asyncio.wait_for(_is_revoked(pool, key), DB_TIMEOUT_SECONDS)
        except Exception as exc:
            self._db_quiet_until = time.monotonic() + DB_RETRY_SECONDS
            log.warning("could not check dashboard logouts in the database (%s); only this "
                        "process's logouts count until it answers", type(exc).__name__)
            return False
        if revoked:
            self._remember(key, time.time() + self.session_lifetime)
        return revoked

    def _remember(self, key: str, expires: float) -> None:
        if len(self._local) >= MAX_LOCAL:
            now = time.time()
            for stale in [k for k, until in self._local.items() if until <= now]:
                del self._local[stale]
            while len(self._local) >= MAX_LOCAL:  # the database still holds the older ones
                del self._local[next(iter(self._local))]
        self._local[key] = expires


async def _revoke(pool: aiopg.Pool, key: str, expires_at: datetime) -> None:
    async with transaction(pool) as cur:
        await db.revoke_session(cur, key, expires_at)


async def _is_revoked(pool: aiopg.Pool, key: str) -> bool:
    async with cursor(pool) as cur:
        return await db.is_session_revoked(cur, key)
