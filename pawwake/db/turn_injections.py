"""The injected record of stored replies: written in the turn's transaction, read by the
conversation view (per reply) and the memory page (how often and when a memory was used)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pawwake.db.pool import Cursor

MEMORY_KINDS = ("memory", "reminder", "near_miss")  # entries that name a memory by id


def memory_ids_of(record: Sequence[dict[str, Any]]) -> list[int]:
    """Memories (reminders included) a record injected, in order, without repeats."""
    ids = [int(entry["id"]) for entry in record if entry.get("kind") in ("memory", "reminder")]
    return list(dict.fromkeys(ids))


async def insert_injection(cur: Cursor, message_id: int, record: Sequence[dict[str, Any]]
                           ) -> None:
    await cur.execute(
        "INSERT INTO turn_injections (message_id, memory_ids, record)"
        " VALUES (%s, %s, %s::jsonb) ON CONFLICT (message_id) DO UPDATE"
        " SET memory_ids = EXCLUDED.memory_ids, record = EXCLUDED.record",
        (message_id, memory_ids_of(record), json.dumps(list(record), ensure_ascii=False)))


async def record_injection(cur: Cursor, prepared: Any, ids: Sequence[int],
                           inserted: Sequence[Any]) -> None:
    """Keep ``prepared.injected`` (texts left out) with the reply the turn just stored."""
    replies = [message_id for message_id, message in zip(ids, inserted, strict=True)
               if message.role == "assistant"]
    record = [{key: value for key, value in entry.items() if key != "text"}
              for entry in getattr(prepared, "injected", ())]
    if replies and record:
        await insert_injection(cur, replies[-1], record)


async def injections_of(cur: Cursor, message_ids: Sequence[int]
                        ) -> dict[int, list[dict[str, Any]]]:
    """Reply message id -> its injected record, for the given messages; entries naming a
    memory (injected or left out) carry its current text (``None`` once it was deleted)."""
    if not message_ids:
        return {}
    await cur.execute("SELECT message_id, record FROM turn_injections"
                      " WHERE message_id = ANY (%s)", (list(message_ids),))
    found = {int(row[0]): row[1] for row in await cur.fetchall()}
    ids = sorted({int(entry["id"]) for record in found.values() for entry in record
                  if entry.get("kind") in MEMORY_KINDS})
    texts: dict[int, str] = {}
    if ids:
        await cur.execute("SELECT id, content FROM memories WHERE id = ANY (%s)", (ids,))
        texts = {int(row[0]): row[1] for row in await cur.fetchall()}
    for record in found.values():
        for entry in record:
            if entry.get("kind") in MEMORY_KINDS:
                entry["text"] = texts.get(int(entry["id"]))
    return found


async def memory_usage(cur: Cursor, memory_id: int, *, limit: int = 20) -> dict[str, Any]:
    """How often a memory was injected, when last, and the latest replies that carried it."""
    await cur.execute(
        "SELECT count(*), max(created_at) FROM turn_injections"
        " WHERE memory_ids @> ARRAY[%s]::bigint[]", (memory_id,))
    count, last = await cur.fetchone()
    await cur.execute(
        "SELECT t.message_id, c.session_id, t.created_at, t.record"
        " FROM turn_injections t JOIN conversations c ON c.id = t.message_id"
        " WHERE t.memory_ids @> ARRAY[%s]::bigint[]"
        " ORDER BY t.created_at DESC, t.message_id DESC LIMIT %s", (memory_id, limit))
    rows = await cur.fetchall()
    turns = []
    for message_id, session_id, created_at, record in rows:
        entry: dict[str, Any] = next((e for e in record if e.get("kind") == "memory"
                                      and e.get("id") == memory_id), {})
        turns.append({"message_id": int(message_id), "session_id": session_id,
                      "created_at": created_at, "score": entry.get("score"),
                      "relevance": entry.get("relevance")})
    return {"count": int(count), "last_at": last, "turns": turns}


async def memory_near_misses(cur: Cursor, memory_id: int, *, window: int = 2000,
                             limit: int = 10) -> dict[str, Any]:
    """How often a memory was a near miss (a candidate left out, with its reason) among the
    latest ``window`` stored replies, and the latest of those replies. Bounded by the window,
    so the page costs the same however long the history is."""
    await cur.execute(
        "WITH recent AS (SELECT message_id, created_at, record FROM turn_injections"
        "  ORDER BY message_id DESC LIMIT %(window)s),"
        " missed AS (SELECT r.message_id, r.created_at, e.entry FROM recent r,"
        "  jsonb_array_elements(r.record) AS e(entry)"
        "  WHERE e.entry @> jsonb_build_object('kind', 'near_miss', 'id', %(id)s::bigint))"
        " SELECT m.message_id, c.session_id, m.created_at, m.entry, count(*) OVER () AS total"
        " FROM missed m JOIN conversations c ON c.id = m.message_id"
        " ORDER BY m.message_id DESC LIMIT %(limit)s",
        {"window": window, "id": memory_id, "limit": limit})
    rows = await cur.fetchall()
    turns = [{"message_id": int(message_id), "session_id": session_id, "created_at": created_at,
              "reason": entry.get("reason"), "relevance": entry.get("relevance"),
              "floor": entry.get("floor")}
             for message_id, session_id, created_at, entry, _total in rows]
    return {"count": int(rows[0][4]) if rows else 0, "window": window, "turns": turns}
