"""SQL for the token_usage table: what each call to the provider cost."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pawwake.db.pool import Cursor, deferred, fetch_all

USAGE_TYPES = ("chat", "summary", "extract", "consolidate", "embed")

_INSERT = (
    "INSERT INTO token_usage (session_id, model, prompt_tokens, completion_tokens,"
    " total_tokens, cached_tokens, cache_creation_tokens, usage_type, cost)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)")


async def insert_usage(cur: Cursor, *, session_id: str | None, model: str | None,
                       prompt_tokens: int, completion_tokens: int, total_tokens: int,
                       cached_tokens: int | None = None, usage_type: str = "chat",
                       cache_creation_tokens: int | None = None,
                       cost: float | None = None) -> None:
    """Record one call inside the caller's transaction (sent with its next statement);
    ``cost`` only when the provider reported a price."""
    if usage_type not in USAGE_TYPES:
        raise ValueError(f"unknown usage type {usage_type!r}")
    await deferred(cur, _INSERT, (session_id, model, prompt_tokens, completion_tokens,
                                  total_tokens, cached_tokens, cache_creation_tokens,
                                  usage_type, cost))


async def usage_by_local_day(cur: Cursor, since: datetime, tz_hours: float
                             ) -> list[dict[str, Any]]:
    """Sums per local day (UTC shifted by ``tz_hours``), model and usage type since ``since``.

    ``cost`` is the sum of reported prices (NULL when no call in the group had one) and
    ``priced_calls`` how many calls reported a price, so a partial sum can be shown as such.
    """
    return await fetch_all(
        cur,
        "SELECT ((created_at AT TIME ZONE 'UTC') + make_interval(secs => %s))::date AS day,"
        " coalesce(model, '') AS model, usage_type, count(*) AS calls,"
        " sum(prompt_tokens)::bigint AS prompt_tokens,"
        " sum(completion_tokens)::bigint AS completion_tokens,"
        " coalesce(sum(cached_tokens), 0)::bigint AS cached_tokens,"
        " sum(total_tokens)::bigint AS total_tokens,"
        " sum(cost) AS cost, count(cost) AS priced_calls"
        " FROM token_usage WHERE created_at >= %s GROUP BY 1, 2, 3 ORDER BY 1, 2, 3",
        (float(tz_hours) * 3600.0, since))
