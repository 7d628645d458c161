"""SQL of the keyword re-index job: rows in id order, terms written back only where the
content is unchanged (compared by md5, so the text is not sent twice)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, cast

from pawwake.db.pool import Cursor, TextRow, fetch_all

_SOURCES = {
    "memories": ("SELECT id, content, model_keywords || model_questions AS written"
                 " FROM memories WHERE id > %s ORDER BY id LIMIT %s"),
    "conversations": ("SELECT id, content FROM conversations"
                      " WHERE id > %s AND search_terms IS NOT NULL ORDER BY id LIMIT %s"),
}


async def rows_after(cur: Cursor, table: str, after: int, limit: int
                     ) -> list[TextRow]:
    return cast(list[TextRow], await fetch_all(cur, _SOURCES[table], (after, limit)))


async def store_terms(cur: Cursor, table: str,
                      rows: Sequence[tuple[int, str, list[str]]]) -> None:
    """Set ``search_terms`` of each (id, content it was cut from, terms) in one statement."""
    if not rows or table not in _SOURCES:
        return
    values = ", ".join(["(%s::bigint, %s, %s::text[])"] * len(rows))
    params: list[Any] = []
    for row_id, content, terms in rows:
        params += [row_id, hashlib.md5(content.encode("utf-8")).hexdigest(), list(terms)]
    await cur.execute(
        f"UPDATE {table} t SET search_terms = v.terms FROM (VALUES {values})"
        " AS v(id, digest, terms) WHERE t.id = v.id AND md5(t.content) = v.digest", params)
