"""SQL for reminders: claim due ones for one request, renew, deliver or release the claim."""

from __future__ import annotations

from datetime import date, datetime
from typing import TypedDict, cast

from pawwake.db import prepared
from pawwake.db.pool import Cursor, rows_as_dicts


class DueReminder(TypedDict):
    """A reminder claimed for one request."""

    id: int
    content: str
    remind_at: datetime
    event_date: date | None
    created_at: datetime


CLAIM_SECONDS = 300  # a claim not renewed within this long is free for the next request


async def claim_due(cur: Cursor, token: str, limit: int) -> list[DueReminder]:
    """Claim up to ``limit`` due, undelivered reminders for one request (others skip them)."""
    await prepared.execute(  # every chat runs it: planned once per connection where it can be
        cur,
        "UPDATE memories SET reminder_claimed_at = now(), reminder_claim_token = %(token)s"
        " WHERE id IN (SELECT id FROM memories"
        "   WHERE remind_at IS NOT NULL AND reminder_delivered_at IS NULL AND is_active"
        "   AND remind_at <= now()"
        "   AND (reminder_claimed_at IS NULL"
        "        OR reminder_claimed_at < now() - make_interval(secs => %(claim)s))"
        "   ORDER BY remind_at, id LIMIT %(limit)s FOR UPDATE SKIP LOCKED)"
        " RETURNING id, content, remind_at, event_date, created_at",
        {"token": token, "claim": CLAIM_SECONDS, "limit": limit})
    rows = cast(list[DueReminder], rows_as_dicts(cur, await cur.fetchall()))
    return sorted(rows, key=lambda r: (r["remind_at"], r["id"]))


async def renew_claims(cur: Cursor, token: str) -> int:
    await cur.execute(
        "UPDATE memories SET reminder_claimed_at = now() WHERE reminder_claim_token = %s"
        " AND reminder_delivered_at IS NULL", (token,))
    return cur.rowcount


async def mark_delivered(cur: Cursor, token: str) -> int:
    await cur.execute(
        "UPDATE memories SET reminder_delivered_at = now(), reminder_claimed_at = NULL,"
        " reminder_claim_token = NULL WHERE reminder_claim_token = %s"
        " AND reminder_delivered_at IS NULL", (token,))
    return cur.rowcount


async def release_claims(cur: Cursor, token: str) -> int:
    await cur.execute(
        "UPDATE memories SET reminder_claimed_at = NULL, reminder_claim_token = NULL"
        " WHERE reminder_claim_token = %s AND reminder_delivered_at IS NULL", (token,))
    return cur.rowcount
