"""The turn bodies the Stop writers send to POST /api/conversations/turn."""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from typing import Any


def rfc3339(at: Any = None) -> str:
    """``at`` (seconds since the epoch) or now, as UTC RFC 3339."""
    try:
        moment = datetime.fromtimestamp(float(at), tz=timezone.utc)  # noqa: UP017 (runs on Python 3.9+)
    except (TypeError, ValueError, OverflowError, OSError):
        moment = datetime.now(tz=timezone.utc)  # noqa: UP017
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def full_turn(session_id: str, turn_id: str, user_text: str, reply: str, occurred_at: str,
              extra: dict[str, Any]) -> dict[str, Any]:
    """The person's prompt and the final reply; ``occurred_at`` keeps a late (spooled) turn
    where it happened in the session."""
    return {"turn_id": turn_id, "session_id": session_id, "occurred_at": occurred_at,
            "messages": [{"role": "user", "content": user_text},
                         {"role": "assistant", "content": reply}], **extra}


def continuation(session_id: str, turn_id: str, reply: str,
                 extra: dict[str, Any]) -> dict[str, Any]:
    """A further reply after another Stop hook made the turn go on: the turn itself is already
    stored under ``turn_id``, so this reply gets its own id, derived from its text so that a
    repeated Stop still stores it once."""
    digest = hashlib.sha256(reply.encode("utf-8", "replace")).hexdigest()[:16]
    return {"turn_id": f"{turn_id}+{digest}", "session_id": session_id,
            "occurred_at": rfc3339(), "messages": [{"role": "assistant", "content": reply}],
            **extra}
