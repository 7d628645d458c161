"""The injected record of stored replies: written in the turn's transaction, read by the
conversation view (per reply) and the memory page (how often and when a memory was used)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pawwake.db.pool import Cursor


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
    """Reply message id -> its injected record, for the given messages; memory entries carry
    the memory's current text (``None`` once it was deleted)."""
    if not message_ids:
        return {}
    await cur.execute("SELECT message_id, record FROM turn_injections"
                      " WHERE message_id = ANY (%s)", (list(message_ids),))
    found = {int(row[0]): row[1] for row in await cur.fetchall()}
    ids = sorted({i for record in found.values() for i in memory_ids_of(record)})
    texts: dict[int, str] = {}
    if ids:
        await cur.execute("SELECT id, content FROM memories WHERE id = ANY (%s)", (ids,))
        texts = {int(row[0]): row[1] for row in await cur.fetchall()}
    for record in found.values():
        for entry in record:
            if entry.get("kind") in ("memory", "reminder"):
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
        score = next((e.get("score") for e in record
                      if e.get("kind") == "memory" and e.get("id") == memory_id), None)
        turns.append({"message_id": int(message_id), "session_id": session_id,
                      "created_at": created_at, "score": score})
    return {"count": int(count), "last_at": last, "turns": turns}
