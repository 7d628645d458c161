"""Ordered SQL migrations, applied once each at start under an advisory lock."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import psycopg2

from pawwake.db.legacy import aside, progress
from pawwake.db.legacy.schema import ASIDE, find_legacy
from pawwake.db.pool import Cursor

log = logging.getLogger(__name__)

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
LOCK_KEY = 0x5041_5757  # "PAWW": one lock id for every Pawwake process on this database


_CREATES = re.compile(r"^CREATE TABLE (\w+)", re.MULTILINE)


class TableInTheWay(RuntimeError):
    """The database holds a table that is not ours under a name a migration needs."""


def migration_files() -> list[Path]:
    return sorted(MIGRATIONS_DIR.glob("[0-9][0-9][0-9][0-9]_*.sql"))


async def migrate(cur: Cursor) -> dict[str, bool]:
    """Enable pgvector when possible, apply pending migrations; return database features.

    ``cur`` must be inside a transaction (``transaction(pool)``): everything runs in it under a
    transaction-scoped advisory lock, so two processes starting together serialise on it,
    each file runs exactly once, and the lock cannot be left held behind a transaction-mode
    pooler (a session lock and its unlock may reach different server connections there).

    A Pawwake 4.x database is recognised first: its tables are moved aside into the schema
    ``pawwake4`` (kept for a rollback) before ours are made, and the adoption is recorded,
    to be finished by ``pawwake.upgrade.adopt`` (feature ``legacy``: one is recorded
    unfinished).
    """
    await cur.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
    pgvector = await _enable_pgvector(cur)
    legacy = await find_legacy(cur)
    if legacy is not None:
        log.warning("a Pawwake %s database: its tables %s are kept in the schema %s and "
                    "adopted into this version", legacy.version, ", ".join(legacy.tables),
                    ASIDE)
        await aside.move_aside(cur, legacy, LOCK_KEY)
    await cur.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())")
    await cur.execute("SELECT name FROM schema_migrations")
    applied = {row[0] for row in await cur.fetchall()}
    pending = [path for path in migration_files() if path.name not in applied]
    if pending:  # one line at INFO; the files themselves at DEBUG
        log.info("applying %d database migration(s): %s .. %s", len(pending),
                 pending[0].name, pending[-1].name)
    await _check_room(cur, pending)
    for path in pending:
        log.debug("applying migration %s", path.name)
        await cur.execute(path.read_text(encoding="utf-8"))
        await cur.execute("INSERT INTO schema_migrations (name) VALUES (%s)", (path.name,))
    if legacy is not None:
        await progress.begin(cur, legacy.version)
    await cur.execute(
        "INSERT INTO runtime_flags (name, value) VALUES ('pgvector', to_jsonb(%s::boolean))"
        " ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value, updated_at = now()",
        (pgvector,))
    await cur.execute("SELECT EXISTS (SELECT 1 FROM legacy_adoption WHERE finished_at IS NULL)")
    row = await cur.fetchone()
    return {"pgvector": pgvector, "legacy": bool(row and row[0])}


async def _check_room(cur: Cursor, pending: list[Path]) -> None:
    """Refuse, saying why, rather than fail on ``DuplicateTable`` at every start: a table of
    another program (or an unknown version) sits where a migration creates one."""
    names = [name for path in pending for name in _CREATES.findall(path.read_text("utf-8"))]
    if not names:
        return
    await cur.execute("SELECT coalesce(array_agg(n ORDER BY n), '{}') FROM unnest(%s::text[]) n"
                      " WHERE to_regclass(n) IS NOT NULL", (names,))
    row = await cur.fetchone()
    taken = list(row[0]) if row else []
    if taken:
        raise TableInTheWay(
            f"this database already has tables named {', '.join(taken)} that are not "
            "Pawwake's; point DATABASE_URL at a database of its own (an empty one, or the "
            "one Pawwake 4.x used)")


async def _enable_pgvector(cur: Cursor) -> bool:
    await cur.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'")
    if await cur.fetchone():
        return True
    await cur.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
    if not await cur.fetchone():
        log.info("pgvector is not available on this server; vectors use the numpy index")
        return False
    # A savepoint, so a refusal leaves the surrounding migration transaction usable.
    await cur.execute("SAVEPOINT enable_pgvector")
    try:
        await cur.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg2.Error as exc:
        await cur.execute("ROLLBACK TO SAVEPOINT enable_pgvector")
        log.warning("pgvector exists but could not be enabled (%s); using the numpy index",
                    exc.pgcode)
        return False
    return True
