"""Keeping the 4.x tables aside before the first change, and the one-call rollback to 4.x.

The 4.x tables are moved (``ALTER TABLE ... SET SCHEMA``, instant, nothing copied, their
indexes and sequences go with them) into the schema ``pawwake4`` and are never written to
again: adoption only reads them. ``pawwake4.adoption`` records where they came from and which
tables of the home schema were not Pawwake's (a fork's or the operator's own), so that
``SELECT pawwake4.roll_back_upgrade();`` can move every table of ours into a new schema of its
own and the 4.x tables back where they were, in one transaction. Pawwake 4.x then starts on
its data exactly as it left it.
"""

from __future__ import annotations

from pawwake.db.legacy.schema import ASIDE, LegacySchema
from pawwake.db.pool import Cursor


class AsideConflict(RuntimeError):
    """``pawwake4`` already holds 4.x tables while the home schema holds 4.x tables too."""


# plpgsql: written here once, stored in the database so that a rollback needs no Pawwake code.
_ROLLBACK_FUNCTION = """
CREATE OR REPLACE FUNCTION {aside}.roll_back_upgrade() RETURNS text
LANGUAGE plpgsql AS $rollback$
DECLARE
    record_row {aside}.adoption%ROWTYPE;
    target text := 'pawwake_rolled_back_' || to_char(clock_timestamp(), 'YYYYMMDD_HH24MISS');
    name text;
BEGIN
    SELECT * INTO record_row FROM {aside}.adoption LIMIT 1;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no Pawwake 4.x adoption is recorded in this database';
    END IF;
    PERFORM pg_advisory_xact_lock({lock});
    EXECUTE format('CREATE SCHEMA %I', target);
    FOR name IN SELECT tablename FROM pg_tables WHERE schemaname = record_row.home
                  AND NOT (tablename = ANY (record_row.foreign_tables)) LOOP
        EXECUTE format('ALTER TABLE %I.%I SET SCHEMA %I', record_row.home, name, target);
    END LOOP;
    FOREACH name IN ARRAY record_row.moved_tables LOOP
        EXECUTE format('ALTER TABLE {aside}.%I SET SCHEMA %I', name, record_row.home);
    END LOOP;
    RETURN format('Pawwake 4.x tables are back in %s; the newer tables are kept in %s',
                  record_row.home, target);
END
$rollback$"""


async def move_aside(cur: Cursor, legacy: LegacySchema, lock_key: int) -> None:
    """Move the 4.x tables into ``pawwake4`` and record how to put them back.

    Runs inside the migration's transaction, before our first table is created: the move,
    the record and our schema commit together or not at all. ``lock_key`` is the migration
    lock, which the rollback takes too.
    """
    await _clear_finished_aside(cur)
    await cur.execute(f"CREATE SCHEMA {ASIDE}")
    moved = legacy.tables
    for table in moved:
        await cur.execute(f'ALTER TABLE "{legacy.schema}".{table} SET SCHEMA {ASIDE}')
    await cur.execute("SELECT coalesce(array_agg(tablename::text), '{}') FROM pg_tables"
                      " WHERE schemaname = %s", (legacy.schema,))
    row = await cur.fetchone()
    foreign = list(row[0]) if row else []
    await cur.execute(
        f"CREATE TABLE {ASIDE}.adoption (home text NOT NULL, version text NOT NULL,"
        " moved_tables text[] NOT NULL, foreign_tables text[] NOT NULL,"
        " moved_at timestamptz NOT NULL DEFAULT now())")
    await cur.execute(f"INSERT INTO {ASIDE}.adoption (home, version, moved_tables,"
                      " foreign_tables) VALUES (%s, %s, %s, %s)",
                      (legacy.schema, legacy.version, moved, foreign))
    await cur.execute(_ROLLBACK_FUNCTION.format(aside=ASIDE, lock=int(lock_key)))


async def _clear_finished_aside(cur: Cursor) -> None:
    """A ``pawwake4`` left by a rollback holds only the record and the function: drop it.
    One that still holds 4.x tables is a conflict nobody should resolve by guessing."""
    await cur.execute("SELECT count(*) FROM pg_tables WHERE schemaname = %s"
                      " AND tablename <> 'adoption'", (ASIDE,))
    row = await cur.fetchone()
    if row and row[0]:
        raise AsideConflict(
            f"Both the schema {ASIDE} and the current schema hold Pawwake 4.x tables; "
            f"move or drop one of them (see the README's upgrade section) and start again.")
    await cur.execute(f"DROP SCHEMA IF EXISTS {ASIDE} CASCADE")


async def roll_back(cur: Cursor) -> str:
    """Call the stored rollback (inside the caller's transaction); its message."""
    await cur.execute(f"SELECT {ASIDE}.roll_back_upgrade()")
    row = await cur.fetchone()
    return str(row[0]) if row else ""
