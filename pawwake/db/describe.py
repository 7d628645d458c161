"""SQL for the describe job: memories the memory model has not described yet, and what it
wrote for them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pawwake.db.pool import Cursor, fetch_all


async def undescribed(cur: Cursor, after: int, limit: int) -> list[dict[str, Any]]:
    """Active memories past id ``after`` that the model has not described, in id order."""
    return await fetch_all(
        cur, "SELECT id, content FROM memories WHERE described_at IS NULL AND is_active"
             " AND id > %s ORDER BY id LIMIT %s", (after, limit))


async def store_descriptions(cur: Cursor,
                             rows: Sequence[tuple[int, str, list[str], list[str], list[str]]]
                             ) -> int:
    """Write ``(id, content, keywords, questions, search_terms)`` per memory and mark it
    described; a row whose content changed meanwhile is left for the next run (its new text
    was not what the model read). Returns the rows written."""
    if not rows:
        return 0
    values = ", ".join(["(%s::bigint, %s::text, %s::text[], %s::text[], %s::text[])"]
                       * len(rows))
    params = [value for row in rows for value in row]
    await cur.execute(
        "UPDATE memories m SET model_keywords = v.keywords, model_questions = v.questions,"
        " search_terms = v.terms, described_at = now()"
        f" FROM (VALUES {values}) AS v(id, content, keywords, questions, terms)"
        " WHERE m.id = v.id AND m.content = v.content", params)
    return int(cur.rowcount)
