"""Which conversation a request belongs to: its session id."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

SESSION_HEADER = "X-Session-Id"
MAX_SESSION_ID = 200


def clean_session_id(value: Any) -> str | None:
    """A usable session id from a client's value (trimmed, bounded), or None."""
    if isinstance(value, str) and value.strip():
        return value.strip()[:MAX_SESSION_ID]
    return None


def first_user_text(messages: Any) -> str:
    """The text of the conversation's first user message ("" when there is none)."""
    if not isinstance(messages, list):
        return ""
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                texts = [part["text"] for part in content if isinstance(part, dict)
                         and isinstance(part.get("text"), str)]
                if texts:
                    return "\n".join(texts)
            return json.dumps(content, ensure_ascii=False, sort_keys=True)
    return ""


def derived_session_id(messages: Any) -> str:
    """A stable id for clients that send none: the same opening message, the same session,
    across requests and restarts."""
    digest = hashlib.sha256(first_user_text(messages).encode("utf-8")).hexdigest()
    return "auto-" + digest[:16]


def resolve_session_id(headers: Mapping[str, str], body: Mapping[str, Any]) -> str:
    """``X-Session-Id``, else body ``user``, else ``metadata.session_id``, else derived."""
    found = (clean_session_id(headers.get(SESSION_HEADER))
             or clean_session_id(body.get("user")) or metadata_session_id(body))
    if found:
        return found
    return derived_session_id(body.get("messages"))


def metadata_session_id(body: Mapping[str, Any]) -> str | None:
    """The session a client names in ``metadata.session_id``, if any."""
    metadata = body.get("metadata")
    return clean_session_id(metadata.get("session_id")) if isinstance(metadata, dict) else None
