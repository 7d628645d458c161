"""The dashboard_login_failures table: failed sign-ins per client, shared by every gateway
process, and the one gate that lets unknown clients through one at a time under attack."""

from __future__ import annotations

from collections.abc import Sequence

from pawwake.db.pool import Cursor, fetch_one


async def record_failure(cur: Cursor, client_hashes: Sequence[str], window_seconds: float
                         ) -> None:
    """Count a failure against each key; failures older than the window go on the way."""
    await cur.execute("DELETE FROM dashboard_login_failures"
                      " WHERE failed_at < now() - make_interval(secs => %s)", (window_seconds,))
    await cur.execute("INSERT INTO dashboard_login_failures (client_hash)"
                      " SELECT unnest(%s::text[])", (list(client_hashes),))


async def recent_failure_ages(cur: Cursor, client_hash: str, window_seconds: float,
                              limit: int) -> list[float]:
    """Seconds since each of the newest ``limit`` failures within the window, newest first
    (the database's clock, so every process judges alike)."""
    await cur.execute(
        "SELECT extract(epoch FROM now() - failed_at)::float8 FROM dashboard_login_failures"
        " WHERE client_hash = %s AND failed_at > now() - make_interval(secs => %s)"
        " ORDER BY failed_at DESC LIMIT %s", (client_hash, window_seconds, limit))
    return [float(row[0]) for row in await cur.fetchall()]


async def forget_client(cur: Cursor, client_hash: str) -> None:
    await cur.execute("DELETE FROM dashboard_login_failures WHERE client_hash = %s",
                      (client_hash,))


async def failures_reach(cur: Cursor, window_seconds: float, count: int) -> bool:
    """True when at least ``count`` failures (any client) fall within the window."""
    row = await fetch_one(
        cur, "SELECT count(*) AS n FROM (SELECT 1 FROM dashboard_login_failures"
             " WHERE failed_at > now() - make_interval(secs => %s) LIMIT %s) recent",
        (window_seconds, count))
    return row is not None and int(row["n"]) >= count


async def take_gate(cur: Cursor, interval_seconds: float) -> float:
    """Pass the gate (0) and close it for ``interval_seconds``, or the seconds until it opens."""
    await cur.execute(
        "INSERT INTO dashboard_login_gate (only_row, next_open)"
        " VALUES (true, now() + make_interval(secs => %s))"
        " ON CONFLICT (only_row) DO UPDATE SET next_open = EXCLUDED.next_open"
        " WHERE dashboard_login_gate.next_open <= now() RETURNING 0::float8",
        (interval_seconds,))
    if await cur.fetchone() is not None:
        return 0.0
    row = await fetch_one(cur, "SELECT greatest(0, extract(epoch FROM next_open - now()))::float8"
                               " AS wait FROM dashboard_login_gate")
    return float(row["wait"]) if row is not None else 0.0
