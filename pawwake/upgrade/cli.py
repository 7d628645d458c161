"""``python pawwake.py --check-upgrade`` and ``--rollback-upgrade`` against DATABASE_URL.

The check runs in one read-only transaction that is rolled back: whatever it finds, the
database is left exactly as it was. The rollback calls the function adoption stored in the
database (``pawwake4.roll_back_upgrade()``), which the README also gives as plain SQL.
"""

from __future__ import annotations

import asyncio
from typing import TextIO

import psycopg2

from pawwake.db.legacy import aside, helpers, progress
from pawwake.db.legacy.schema import aside_schema, find_legacy
from pawwake.db.pool import Cursor, connection, create_pool, transaction
from pawwake.db.statement_bounds import NO_BOUND, client_seconds, statements_bounded
from pawwake.settings import Settings
from pawwake.upgrade.survey import make_plan, report_lines, survey

NO_URL = ("Set DATABASE_URL to the Pawwake 4.x database (the same value the 4.x deployment "
          "uses), then run this again.")


def check_upgrade(settings: Settings, out: TextIO) -> int:
    """Print what adoption would do; 0 when a 4.x database was found, else 1."""
    if not settings.DATABASE_URL:
        out.write(NO_URL + "\n")
        return 1
    with statements_bounded(NO_BOUND):  # an operator's command: as long as it takes
        return asyncio.run(_check(settings, out))


def roll_back_upgrade(settings: Settings, out: TextIO) -> int:
    if not settings.DATABASE_URL:
        out.write(NO_URL + "\n")
        return 1
    with statements_bounded(NO_BOUND):
        return asyncio.run(_roll_back(settings, out))


async def _check(settings: Settings, out: TextIO) -> int:
    pool = await create_pool(settings.DATABASE_URL, maxsize=1)
    try:
        # A plain cursor: the transaction is ours to end, with a rollback whatever happens.
        async with connection(pool) as conn, conn.cursor(timeout=client_seconds()) as cur:
            await cur.execute("BEGIN")
            try:
                await helpers.prepare(cur)  # its pg_temp readers go with the rollback
                await cur.execute("SET TRANSACTION READ ONLY")
                legacy = await find_legacy(cur)
                if legacy is None:
                    out.write(await _nothing_to_adopt(cur) + "\n")
                    return 1
                found = await survey(cur, legacy, await make_plan(cur, legacy, settings))
            finally:
                await cur.execute("ROLLBACK")
        out.write("\n".join(report_lines(found)) + "\n")
        out.write("Nothing was changed. Starting this version on the database adopts it; "
                  "the 4.x tables are then kept in the schema pawwake4.\n")
        return 0
    finally:
        pool.close()
        await pool.wait_closed()


async def _nothing_to_adopt(cur: Cursor) -> str:
    if await aside_schema(cur) is not None:
        recorded = await progress.load(cur)
        if recorded is not None:
            state = "finished" if recorded.finished_at else "not finished yet"
            return (f"This database was adopted from Pawwake {recorded.version} "
                    f"({state}); the 4.x tables are kept in the schema pawwake4.")
    return "No Pawwake 4.x tables were found in this database: there is nothing to adopt."


async def _roll_back(settings: Settings, out: TextIO) -> int:
    pool = await create_pool(settings.DATABASE_URL, maxsize=1)
    try:
        async with transaction(pool) as cur:
            message = await aside.roll_back(cur)
    except psycopg2.Error as exc:
        out.write(f"Rollback refused: {str(exc).strip().splitlines()[0]}\n")
        return 1
    finally:
        pool.close()
        await pool.wait_closed()
    out.write(message + "\nStart Pawwake 4.1.3 on this database again.\n")
    return 0
