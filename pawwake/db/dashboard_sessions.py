"""The dashboard_revoked_sessions table: logged-out sessions, shared by every gateway process."""

from __future__ import annotations

from datetime import datetime

from pawwake.db.pool import Cursor, fetch_one


async def revoke_session(cur: Cursor, sid_hash: str, expires_at: datetime) -> None:
    """Record a revoked session; rows whose cookie has expired anyway are cleared on the way."""
    await cur.execute("DELETE FROM dashboard_revoked_sessions WHERE expires_at < now()")
    await cur.execute(
        "INSERT INTO dashboard_revoked_sessions (sid_hash, expires_at) VALUES (%s, %s)"
        " ON CONFLICT (sid_hash) DO NOTHING", (sid_hash, expires_at))


async def is_session_revoked(cur: Cursor, sid_hash: str) -> bool:
    row = await fetch_one(cur, "SELECT 1 AS revoked FROM dashboard_revoked_sessions"
                               " WHERE sid_hash = %s", (sid_hash,))
    return row is not None
