"""SQL for the memories table: rows, listing, lifecycle, version chains and merge links.

Every function takes a cursor, so callers decide what shares one transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, cast

from pawwake.db.memory_rows import (
    DanglingLink,
    LayerCount,
    MemoryChanges,
    MemoryRow,
    NewMemory,
    SourceMessage,
    TermsRow,
)
from pawwake.db.pool import Cursor, rows_as_dicts

COLUMNS = ("id, content, importance, layer, title, is_active, source_session, merged_from,"
           " superseded_by, event_date, remind_at, reminder_delivered_at, external_id,"
           " created_at, updated_at, archived_at, last_accessed")



# The same expression as the index memories_active_content_key: case and whitespace ignored.
CONTENT_KEY = "md5(lower(regexp_replace({}, '\\s+', '', 'g')))"

# Columns a caller may set on insert; a None created_at means now().
INSERT_FIELDS: tuple[tuple[str, str], ...] = (
    ("content", "%s"),
    ("importance", "%s"),
    ("layer", "%s"),
    ("title", "%s"),
    ("is_active", "%s"),
    ("source_session", "%s"),
    ("event_date", "%s::date"),
    ("remind_at", "%s::timestamptz"),
    ("reminder_delivered_at", "%s::timestamptz"),
    ("external_id", "%s"),
    ("created_at", "COALESCE(%s::timestamptz, now())"),
    ("archived_at", "%s::timestamptz"),
    ("search_terms", "%s::text[]"),
    ("model_keywords", "%s::text[]"),
    ("model_questions", "%s::text[]"),
    ("described_at", "%s::timestamptz"),
)
INSERT_DEFAULTS: dict[str, Any] = {
    "importance": 5, "layer": 1, "title": None, "is_active": True, "source_session": None,
    "event_date": None, "remind_at": None, "reminder_delivered_at": None, "external_id": None,
    "created_at": None, "archived_at": None, "search_terms": [], "model_keywords": [],
    "model_questions": [], "described_at": None,
}
_INSERT_CHUNK = 500

UPDATABLE = frozenset({"content", "importance", "layer", "title", "search_terms",
                       "model_keywords", "model_questions", "described_at"})


async def _all(cur: Cursor) -> list[MemoryRow]:
    return cast(list[MemoryRow], rows_as_dicts(cur, await cur.fetchall()))


async def _one(cur: Cursor) -> MemoryRow | None:
    row = await cur.fetchone()
    return cast(MemoryRow, rows_as_dicts(cur, [row])[0]) if row is not None else None


async def get_memory(cur: Cursor, memory_id: int, *, for_update: bool = False
                     ) -> MemoryRow | None:
    lock = " FOR UPDATE" if for_update else ""
    await cur.execute(f"SELECT {COLUMNS} FROM memories WHERE id = %s{lock}", (memory_id,))
    return await _one(cur)


async def model_cues(cur: Cursor, memory_id: int) -> dict[str, Any]:
    """What the memory model wrote to find one memory by, and when (None: not described)."""
    await cur.execute("SELECT model_keywords, model_questions, described_at FROM memories"
                      " WHERE id = %s", (memory_id,))
    row = await cur.fetchone()
    keywords, questions, described_at = row if row else ([], [], None)
    return {"keywords": list(keywords or []), "questions": list(questions or []),
            "described_at": described_at}


async def lock_memories(cur: Cursor, ids: Sequence[int]) -> list[MemoryRow]:
    """Lock existing rows among ``ids`` (in id order, so two callers cannot deadlock)."""
    await cur.execute(f"SELECT {COLUMNS} FROM memories WHERE id = ANY(%s) ORDER BY id"
                      " FOR UPDATE", (list(ids),))
    return await _all(cur)


async def get_by_external_id(cur: Cursor, external_id: str) -> MemoryRow | None:
    await cur.execute(f"SELECT {COLUMNS} FROM memories WHERE external_id = %s", (external_id,))
    return await _one(cur)


async def insert_memories(cur: Cursor, rows: Sequence[NewMemory]) -> list[MemoryRow]:
    """Insert rows (multi-row VALUES); a row whose external_id exists already is skipped.

    Returns the inserted rows in input order (skipped ones are absent).
    """
    inserted: list[MemoryRow] = []
    names = ", ".join(name for name, _ in INSERT_FIELDS)
    template = "(" + ", ".join(expr for _, expr in INSERT_FIELDS) + ")"
    for start in range(0, len(rows), _INSERT_CHUNK):
        chunk = rows[start:start + _INSERT_CHUNK]
        params: list[Any] = []
        for row in chunk:
            values = {**INSERT_DEFAULTS, **row}
            params.extend(values[name] for name, _ in INSERT_FIELDS)
        await cur.execute(
            f"INSERT INTO memories ({names}) VALUES {', '.join([template] * len(chunk))}"
            " ON CONFLICT (external_id) WHERE external_id IS NOT NULL DO NOTHING"
            f" RETURNING {COLUMNS}", params)
        inserted.extend(await _all(cur))
    return sorted(inserted, key=lambda row: row["id"])  # ids follow the VALUES order


async def list_memories(cur: Cursor, *, active: bool, layer: int | None, limit: int, offset: int
                        ) -> list[MemoryRow]:
    """A page, newest first (served by memories_listing / memories_layer_listing)."""
    where, params = _filters(active, layer)
    await cur.execute(f"SELECT {COLUMNS} FROM memories WHERE {where}"
                      " ORDER BY created_at DESC, id DESC LIMIT %s OFFSET %s",
                      (*params, limit, offset))
    return await _all(cur)


async def count_memories(cur: Cursor, *, active: bool, layer: int | None) -> int:
    where, params = _filters(active, layer)
    await cur.execute(f"SELECT count(*) FROM memories WHERE {where}", params)
    return int((await cur.fetchone())[0])


def _filters(active: bool, layer: int | None) -> tuple[str, tuple[Any, ...]]:
    if layer is None:
        return "is_active = %s", (active,)
    return "layer = %s AND is_active = %s", (layer, active)


async def update_memory(cur: Cursor, memory_id: int, fields: MemoryChanges
                        ) -> MemoryRow | None:
    """Set some of content/importance/layer/title/search_terms on one row."""
    unknown = set(fields) - UPDATABLE
    if unknown:
        raise ValueError(f"not updatable: {sorted(unknown)}")
    assignments = ", ".join(f"{name} = %s" for name in fields)
    await cur.execute(f"UPDATE memories SET {assignments}, updated_at = now() WHERE id = %s"
                      f" RETURNING {COLUMNS}", (*fields.values(), memory_id))
    return await _one(cur)


async def update_many(cur: Cursor, ids: Sequence[int], fields: MemoryChanges) -> list[int]:
    """Set importance/layer/title on ``ids``; only rows whose values change count."""
    unknown = set(fields) - (UPDATABLE - {"content", "search_terms", "model_keywords",
                                          "model_questions", "described_at"})
    if unknown:
        raise ValueError(f"not updatable in bulk: {sorted(unknown)}")
    assignments = ", ".join(f"{name} = %s" for name in fields)
    changed = " OR ".join(f"{name} IS DISTINCT FROM %s" for name in fields)
    await cur.execute(f"UPDATE memories SET {assignments}, updated_at = now()"
                      f" WHERE id = ANY(%s) AND ({changed}) RETURNING id",
                      (*fields.values(), list(ids), *fields.values()))
    return sorted(row[0] for row in await cur.fetchall())


async def delete_embedding(cur: Cursor, memory_id: int) -> None:
    """The stored vector no longer matches the text; the embedding job makes a new one."""
    await cur.execute("DELETE FROM memory_embeddings WHERE memory_id = %s", (memory_id,))


async def archive_memories(cur: Cursor, ids: Sequence[int]) -> list[int]:
    """Archive the active rows among ``ids``; returns the ids that changed."""
    await cur.execute("UPDATE memories SET is_active = false, archived_at = now(),"
                      " updated_at = now() WHERE id = ANY(%s) AND is_active RETURNING id",
                      (list(ids),))
    return sorted(row[0] for row in await cur.fetchall())


async def restore_memories(cur: Cursor, ids: Sequence[int]) -> list[int]:
    """Reactivate archived rows among ``ids`` that no newer version replaced."""
    await cur.execute("UPDATE memories SET is_active = true, archived_at = NULL,"
                      " updated_at = now() WHERE id = ANY(%s) AND NOT is_active"
                      " AND superseded_by IS NULL RETURNING id", (list(ids),))
    return sorted(row[0] for row in await cur.fetchall())


async def reinstate_replaced(cur: Cursor, memory_id: int) -> None:
    """Make a replaced row current again: no successor, active."""
    await cur.execute("UPDATE memories SET superseded_by = NULL, is_active = true,"
                      " archived_at = NULL, updated_at = now() WHERE id = %s", (memory_id,))


async def set_layer(cur: Cursor, memory_id: int, layer: int) -> MemoryRow | None:
    await cur.execute(f"UPDATE memories SET layer = %s, updated_at = now() WHERE id = %s"
                      f" RETURNING {COLUMNS}", (layer, memory_id))
    return await _one(cur)


async def delete_memories(cur: Cursor, ids: Sequence[int]) -> list[int]:
    """Remove rows for good (vectors and seen marks cascade)."""
    await cur.execute("DELETE FROM memories WHERE id = ANY(%s) RETURNING id", (list(ids),))
    return sorted(row[0] for row in await cur.fetchall())


async def chain_members(cur: Cursor, ids: Sequence[int]) -> set[int]:
    """Ids among ``ids`` in a version chain: replaced by a newer row, or replacing one."""
    await cur.execute(
        "SELECT id FROM memories WHERE id = ANY(%s) AND superseded_by IS NOT NULL"
        " UNION SELECT superseded_by FROM memories WHERE superseded_by = ANY(%s)",
        (list(ids), list(ids)))
    return {row[0] for row in await cur.fetchall()}


async def merge_sources(cur: Cursor, ids: Sequence[int]) -> set[int]:
    """Ids among ``ids`` listed in some memory's merged_from (needed to revert that merge)."""
    await cur.execute("SELECT DISTINCT source FROM memories, unnest(merged_from) AS source"
                      " WHERE merged_from && %s::bigint[] AND source = ANY(%s)",
                      (list(ids), list(ids)))
    return {row[0] for row in await cur.fetchall()}


async def end_merges_of(cur: Cursor, source_ids: Sequence[int]) -> list[int]:
    """Merged memories listing any of ``source_ids`` stop being merges (they stay as they
    are otherwise): the sources are about to go, so the merge can no longer be reverted."""
    await cur.execute("UPDATE memories SET merged_from = '{}', updated_at = now()"
                      " WHERE merged_from && %s::bigint[] RETURNING id", (list(source_ids),))
    return sorted(row[0] for row in await cur.fetchall())


async def predecessor_of(cur: Cursor, memory_id: int) -> MemoryRow | None:
    """The newest row that ``memory_id`` replaced, if any."""
    await cur.execute(f"SELECT {COLUMNS} FROM memories WHERE superseded_by = %s"
                      " ORDER BY created_at DESC, id DESC LIMIT 1", (memory_id,))
    return await _one(cur)


async def version_chain(cur: Cursor, memory_id: int) -> list[MemoryRow]:
    """Every row linked to ``memory_id`` through superseded_by, oldest first."""
    await cur.execute(
        "WITH RECURSIVE forward(id, superseded_by) AS ("
        "  SELECT id, superseded_by FROM memories WHERE id = %s"
        "  UNION SELECT m.id, m.superseded_by FROM memories m JOIN forward f"
        "    ON m.id = f.superseded_by),"
        " member(id) AS ("
        "  SELECT id FROM forward"
        "  UNION SELECT m.id FROM memories m JOIN member b ON m.superseded_by = b.id)"
        f" SELECT {COLUMNS} FROM memories WHERE id IN (SELECT id FROM member)"
        " ORDER BY created_at, id", (memory_id,))
    return await _all(cur)


async def source_messages(cur: Cursor, memory_id: int) -> list[SourceMessage]:
    """The stored messages a memory was extracted from (deleted ones still listed)."""
    await cur.execute(
        "SELECT c.id, c.session_id, c.role, c.content, c.created_at, c.deleted_at"
        " FROM memories m JOIN conversations c ON c.id = ANY (m.source_message_ids)"
        " WHERE m.id = %s ORDER BY c.created_at, c.id", (memory_id,))
    return cast(list[SourceMessage], rows_as_dicts(cur, await cur.fetchall()))


async def layer_counts(cur: Cursor) -> list[LayerCount]:
    await cur.execute("SELECT layer, count(*) FILTER (WHERE is_active) AS active,"
                      " count(*) FILTER (WHERE NOT is_active) AS archived"
                      " FROM memories GROUP BY layer ORDER BY layer")
    return cast(list[LayerCount], rows_as_dicts(cur, await cur.fetchall()))


async def content_key_matches(cur: Cursor, texts: Sequence[str]) -> list[tuple[str, int | None]]:
    """For each text: its case/space-insensitive key and an active row with the same key."""
    # No ORDER BY inside the subquery: it would make the planner walk the primary key
    # instead of the content-key index (seconds instead of microseconds at 100k rows).
    await cur.execute(
        f"WITH input AS (SELECT i.ord, {CONTENT_KEY.format('i.t')} AS key"
        "   FROM unnest(%s::text[]) WITH ORDINALITY AS i(t, ord))"
        " SELECT input.key, (SELECT m.id FROM memories m WHERE m.is_active"
        f"   AND {CONTENT_KEY.format('m.content')} = input.key LIMIT 1)"
        " FROM input ORDER BY input.ord", (list(texts),))
    return [(row[0], row[1]) for row in await cur.fetchall()]


async def rows_sharing_terms(cur: Cursor, terms: Sequence[str], limit: int
                             ) -> list[TermsRow]:
    """Active rows with at least one of ``terms`` (GIN index), newest first."""
    await cur.execute("SELECT id, content, search_terms FROM memories"
                      " WHERE is_active AND search_terms && %s::text[]"
                      " ORDER BY created_at DESC, id DESC LIMIT %s", (list(terms), limit))
    return cast(list[TermsRow], rows_as_dicts(cur, await cur.fetchall()))


async def archived_fragments_before(cur: Cursor, days: float) -> list[int]:
    """Archived layer-1 rows archived more than ``days`` ago, locked for deletion."""
    await cur.execute("SELECT id FROM memories WHERE NOT is_active AND layer = 1"
                      " AND COALESCE(archived_at, updated_at)"
                      "     < now() - make_interval(secs => %s)"
                      " ORDER BY id FOR UPDATE", (days * 86400.0,))
    return [row[0] for row in await cur.fetchall()]


async def all_memories(cur: Cursor) -> list[MemoryRow]:
    """Every row in creation order (export)."""
    await cur.execute(f"SELECT {COLUMNS} FROM memories ORDER BY created_at, id")
    return await _all(cur)


async def dangling_links(cur: Cursor) -> list[DanglingLink]:
    """Rows whose merged_from or superseded_by names a row that does not exist."""
    await cur.execute(
        "SELECT m.id, ARRAY(SELECT s FROM unnest(m.merged_from) AS s"
        "   WHERE NOT EXISTS (SELECT 1 FROM memories x WHERE x.id = s)) AS missing_sources,"
        " CASE WHEN m.superseded_by IS NOT NULL AND NOT EXISTS"
        "   (SELECT 1 FROM memories y WHERE y.id = m.superseded_by)"
        "   THEN m.superseded_by END AS missing_successor"
        " FROM memories m WHERE (cardinality(m.merged_from) > 0 AND EXISTS ("
        "   SELECT 1 FROM unnest(m.merged_from) AS s"
        "   WHERE NOT EXISTS (SELECT 1 FROM memories x WHERE x.id = s)))"
        " OR (m.superseded_by IS NOT NULL AND NOT EXISTS"
        "   (SELECT 1 FROM memories y WHERE y.id = m.superseded_by))"
        " ORDER BY m.id")
    return cast(list[DanglingLink], rows_as_dicts(cur, await cur.fetchall()))


async def clear_links(cur: Cursor, memory_id: int, missing_sources: Iterable[int],
                      clear_successor: bool) -> None:
    await cur.execute(
        "UPDATE memories SET merged_from = ARRAY(SELECT s FROM unnest(merged_from) AS s"
        "   WHERE s <> ALL(%s::bigint[])),"
        " superseded_by = CASE WHEN %s THEN NULL ELSE superseded_by END, updated_at = now()"
        " WHERE id = %s", (list(missing_sources), clear_successor, memory_id))


async def rows_with_contents(cur: Cursor, contents: Sequence[str]) -> list[MemoryRow]:
    """Rows whose content equals one of ``contents`` exactly (backup import matching)."""
    await cur.execute(f"SELECT {COLUMNS} FROM memories WHERE md5(content) = ANY("
                      " ARRAY(SELECT md5(t) FROM unnest(%s::text[]) AS t)) ORDER BY id",
                      (list(contents),))
    wanted = set(contents)
    return [row for row in await _all(cur) if row["content"] in wanted]


async def rows_with_external_ids(cur: Cursor, external_ids: Sequence[str]) -> list[MemoryRow]:
    await cur.execute(f"SELECT {COLUMNS} FROM memories WHERE external_id = ANY(%s)",
                      (list(external_ids),))
    return await _all(cur)


async def set_links(cur: Cursor, memory_id: int, merged_from: Sequence[int],
                    superseded_by: int | None) -> None:
    await cur.execute("UPDATE memories SET merged_from = %s::bigint[], superseded_by = %s"
                      " WHERE id = %s", (list(merged_from), superseded_by, memory_id))


async def lock_memory_imports(cur: Cursor) -> None:
    """Serialise imports (backup, text, seed) for the rest of the transaction."""
    await cur.execute("SELECT pg_advisory_xact_lock(hashtext('pawwake:memory-import'))")


async def source_database_id(cur: Cursor, candidate: str) -> str:
    """This database's backup identity: stored once, ``candidate`` used only the first time."""
    await cur.execute("INSERT INTO runtime_flags (name, value) VALUES"
                      " ('source_database_id', to_jsonb(%s::text)) ON CONFLICT (name) DO NOTHING",
                      (candidate,))
    await cur.execute("SELECT value FROM runtime_flags WHERE name = 'source_database_id'")
    return str((await cur.fetchone())[0])
