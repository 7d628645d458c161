"""SQL for the token_usage table: what each call to the provider cost."""

from __future__ import annotations

from typing import Any

import aiopg

from pawwake.db.pool import cursor

USAGE_TYPES = ("chat", "summary", "extract", "consolidate", "embed")

_INSERT = (
    "INSERT INTO token_usage (session_id, model, prompt_tokens, completion_tokens,"
    " total_tokens, cached_tokens, cache_creation_tokens, usage_type)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)")


async def insert_usage(cur: Any, *, session_id: str | None, model: str | None,
                       prompt_tokens: int, completion_tokens: int, total_tokens: int,
                       cached_tokens: int | None = None, usage_type: str = "chat",
                       cache_creation_tokens: int | None = None) -> None:
    """Record one call inside the caller's transaction."""
    if usage_type not in USAGE_TYPES:
        raise ValueError(f"unknown usage type {usage_type!r}")
    await cur.execute(_INSERT, (session_id, model, prompt_tokens, completion_tokens,
                                total_tokens, cached_tokens, cache_creation_tokens,
                                usage_type))


async def record_usage(pool: aiopg.Pool, **fields: Any) -> None:
    """Record one call on its own (same fields as ``insert_usage``)."""
    async with cursor(pool) as cur:
        await insert_usage(cur, **fields)
