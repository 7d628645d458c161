"""The database as the rest of the app sees it: a pool, its kind and its features."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiopg
from aiohttp import web

from pawwake import keys
from pawwake.db.embedded import start_embedded, stop_embedded
from pawwake.db.migrate import migrate
from pawwake.db.pool import create_pool

log = logging.getLogger(__name__)


@dataclass
class Database:
    """An open pool plus what we learned about the server at start."""

    pool: aiopg.Pool
    kind: str  # "embedded" | "external"
    pgvector: bool
    features: dict[str, Any] = field(default_factory=dict)


async def open_database(settings: Any) -> tuple[Database, Any]:
    """Connect (starting the embedded server when no URL is set) and migrate."""
    server = None
    dsn = settings["DATABASE_URL"]
    kind = "external"
    if not dsn:
        loop = asyncio.get_running_loop()
        server = await loop.run_in_executor(None, start_embedded, settings["PAWWAKE_DATA_DIR"])
        dsn = server.get_uri()
        kind = "embedded"
    try:
        pool = await create_pool(dsn)
        features = await migrate(pool)
    except BaseException:
        if server is not None:
            stop_embedded(server)
        raise
    return Database(pool=pool, kind=kind, pgvector=features["pgvector"], features=features), server


async def database_ctx(app: web.Application) -> AsyncIterator[None]:
    """cleanup_ctx: open the database before the app serves, close it after."""
    settings = app[keys.SETTINGS]
    if not settings["DATABASE_ENABLED"]:
        log.info("DATABASE_ENABLED=false: pure forwarding, no database connection")
        app[keys.DATABASE] = None
        yield
        return
    database, server = await open_database(settings)
    app[keys.DATABASE] = database
    log.info("database ready (%s, %s)", database.kind,
             "pgvector" if database.pgvector else "numpy vectors")
    await app[keys.CONFIG].attach(database.pool)
    try:
        yield
    finally:
        database.pool.close()
        await database.pool.wait_closed()
        if server is not None:
            await asyncio.get_running_loop().run_in_executor(None, stop_embedded, server)
