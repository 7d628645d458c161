"""Counts for the dashboard's status page."""

from __future__ import annotations

from typing import Any

from pawwake.db.pool import Cursor


async def dashboard_counts(cur: Cursor) -> dict[str, Any]:
    """Messages, sessions and token totals; memories only once their table exists."""
    await cur.execute(
        "SELECT count(*), count(DISTINCT session_id) FROM conversations"
        " WHERE deleted_at IS NULL")
    messages, sessions = await cur.fetchone()
    await cur.execute(
        "SELECT count(*), coalesce(sum(prompt_tokens), 0), coalesce(sum(completion_tokens), 0),"
        " coalesce(sum(total_tokens), 0) FROM token_usage")
    records, prompt, completion, total = await cur.fetchone()
    counts: dict[str, Any] = {
        "messages": messages,
        "sessions": sessions,
        "tokens": {"records": records, "prompt": int(prompt),
                   "completion": int(completion), "total": int(total)},
        "memories": None,
    }
    await cur.execute(
        "SELECT to_regclass('memories') IS NOT NULL, EXISTS (SELECT 1 FROM pg_attribute"
        " WHERE attrelid = to_regclass('memories') AND attname = 'is_active'"
        " AND NOT attisdropped)")
    has_memories, has_active = await cur.fetchone()
    if has_memories:
        await cur.execute(
            "SELECT count(*), count(*) FILTER (WHERE is_active) FROM memories"
            if has_active else "SELECT count(*), NULL FROM memories")
        memories, active = await cur.fetchone()
        counts["memories"] = {"total": memories, "active": active}
    return counts
