"""The turn bodies the Stop writers send to POST /api/conversations/turn."""

from __future__ import annotations

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


def continuation(session_id: str, turn_id: str, user_text: str, reply: str, occurred_at: str,
                 extra: dict[str, Any]) -> dict[str, Any]:
    """The turn again after another Stop hook made it go on (``stop_hook_active``): same
    ``turn_id``, the final reply, ``replace_reply`` so that Pawwake puts this reply in place of
    the one stored at the first Stop (a turn not stored yet is stored whole). Without the user
    text (no kept prompt) only the reply is sent; it replaces the stored reply all the same."""
    if user_text.strip():
        turn = full_turn(session_id, turn_id, user_text, reply, occurred_at, extra)
    else:
        turn = {"turn_id": turn_id, "session_id": session_id, "occurred_at": occurred_at,
                "messages": [{"role": "assistant", "content": reply}], **extra}
    turn["replace_reply"] = True
    return turn
