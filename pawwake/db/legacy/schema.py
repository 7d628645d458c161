"""Recognising a Pawwake 4.x schema: which of its tables and columns a database holds.

Pawwake 4.x created its tables at start with ``CREATE TABLE IF NOT EXISTS`` and grew them with
``ADD COLUMN IF NOT EXISTS``, so a 4.x database holds some subset of the columns its last
version knew. Everything that reads one asks ``LegacySchema.has`` before naming a column.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pawwake.db.pool import Cursor

# The tables of 4.x, in the order they are moved and read. Tables of forks or of the
# operator's own are never touched.
TABLES = ("memories", "conversations", "gateway_config", "session_cache_state", "token_usage")
ASIDE = "pawwake4"  # the schema the 4.x tables are kept in after adoption (rollback: one call)


@dataclass(frozen=True)
class LegacySchema:
    """The 4.x tables found in ``schema`` and each one's columns (name -> type)."""

    schema: str
    columns: dict[str, dict[str, str]] = field(default_factory=dict)

    def has(self, table: str, column: str | None = None) -> bool:
        found = self.columns.get(table)
        return found is not None and (column is None or column in found)

    def type_of(self, table: str, column: str) -> str | None:
        return self.columns.get(table, {}).get(column)

    @property
    def tables(self) -> list[str]:
        return [table for table in TABLES if table in self.columns]

    @property
    def version(self) -> str:
        """``4.1.x`` once memories carry the version chain or reminders (4.1 added both)."""
        if any(self.has("memories", c) for c in ("superseded_by", "remind_at", "external_id")):
            return "4.1.x"
        return "4.0.x"

    def vector_column(self, table: str, *, lenient: bool = False) -> str | None:
        """SQL for the 4.x vector of ``t`` (a row of ``table``) as ``real[]``: the pgvector
        ``embedding`` column first, else the JSON text of ``embedding_json``; None when the
        table has neither. ``lenient`` reads unreadable JSON text as NULL instead of failing
        (slower: see ``helpers.fast_or_lenient``)."""
        options = []
        if self.type_of(table, "embedding") == "vector":
            options.append("t.embedding::real[]")
        elif self.has(table, "embedding"):
            options.append("pg_temp.pawwake_reals(t.embedding::text)")
        if self.has(table, "embedding_json"):
            options.append("pg_temp.pawwake_reals(t.embedding_json)" if lenient else
                           "('{' || btrim(t.embedding_json, E'[] \\t\\n') || '}')::real[]")
        if not options:
            return None
        return options[0] if len(options) == 1 else f"COALESCE({', '.join(options)})"


async def current_schema(cur: Cursor) -> str:
    await cur.execute("SELECT current_schema()")
    row = await cur.fetchone()
    return str(row[0]) if row and row[0] else "public"


async def read_schema(cur: Cursor, schema: str) -> LegacySchema:
    """The 4.x tables present in ``schema`` (maybe none) with their columns."""
    await cur.execute(
        "SELECT table_name, column_name, udt_name FROM information_schema.columns"
        " WHERE table_schema = %s AND table_name = ANY(%s) ORDER BY ordinal_position",
        (schema, list(TABLES)))
    columns: dict[str, dict[str, str]] = {}
    for table, column, kind in await cur.fetchall():
        columns.setdefault(table, {})[column] = kind
    return LegacySchema(schema, columns)


async def find_legacy(cur: Cursor) -> LegacySchema | None:
    """A 4.x schema in the current schema that we have not migrated, or None.

    Ours always has ``schema_migrations``; 4.x never made one. A 4.x database has
    ``memories`` or ``conversations``; its ``gateway_config.value`` is text (ours is jsonb).
    """
    home = await current_schema(cur)
    await cur.execute("SELECT to_regclass(%s) IS NOT NULL",
                      (f'"{home}".schema_migrations',))
    row = await cur.fetchone()
    if row and row[0]:
        return None
    found = await read_schema(cur, home)
    if not (found.has("memories") or found.has("conversations")):
        return None
    return found


async def aside_schema(cur: Cursor) -> LegacySchema | None:
    """The 4.x tables kept aside by an adoption, or None when there are none."""
    found = await read_schema(cur, ASIDE)
    return found if found.tables else None
