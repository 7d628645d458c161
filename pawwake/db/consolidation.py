"""SQL for consolidation: picking memories by local day, merge links, core candidates and the
draft job's own bookkeeping.

Local dates follow TIMEZONE_HOURS: a row's ``event_date`` when set, else its ``created_at``
shifted by the offset. Every function takes a cursor, so callers decide what
shares one transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from typing import Any, TypedDict, cast

from pawwake.db.memories import COLUMNS
from pawwake.db.memory_rows import MemoryRow
from pawwake.db.pool import Cursor, Row, rows_as_dicts
from pawwake.text.storable import storable_json

# A row's local date; the one parameter is the offset in seconds.
LOCAL_DATE = ("COALESCE(event_date,"
              " ((created_at AT TIME ZONE 'UTC') + make_interval(secs => %s))::date)")

# Rows a consolidation may take: active, and no reminder still waiting to be delivered.
CONSOLIDATABLE = ("is_active AND (remind_at IS NULL OR reminder_delivered_at IS NOT NULL)")


class DatedMemoryRow(MemoryRow):
    """A memory with the local day a consolidation files it under (``LOCAL_DATE``)."""

    local_date: date


class CoreCandidate(MemoryRow):
    """An event that may become core, with its sources counted by layer."""

    source_count: int
    fragment_sources: int
    event_sources: int


class MergeHolder(TypedDict):
    id: int
    merged_from: list[int]
    is_active: bool


async def _all(cur: Cursor) -> list[Row]:
    return rows_as_dicts(cur, await cur.fetchall())


def _offset(tz_hours: float) -> float:
    return float(tz_hours) * 3600.0


async def range_rows(cur: Cursor, date_from: date, date_to: date, tz_hours: float,
                     limit: int) -> list[DatedMemoryRow]:
    """Active fragments and events without a pending reminder whose local date is in range,
    in local-date then creation order, with that ``local_date``."""
    await cur.execute(
        f"SELECT {COLUMNS}, {LOCAL_DATE} AS local_date FROM memories"
        f" WHERE {CONSOLIDATABLE} AND layer IN (1, 2)"
        f"   AND {LOCAL_DATE} BETWEEN %s AND %s"
        " ORDER BY local_date, created_at, id LIMIT %s",
        (_offset(tz_hours), _offset(tz_hours), date_from, date_to, limit))
    return cast(list[DatedMemoryRow], await _all(cur))


async def count_range(cur: Cursor, date_from: date, date_to: date, tz_hours: float) -> int:
    await cur.execute(
        f"SELECT count(*) FROM memories WHERE {CONSOLIDATABLE} AND layer IN (1, 2)"
        f" AND {LOCAL_DATE} BETWEEN %s AND %s", (_offset(tz_hours), date_from, date_to))
    return int((await cur.fetchone())[0])


async def rows_by_ids(cur: Cursor, ids: Sequence[int], tz_hours: float
                      ) -> list[DatedMemoryRow]:
    """The named rows (any state) with their ``local_date``, in local-date order."""
    await cur.execute(
        f"SELECT {COLUMNS}, {LOCAL_DATE} AS local_date FROM memories WHERE id = ANY(%s)"
        " ORDER BY local_date, created_at, id", (_offset(tz_hours), list(ids)))
    return cast(list[DatedMemoryRow], await _all(cur))


async def insert_merged(cur: Cursor, *, content: str, title: str | None, importance: int,
                        layer: int, event_date: date, merged_from: Sequence[int],
                        search_terms: Sequence[str]) -> MemoryRow:
    await cur.execute(
        "INSERT INTO memories (content, title, importance, layer, event_date, merged_from,"
        " search_terms) VALUES (%s, %s, %s, %s, %s, %s::bigint[], %s::text[])"
        f" RETURNING {COLUMNS}",
        (content, title, importance, layer, event_date, list(merged_from), list(search_terms)))
    return cast(MemoryRow, rows_as_dicts(cur, [await cur.fetchone()])[0])


async def merges_holding(cur: Cursor, ids: Sequence[int]) -> list[MergeHolder]:
    """Rows whose ``merged_from`` names any of ``ids`` (GIN index), newest first."""
    await cur.execute("SELECT id, merged_from, is_active FROM memories"
                      " WHERE merged_from && %s::bigint[] ORDER BY id DESC", (list(ids),))
    return cast(list[MergeHolder], await _all(cur))


async def end_merge(cur: Cursor, memory_id: int) -> MemoryRow:
    """After a revert: archive the merged row and forget its sources (no second revert)."""
    await cur.execute(
        "UPDATE memories SET merged_from = '{}',"
        " archived_at = CASE WHEN is_active THEN now() ELSE archived_at END,"
        f" is_active = false, updated_at = now() WHERE id = %s RETURNING {COLUMNS}",
        (memory_id,))
    return cast(MemoryRow, rows_as_dicts(cur, [await cur.fetchone()])[0])


async def core_candidates(cur: Cursor, *, min_sources: int, min_importance: int, limit: int
                          ) -> list[CoreCandidate]:
    """Active events merged from many memories or marked important, best first, with the
    layers of their sources counted (filtering, order and limit all in SQL)."""
    await cur.execute(
        f"SELECT {COLUMNS}, cardinality(m.merged_from) AS source_count,"
        " (SELECT count(*) FROM memories s WHERE s.id = ANY(m.merged_from) AND s.layer = 1)"
        "   AS fragment_sources,"
        " (SELECT count(*) FROM memories s WHERE s.id = ANY(m.merged_from) AND s.layer = 2)"
        "   AS event_sources"
        " FROM memories m WHERE m.is_active AND m.layer = 2"
        "   AND (cardinality(m.merged_from) >= %s OR m.importance >= %s)"
        " ORDER BY m.importance DESC, cardinality(m.merged_from) DESC, m.created_at DESC,"
        "   m.id DESC LIMIT %s", (min_sources, min_importance, limit))
    return cast(list[CoreCandidate], await _all(cur))


# --- the draft job's bookkeeping (rows of the shared jobs table, this job kind only) ------

async def finished_draft(cur: Cursor, kind: str, job_id: int, draft_id: str
                         ) -> dict[str, Any] | None:
    """One draft out of a finished job's result, picked in SQL (not the whole result)."""
    await cur.execute(
        "SELECT draft FROM jobs, jsonb_array_elements(result->'drafts') AS draft"
        " WHERE id = %s AND kind = %s AND status = 'done'"
        "   AND jsonb_typeof(result->'drafts') = 'array' AND draft->>'draft_id' = %s",
        (job_id, kind, draft_id))
    row = await cur.fetchone()
    return row[0] if row else None


async def job_state(cur: Cursor, job_id: int) -> tuple[str, int] | None:
    """(status, attempts) of a job: a run checks it to notice a cancel or a takeover."""
    await cur.execute("SELECT status, attempts FROM jobs WHERE id = %s", (job_id,))
    row = await cur.fetchone()
    return (row[0], row[1]) if row else None


async def fail_job(cur: Cursor, job_id: int, attempt: int, error: dict[str, Any]) -> bool:
    """End a run for good with ``error`` (no retry: retrying would fail the same way).

    Fenced by attempt like the runner's own finish; the runner's later finish is a no-op.
    """
    await cur.execute(
        "UPDATE jobs SET status = 'failed', result = %s::jsonb, last_error = %s,"
        " claimed_until = NULL, updated_at = now()"
        " WHERE id = %s AND attempts = %s AND status = 'running'",
        (storable_json({"error": error}), error["message"][:2000], job_id, attempt))
    return cur.rowcount == 1


async def cancel_unfinished(cur: Cursor, kind: str, error: dict[str, Any]) -> list[int]:
    """Mark every pending or running job of ``kind`` failed; a running one stops at its next
    check and its finish is fenced out."""
    await cur.execute(
        "UPDATE jobs SET status = 'failed', result = %s::jsonb, last_error = %s,"
        " claimed_until = NULL, updated_at = now()"
        " WHERE kind = %s AND status IN ('pending', 'running') RETURNING id",
        (storable_json({"error": error}), error["message"], kind))
    return sorted(row[0] for row in await cur.fetchall())
