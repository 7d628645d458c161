"""4.x partition threads (``session_cache_state``) into ``partition_state``, and their
seen marks into ``memory_seen`` / ``conversation_fragment_seen``.

4.x kept a thread's summary as text holding a JSON list of parts (or one plain text) and
its zone A start as a round number, ``a_start_round``, counted over the thread's live
messages: a user message opens a round, leading tool results (orphans) were dropped, and
messages before the first user message formed round 0 of their own. Ours keeps the id of the
user message that opens zone A, so the round number is turned into that id here, with the
same counting. A thread whose round cannot be found starts from its whole live history; the
next request's catch-up then takes the newest rounds, as for any thread over its bounds.
"""

from __future__ import annotations

from typing import Any

from pawwake.db.legacy.helpers import counts_of
from pawwake.db.legacy.schema import LegacySchema
from pawwake.db.pool import Cursor, fetch_one

# Summary parts: a JSON list of texts, else the text itself as one part, else none.
_PARTS = (
    "CASE WHEN jsonb_typeof(pg_temp.pawwake_jsonb(s.summary)) = 'array'"
    " THEN (SELECT coalesce(jsonb_agg(CASE WHEN jsonb_typeof(e) = 'string' THEN e"
    "   ELSE to_jsonb(e::text) END), '[]'::jsonb)"
    "   FROM jsonb_array_elements(pg_temp.pawwake_jsonb(s.summary)) e"
    "   WHERE e <> 'null'::jsonb AND e <> '\"\"'::jsonb)"
    " WHEN btrim(coalesce(s.summary, '')) <> '' THEN jsonb_build_array(s.summary)"
    " ELSE '[]'::jsonb END")

# The user message that opens round ``a_start_round`` of the thread (ours, already copied):
# users are numbered in thread order; round k opens at user k+1 when the first kept message
# is a user's, else at user k (round 0 being what came before the first user).
_ZONE_START = (
    "(SELECT u.id FROM (SELECT c.id, c.role,"
    "   count(*) FILTER (WHERE c.role = 'user') OVER w AS users,"
    "   first_value(c.role) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)"
    "     AS first_role"
    "  FROM conversations c WHERE c.session_id = s.session_id AND c.deleted_at IS NULL"
    "   AND c.role IN ('user', 'assistant')"
    "  WINDOW w AS (ORDER BY c.created_at, c.id)) u"
    " WHERE u.role = 'user' AND u.users = s.a_start_round"
    "   + CASE WHEN u.first_role = 'user' THEN 1 ELSE 0 END)")


def _start_round(legacy: LegacySchema) -> str:
    return "greatest(coalesce(s.a_start_round, 0), 0)" \
        if legacy.has("session_cache_state", "a_start_round") else "0"


async def copy_threads(cur: Cursor, legacy: LegacySchema, rounds_per_rotation: int
                       ) -> dict[str, int]:
    """Every 4.x thread with its summary parts and zone start; counts what was done."""
    if not legacy.has("session_cache_state"):
        return {}
    start = _start_round(legacy)
    updated = "coalesce(s.updated_at, now())" \
        if legacy.has("session_cache_state", "updated_at") else "now()"
    await cur.execute(
        "WITH source AS MATERIALIZED (SELECT s.session_id, "
        f"   {start} AS a_start_round, {_PARTS} AS parts, {updated} AS updated_at"
        f"   FROM {legacy.schema}.session_cache_state s WHERE s.session_id IS NOT NULL),"
        " placed AS MATERIALIZED (SELECT s.*, CASE WHEN s.a_start_round > 0"
        f"   THEN {_ZONE_START} END AS zone_start FROM source s),"
        " inserted AS (INSERT INTO partition_state (thread_id, summary_parts,"
        "   zone_start_message_id, rotations, updated_at)"
        "   SELECT session_id, parts, zone_start, a_start_round / %s, updated_at FROM placed"
        "   ON CONFLICT (thread_id) DO NOTHING RETURNING 1)"
        " SELECT (SELECT count(*) FROM inserted),"
        "  (SELECT count(*) FROM placed WHERE jsonb_array_length(parts) > 0),"
        "  (SELECT count(*) FROM placed WHERE a_start_round > 0 AND zone_start IS NULL)",
        (max(1, rounds_per_rotation),))
    row = await cur.fetchone()
    adopted, summarised, lost = (int(v) for v in row) if row else (0, 0, 0)
    return {"adopted": adopted, "with_summary": summarised, "zone_not_found": lost}


async def copy_seen_marks(cur: Cursor, legacy: LegacySchema) -> dict[str, int]:
    """Per-thread seen marks of memories and fragments, each with its own time."""
    counts = {"memories_seen": 0, "fragments_seen": 0}
    if legacy.has("session_cache_state", "seen_memory_times"):
        await cur.execute(
            "INSERT INTO memory_seen (session_id, memory_id, seen_at)"
            " SELECT marks.session_id, marks.memory_id, marks.seen_at FROM ("
            "   SELECT s.session_id, CASE WHEN e.key ~ '^[0-9]{1,18}$' THEN e.key::bigint END"
            "     AS memory_id, pg_temp.pawwake_time(e.value #>> '{}') AS seen_at"
            f"   FROM {legacy.schema}.session_cache_state s,"
            "     jsonb_each(CASE WHEN jsonb_typeof(s.seen_memory_times::jsonb) = 'object'"
            "       THEN s.seen_memory_times::jsonb ELSE '{}'::jsonb END) e) marks"
            " WHERE marks.seen_at IS NOT NULL AND marks.session_id IS NOT NULL"
            "   AND EXISTS (SELECT 1 FROM memories m WHERE m.id = marks.memory_id)"
            " ON CONFLICT DO NOTHING")
        counts["memories_seen"] = cur.rowcount
    fragments = []
    if legacy.has("session_cache_state", "seen_fragment_times"):
        fragments.append(
            "SELECT s.session_id, e.key AS fragment, pg_temp.pawwake_time(e.value #>> '{}')"
            f" AS seen_at FROM {legacy.schema}.session_cache_state s,"
            "   jsonb_each(CASE WHEN jsonb_typeof(s.seen_fragment_times::jsonb) = 'object'"
            "     THEN s.seen_fragment_times::jsonb ELSE '{}'::jsonb END) e")
    if legacy.has("session_cache_state", "seen_fragment_ids"):
        seen_at = "s.updated_at" if legacy.has("session_cache_state", "updated_at") \
            else "now()"
        fragments.append(  # the oldest form: ids only, seen when the row was last written
            f"SELECT s.session_id, f AS fragment, {seen_at} AS seen_at"
            f" FROM {legacy.schema}.session_cache_state s, unnest(s.seen_fragment_ids) f")
    if fragments:
        await cur.execute(
            "INSERT INTO conversation_fragment_seen (session_id, fragment_id, seen_at)"
            f" SELECT session_id, fragment, max(seen_at) FROM ({' UNION ALL '.join(fragments)})"
            " marks WHERE fragment IS NOT NULL AND session_id IS NOT NULL"
            "   AND seen_at IS NOT NULL GROUP BY session_id, fragment"
            " ON CONFLICT DO NOTHING")
        counts["fragments_seen"] = cur.rowcount
    return counts


async def survey(cur: Cursor, legacy: LegacySchema) -> dict[str, Any]:
    """Threads, summaries and rotation progress as 4.x left them."""
    if not legacy.has("session_cache_state"):
        return {}
    row = await fetch_one(cur, (
        f"SELECT count(*) AS threads, count(*) FILTER (WHERE jsonb_array_length({_PARTS}) > 0)"
        f" AS with_summary, count(*) FILTER (WHERE {_start_round(legacy)} > 0) AS rotated"
        f" FROM {legacy.schema}.session_cache_state s"))
    return counts_of(row)
