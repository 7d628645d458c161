"""SQL for partition_state: one row per thread (summary parts, zone start, summary failures).

Every write bumps ``version``: a rotation reads the row, summarises with no connection held,
and saves only if the version is still the one it read (compare-and-set). A request about to
call the summary model first claims the row for ``lease`` seconds (``rotating_until``), so a
concurrent request waits for that result instead of summarising the same rounds again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from pawwake.db.conversations import NOT_INCOMPLETE
from pawwake.db.pool import Cursor, rows_as_dicts
from pawwake.text.messages import StoredMessage
from pawwake.text.storable import storable_json

_LOCK_THREAD = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"


@dataclass
class PartitionState:
    """A thread's rotation state; a thread without a row starts empty."""

    thread_id: str
    summary_parts: list[str] = field(default_factory=list)
    zone_start_message_id: int | None = None
    rotations: int = 0
    last_summary_error: str | None = None
    version: int = 0  # 0: no row yet, or a row never written since it was created
    rotating: bool = False  # another request holds a live rotation lease


async def lock_thread(cur: Cursor, thread_id: str) -> None:
    """Serialise rotations of one thread until the transaction ends (across processes)."""
    await cur.execute(_LOCK_THREAD, ("partition:" + thread_id,))


async def load_state(cur: Cursor, thread_id: str) -> PartitionState:
    await cur.execute(
        "SELECT summary_parts, zone_start_message_id, rotations, last_summary_error,"
        " version, COALESCE(rotating_until > now(), false) AS rotating"
        " FROM partition_state WHERE thread_id = %s", (thread_id,))
    rows = rows_as_dicts(cur, await cur.fetchall())
    if not rows:
        return PartitionState(thread_id=thread_id)
    row = rows[0]
    parts = row["summary_parts"] if isinstance(row["summary_parts"], list) else []
    return PartitionState(thread_id=thread_id, summary_parts=[str(p) for p in parts],
                          zone_start_message_id=row["zone_start_message_id"],
                          rotations=row["rotations"],
                          last_summary_error=row["last_summary_error"],
                          version=row["version"], rotating=row["rotating"])


# Version 0 may mean no row yet: insert, or update a row still at version 0. A later version
# is only ever updated, so a row deleted or renamed meanwhile is not brought back.
_WRITE_NEW = ("INSERT INTO partition_state AS s (thread_id, {columns}, version, updated_at)"
              " VALUES (%(thread)s, {values}, 1, now())"
              " ON CONFLICT (thread_id) DO UPDATE SET {updates}, version = s.version + 1,"
              " updated_at = now() WHERE s.version = 0{claim_free} RETURNING version")
_WRITE_SEEN = ("UPDATE partition_state AS s SET {updates}, version = s.version + 1,"
               " updated_at = now() WHERE s.thread_id = %(thread)s"
               " AND s.version = %(expected)s{claim_free} RETURNING version")
_CLAIM_FREE = " AND (s.rotating_until IS NULL OR s.rotating_until <= now())"


async def _write_if(cur: Cursor, thread_id: str, expected: int, values: dict[str, str],
                    params: dict[str, Any], claim_free: str = "") -> int | None:
    """Write ``values`` (column -> SQL expression) if the row is still at ``expected``;
    the new version, or None when another write came first."""
    updates = ", ".join(f"{column} = {sql}" for column, sql in values.items())
    if expected == 0:
        sql = _WRITE_NEW.format(columns=", ".join(values), values=", ".join(values.values()),
                                updates=updates, claim_free=claim_free)
    else:
        sql = _WRITE_SEEN.format(updates=updates, claim_free=claim_free)
    await cur.execute(sql, {"thread": thread_id, "expected": expected, **params})
    row = await cur.fetchone()
    return int(row[0]) if row is not None else None


async def claim_rotation(cur: Cursor, state: PartitionState, lease_seconds: float) -> int | None:
    """Take the thread's rotation lease if the row is as ``state`` read it and nobody holds
    a live lease; the version to save against, or None."""
    return await _write_if(cur, state.thread_id, state.version,
                           {"rotating_until": "now() + %(lease)s * interval '1 second'"},
                           {"lease": lease_seconds}, _CLAIM_FREE)


async def renew_rotation(cur: Cursor, thread_id: str, version: int, lease_seconds: float) -> None:
    """Extend a lease still held (the version is unchanged: the save still compares to it)."""
    await cur.execute("UPDATE partition_state SET rotating_until = now() + %s * interval"
                      " '1 second' WHERE thread_id = %s AND version = %s",
                      (lease_seconds, thread_id, version))


async def release_rotation(cur: Cursor, thread_id: str, version: int) -> None:
    """Give a lease back unused (the rotation was abandoned)."""
    await _write_if(cur, thread_id, version, {"rotating_until": "NULL"}, {})


async def save_state_if(cur: Cursor, state: PartitionState, expected: int) -> bool:
    """Save ``state`` (and end any lease) if the row is still at version ``expected``."""
    values = {"summary_parts": "%(parts)s::jsonb", "zone_start_message_id": "%(zone)s",
              "rotations": "%(rotations)s", "last_summary_error": "%(error)s",
              "rotating_until": "NULL"}
    params = {"parts": storable_json(state.summary_parts), "zone": state.zone_start_message_id,
              "rotations": state.rotations, "error": state.last_summary_error}
    return await _write_if(cur, state.thread_id, expected, values, params) is not None


# Where the zone start row sits in the thread's order; a vanished start row (never expected:
# rounds start at user rows) means no filter.
_SINCE = (" AND (created_at, id) >= (SELECT COALESCE(max(created_at), '-infinity'),"
          " COALESCE(max(id), 0) FROM conversations WHERE id = %s)")

# The N-th and (N+1)-th newest live user messages from the zone start on: a backward scan of
# conversations_session_live that stops after N + 1 user rows, whatever the thread's size.
_ROUND_BOUNDS = ("SELECT created_at, id FROM conversations"
                 " WHERE session_id = %s AND role = 'user' AND deleted_at IS NULL"
                 f" AND {NOT_INCOMPLETE}{{since}}"
                 " ORDER BY created_at DESC, id DESC OFFSET %s LIMIT 2")


async def thread_messages(cur: Cursor, thread_id: str, since_id: int | None
                          ) -> list[StoredMessage]:
    """The thread's live messages from the zone start on, oldest first."""
    sql = ("SELECT id, role, content, metadata, created_at FROM conversations"
           f" WHERE session_id = %s AND deleted_at IS NULL AND {NOT_INCOMPLETE}")
    params: list[Any] = [thread_id]
    if since_id is not None:
        sql += _SINCE
        params.append(since_id)
    await cur.execute(sql + " ORDER BY created_at, id", params)
    return cast(list[StoredMessage], rows_as_dicts(cur, await cur.fetchall()))


async def recent_thread_messages(cur: Cursor, thread_id: str, since_id: int | None,
                                 max_rounds: int) -> tuple[list[StoredMessage], bool]:
    """(live messages from the zone start on, but only the newest ``max_rounds`` rounds;
    True when older live rounds were left out).

    A thread stored without partition state (or imported) can hold thousands of messages
    past its zone start: reading them all on every request is what this bounds.
    """
    params: list[Any] = [thread_id]
    if since_id is not None:
        params.append(since_id)
    await cur.execute(_ROUND_BOUNDS.format(since=_SINCE if since_id is not None else ""),
                      [*params, max(1, max_rounds) - 1])
    bounds = await cur.fetchall()
    if len(bounds) < 2:
        return await thread_messages(cur, thread_id, since_id), False
    created_at, first_id = bounds[0]
    await cur.execute(
        "SELECT id, role, content, metadata, created_at FROM conversations"
        f" WHERE session_id = %s AND deleted_at IS NULL AND {NOT_INCOMPLETE}"
        " AND (created_at, id) >= (%s, %s)"
        " ORDER BY created_at, id", (thread_id, created_at, first_id))
    return cast(list[StoredMessage], rows_as_dicts(cur, await cur.fetchall())), True
