"""Injecting recalled fragments into a chat turn: the block's text and the seen-TTL marks.

The partition cache calls ``fragments_to_exclude`` before searching (so seen fragments give
way to the next ones), puts ``format_retrieved_conversations`` into the current turn, and calls
``mark_fragments_seen`` only after the reply succeeded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import aiopg

from pawwake.db import fragments as db
from pawwake.db.pool import transaction

SPEAKERS = {"user": "用户", "assistant": "AI"}


def local_stamp(moment: datetime | str, timezone_hours: float) -> str:
    """``YYYY-MM-DD HH:MM`` in the configured local time."""
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    local = moment.astimezone(timezone(timedelta(hours=timezone_hours)))
    return local.strftime("%Y-%m-%d %H:%M")


def format_retrieved_conversations(fragments: Sequence[Mapping[str, Any]],
                                   timezone_hours: float) -> str:
    """The ``<retrieved_conversations>`` block, one line per message, a blank line between
    fragments; empty text when there is nothing to inject."""
    blocks = []
    for fragment in fragments:
        lines = []
        for message in fragment.get("messages") or ():
            speaker = SPEAKERS.get(message.get("role"), "")
            text = " ".join(str(message.get("content") or "").split())
            if not speaker or not text:
                continue
            lines.append(f"[{local_stamp(message['created_at'], timezone_hours)}]"
                         f" {speaker}: {text}")
        if lines:
            blocks.append("\n".join(lines))
    if not blocks:
        return ""
    return "<retrieved_conversations>\n" + "\n\n".join(blocks) + "\n</retrieved_conversations>"


async def fragments_to_exclude(pool: aiopg.Pool, session_id: str, ttl_hours: float
                               ) -> set[str]:
    """Fragment ids injected into ``session_id`` within the TTL (0 = no seen filtering)."""
    if ttl_hours <= 0:
        return set()
    return await db.seen_within(pool, session_id, ttl_hours)


async def mark_fragments_seen(pool: aiopg.Pool, session_id: str,
                              fragment_ids: Sequence[str], ttl_hours: float) -> None:
    """Record injected fragments after a successful reply; each id keeps its own time."""
    if ttl_hours <= 0 or not fragment_ids:
        return
    async with transaction(pool) as cur:
        await db.mark_seen(cur, session_id, list(dict.fromkeys(fragment_ids)))
