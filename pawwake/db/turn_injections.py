"""The injected record of stored replies: written in the turn's transaction, read by the
conversation view (per reply) and the memory page (how often and when a memory was used)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Literal, NotRequired, TypedDict, TypeGuard, cast

from pawwake.db.pool import Cursor, deferred

if TYPE_CHECKING:
    from pawwake.db.conversations import NewMessage

MEMORY_KINDS = ("memory", "reminder", "near_miss")  # entries that name a memory by id


class _Entry(TypedDict):
    # What the entry shows: dropped when the record is stored; an entry naming a memory is
    # read back with the memory's current text (None once it was deleted).
    text: NotRequired[str | None]


class PersonaEntry(_Entry):
    kind: Literal["persona"]
    source: Literal["setting", "file"]


class PartitionBreakpoint(TypedDict):
    message: int  # index in the upstream messages
    role: str | None


class PartitionEntry(_Entry):
    """The partition layout of one request (``partition/step.py``)."""

    kind: Literal["partition"]
    thread: str
    summary_parts: int
    zone_a_rounds: int
    zone_b_rounds: int
    messages: int
    breakpoints: list[PartitionBreakpoint]


class MemorySearchEntry(_Entry):
    """How the turn's memory search ran (``memory/near_misses.py``)."""

    kind: Literal["memory_search"]
    mode: str  # "hybrid" | "keyword"
    floor: float
    fallback: str | None  # why it ran on keywords only


class MemoryEntry(_Entry):
    kind: Literal["memory"]
    id: int
    score: float
    relevance: float


class NearMissEntry(_Entry):
    """A memory the search found and left out, and why (``memory/near_misses.py``)."""

    kind: Literal["near_miss"]
    id: int
    reason: str  # below_floor | seen | over_limit
    relevance: float
    floor: float


class ReminderEntry(_Entry):
    kind: Literal["reminder"]
    id: int
    remind_at: str  # ISO 8601


class FragmentEntry(_Entry):
    """A past conversation fragment recall injected (``recall/inject.py``)."""

    kind: Literal["fragment"]
    id: str
    session_id: str
    score: float


# One entry of a turn's injected record: what the gateway added, and what it left out.
InjectedEntry = (PersonaEntry | PartitionEntry | MemorySearchEntry | MemoryEntry
                 | NearMissEntry | ReminderEntry | FragmentEntry)


class MemoryUse(TypedDict):
    message_id: int
    session_id: str
    created_at: datetime
    score: float | None
    relevance: float | None


class MemoryUsage(TypedDict):
    count: int
    last_at: datetime | None
    turns: list[MemoryUse]


class MemoryMiss(TypedDict):
    message_id: int
    session_id: str
    created_at: datetime
    reason: str | None
    relevance: float | None
    floor: float | None


class MemoryMisses(TypedDict):
    count: int
    window: int
    turns: list[MemoryMiss]


def names_memory(entry: InjectedEntry) -> TypeGuard[MemoryEntry | NearMissEntry | ReminderEntry]:
    return entry["kind"] in MEMORY_KINDS


def without_text(entry: InjectedEntry) -> InjectedEntry:
    """The entry as it is kept: without the text it showed."""
    return cast(InjectedEntry, {key: value for key, value in entry.items() if key != "text"})


def memory_ids_of(record: Sequence[InjectedEntry]) -> list[int]:
    """Memories (reminders included) a record injected, in order, without repeats."""
    ids = [int(entry["id"]) for entry in record
           if entry["kind"] == "memory" or entry["kind"] == "reminder"]
    return list(dict.fromkeys(ids))


async def insert_injection(cur: Cursor, message_id: int, record: Sequence[InjectedEntry]
                           ) -> None:
    await deferred(
        cur, "INSERT INTO turn_injections (message_id, memory_ids, record)"
        " VALUES (%s, %s, %s::jsonb) ON CONFLICT (message_id) DO UPDATE"
        " SET memory_ids = EXCLUDED.memory_ids, record = EXCLUDED.record",
        (message_id, memory_ids_of(record), json.dumps(list(record), ensure_ascii=False)))


async def record_injection(cur: Cursor, injected: Sequence[InjectedEntry], ids: Sequence[int],
                           inserted: Sequence[NewMessage]) -> None:
    """Keep the injected record (texts left out) with the reply the turn just stored."""
    replies = [message_id for message_id, message in zip(ids, inserted, strict=True)
               if message.role == "assistant"]
    record = [without_text(entry) for entry in injected]
    if replies and record:
        await insert_injection(cur, replies[-1], record)


async def injections_of(cur: Cursor, message_ids: Sequence[int]
                        ) -> dict[int, list[InjectedEntry]]:
    """Reply message id -> its injected record, for the given messages; entries naming a
    memory (injected or left out) carry its current text (``None`` once it was deleted)."""
    if not message_ids:
        return {}
    await cur.execute("SELECT message_id, record FROM turn_injections"
                      " WHERE message_id = ANY (%s)", (list(message_ids),))
    found: dict[int, list[InjectedEntry]] = {int(row[0]): row[1]
                                             for row in await cur.fetchall()}
    ids = sorted({int(entry["id"]) for record in found.values() for entry in record
                  if names_memory(entry)})
    texts: dict[int, str] = {}
    if ids:
        await cur.execute("SELECT id, content FROM memories WHERE id = ANY (%s)", (ids,))
        texts = {int(row[0]): row[1] for row in await cur.fetchall()}
    for record in found.values():
        for entry in record:
            if names_memory(entry):
                entry["text"] = texts.get(int(entry["id"]))
    return found


async def memory_usage(cur: Cursor, memory_id: int, *, limit: int = 20) -> MemoryUsage:
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
    turns: list[MemoryUse] = []
    for message_id, session_id, created_at, record in rows:
        used = next((e for e in cast(list[InjectedEntry], record)
                     if e["kind"] == "memory" and e["id"] == memory_id), None)
        turns.append({"message_id": int(message_id), "session_id": session_id,
                      "created_at": created_at, "score": used["score"] if used else None,
                      "relevance": used["relevance"] if used else None})
    return {"count": int(count), "last_at": last, "turns": turns}


async def memory_near_misses(cur: Cursor, memory_id: int, *, window: int = 2000,
                             limit: int = 10) -> MemoryMisses:
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
    turns: list[MemoryMiss] = [
        {"message_id": int(message_id), "session_id": session_id, "created_at": created_at,
         "reason": entry.get("reason"), "relevance": entry.get("relevance"),
         "floor": entry.get("floor")}
        for message_id, session_id, created_at, entry, _total in rows]
    return {"count": int(rows[0][4]) if rows else 0, "window": window, "turns": turns}
