"""4.x memories into ours: the same ids (so merges, version chains and seen marks keep
pointing at the right rows), layers defaulted to fragments for rows from before layers,
importance kept within 1..10, reminders with their claimed and delivered times.

A row is taken unless its content is blank (ours requires text). Version-chain links
(``superseded_by``) are set by ``link_chains`` once every row is in, since a batch may name
a successor that a later batch brings.
"""

from __future__ import annotations

from typing import Any

from pawwake.db.legacy.helpers import batch_copy, counts_of, run_batch
from pawwake.db.legacy.schema import LegacySchema
from pawwake.db.pool import Cursor, fetch_one

TAKEABLE = "btrim(coalesce(t.content, '')) <> ''"

_TARGET = ("id, content, importance, layer, title, is_active, source_session,"
           " source_message_ids, merged_from, event_date, remind_at, reminder_claimed_at,"
           " reminder_delivered_at, external_id, created_at, updated_at, last_accessed")


def _column(legacy: LegacySchema, name: str, fallback: str = "NULL") -> str:
    return f"t.{name}" if legacy.has("memories", name) else fallback


def _ids(legacy: LegacySchema, name: str) -> str:
    if not legacy.has("memories", name):
        return "'{}'::bigint[]"
    return (f"coalesce(ARRAY(SELECT DISTINCT x FROM unnest(t.{name}) AS x"
            " WHERE x IS NOT NULL ORDER BY x), '{}')::bigint[]")


def layer_sql(legacy: LegacySchema) -> str:
    """Rows from before 4.x had layers (or with a layer we do not know) are fragments."""
    if not legacy.has("memories", "layer"):
        return "1"
    return "CASE WHEN t.layer IN (1, 2, 3) THEN t.layer ELSE 1 END"


def _values(legacy: LegacySchema) -> str:
    external = _column(legacy, "external_id")
    return ", ".join((
        "t.id", "t.content",
        "least(10, greatest(1, coalesce(t.importance, 5)))",
        layer_sql(legacy),
        f"nullif(btrim({_column(legacy, 'title')}), '')",
        f"coalesce({_column(legacy, 'is_active')}, true)",
        "t.source_session",
        _ids(legacy, "source_message_ids"),
        _ids(legacy, "merged_from"),
        _column(legacy, "event_date"),
        _column(legacy, "remind_at"),
        _column(legacy, "reminder_claimed_at"),
        _column(legacy, "reminder_delivered_at"),
        f"nullif({external}, '')" if external != "NULL" else "NULL",  # exact: a retry key
        "coalesce(t.created_at, now())",
        # ours counts the 30-day cleanup from the archive time, which 4.x never kept: the
        # clock starts at adoption, so nothing archived is deleted earlier than it could be
        "now()",
        "t.last_accessed",
    ))


async def copy_batch(cur: Cursor, legacy: LegacySchema, after: int, limit: int
                     ) -> tuple[int | None, int]:
    """Copy the next ``limit`` source rows after id ``after``: (last source id read, rows
    inserted). The last id is None when nothing was left."""
    sql = batch_copy(f"{legacy.schema}.memories", f"memories ({_TARGET})", _values(legacy),
                     where=TAKEABLE)
    return await run_batch(cur, lambda _lenient: sql, {"after": after, "limit": limit})


async def link_chains(cur: Cursor, legacy: LegacySchema) -> dict[str, int]:
    """Set ``superseded_by`` where its successor was taken; count the links left out."""
    if not legacy.has("memories", "superseded_by"):
        return {"linked": 0, "unlinked": 0}
    await cur.execute(
        f"UPDATE memories m SET superseded_by = t.superseded_by"
        f" FROM {legacy.schema}.memories t"
        " WHERE m.id = t.id AND t.superseded_by IS NOT NULL AND t.superseded_by <> t.id"
        "   AND EXISTS (SELECT 1 FROM memories s WHERE s.id = t.superseded_by)")
    linked = cur.rowcount
    row = await fetch_one(
        cur, f"SELECT count(*) AS n FROM {legacy.schema}.memories t"
             f" WHERE t.superseded_by IS NOT NULL AND {TAKEABLE}")
    return {"linked": linked, "unlinked": int(row["n"] if row else 0) - linked}


async def survey(cur: Cursor, legacy: LegacySchema) -> dict[str, Any]:
    """What the source holds and what adoption makes of it (counts, problem rows)."""
    if not legacy.has("memories"):
        return {}
    layer = layer_sql(legacy)
    active = f"coalesce({_column(legacy, 'is_active')}, true)"
    importance = "t.importance" if legacy.has("memories", "importance") else "5"
    merged = ("cardinality(coalesce(t.merged_from, '{}')) > 0"
              if legacy.has("memories", "merged_from") else "false")
    chained = "t.superseded_by IS NOT NULL" if legacy.has("memories", "superseded_by") \
        else "false"
    remind = "t.remind_at IS NOT NULL" if legacy.has("memories", "remind_at") else "false"
    delivered = (f"{remind} AND t.reminder_delivered_at IS NOT NULL"
                 if legacy.has("memories", "reminder_delivered_at") else "false")
    claimed = (f"{remind} AND t.reminder_claimed_at IS NOT NULL"
               f" AND {_column(legacy, 'reminder_delivered_at')} IS NULL"
               if legacy.has("memories", "reminder_claimed_at") else "false")
    no_layer = ("t.layer IS NULL OR t.layer NOT IN (1, 2, 3)"
                if legacy.has("memories", "layer") else "true")
    row = await fetch_one(cur, (
        "SELECT count(*) AS total,"
        f" count(*) FILTER (WHERE {TAKEABLE}) AS adopted,"
        f" count(*) FILTER (WHERE NOT ({TAKEABLE})) AS blank,"
        f" count(*) FILTER (WHERE {TAKEABLE} AND {layer} = 1) AS fragments,"
        f" count(*) FILTER (WHERE {TAKEABLE} AND {layer} = 2) AS events,"
        f" count(*) FILTER (WHERE {TAKEABLE} AND {layer} = 3) AS core,"
        f" count(*) FILTER (WHERE {TAKEABLE} AND NOT {active}) AS archived,"
        f" count(*) FILTER (WHERE {TAKEABLE} AND ({no_layer})) AS layer_defaulted,"
        f" count(*) FILTER (WHERE {TAKEABLE} AND ({importance} IS NULL"
        f"   OR {importance} NOT BETWEEN 1 AND 10)) AS importance_adjusted,"
        f" count(*) FILTER (WHERE {TAKEABLE} AND {merged}) AS merged,"
        f" count(*) FILTER (WHERE {TAKEABLE} AND {chained}) AS superseded,"
        f" count(*) FILTER (WHERE {TAKEABLE} AND {remind}) AS reminders,"
        f" count(*) FILTER (WHERE {TAKEABLE} AND {delivered}) AS reminders_delivered,"
        f" count(*) FILTER (WHERE {TAKEABLE} AND {claimed}) AS reminders_claimed"
        f" FROM {legacy.schema}.memories t"))
    counts = counts_of(row)
    await cur.execute(f"SELECT t.id FROM {legacy.schema}.memories t WHERE NOT ({TAKEABLE})"
                      " ORDER BY t.id LIMIT 50")
    counts["blank_ids"] = [r[0] for r in await cur.fetchall()]
    counts["dangling_merge_sources"] = await _dangling_sources(cur, legacy)
    return counts


async def _dangling_sources(cur: Cursor, legacy: LegacySchema) -> int:
    """merged_from entries naming no row adoption takes (kept; the backup repair clears)."""
    if not legacy.has("memories", "merged_from"):
        return 0
    row = await fetch_one(
        cur, f"SELECT count(*) AS n FROM {legacy.schema}.memories t, unnest(t.merged_from) s"
             f" WHERE {TAKEABLE} AND NOT EXISTS (SELECT 1 FROM {legacy.schema}.memories x"
             "   WHERE x.id = s AND btrim(coalesce(x.content, '')) <> '')")
    return int(row["n"]) if row else 0
