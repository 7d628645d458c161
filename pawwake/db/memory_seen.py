"""SQL for the per-session seen marks that keep a memory from being injected twice in a row."""

from __future__ import annotations

from collections.abc import Sequence

from pawwake.db.pool import Cursor


async def recently_seen(cur: Cursor, session_id: str, ttl_hours: float) -> list[int]:
    """Memory ids injected into ``session_id`` within the TTL; each id expires on its own."""
    if ttl_hours <= 0:
        return []
    await cur.execute(
        "SELECT memory_id FROM memory_seen WHERE session_id = %s"
        " AND seen_at > now() - make_interval(secs => %s)", (session_id, ttl_hours * 3600))
    return [row[0] for row in await cur.fetchall()]


async def mark_seen(cur: Cursor, session_id: str, memory_ids: Sequence[int]) -> None:
    if not memory_ids:
        return
    await cur.execute(
        "INSERT INTO memory_seen (session_id, memory_id)"
        " SELECT %s, id FROM memories WHERE id = ANY(%s)"
        " ON CONFLICT (session_id, memory_id) DO UPDATE SET seen_at = now()",
        (session_id, list(memory_ids)))
