"""Diagnosing a provider's refusal: when the upstream answers with a non-200 status, log its
error body (bounded, known secrets masked) and the shape of the request's messages - roles,
content kinds and counts, never the text - so a 400 about a malformed history can be traced
without a copy of the conversation."""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

log = logging.getLogger(__name__)

MAX_BODY_CHARS = 4096
MAX_SHAPES = 40  # per-message shapes listed: the first and last half of this many
SECRET_SETTINGS = ("API_KEY", "EMBEDDING_API_KEY", "GATEWAY_SECRET", "DASHBOARD_PASSWORD",
                   "SESSION_SECRET")
_TOKEN_LIKE = re.compile(r"(?i)\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{8,}|\bBearer\s+[A-Za-z0-9._\-]{8,}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def error_body_text(data: bytes, settings: Mapping[str, Any] | None = None) -> str:
    """The body as one log-safe line: at most MAX_BODY_CHARS, secrets masked."""
    text = data.decode("utf-8", "replace")
    cut = len(text) > MAX_BODY_CHARS
    text = text[:MAX_BODY_CHARS]
    for name in SECRET_SETTINGS:
        secret = str((settings or {}).get(name) or "")
        if len(secret) >= 4:
            text = text.replace(secret, "****")
    text = _TOKEN_LIKE.sub("****", text)
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    return text + (f" …[truncated, {len(data)} bytes in all]" if cut else "")


def _content_kind(content: Any) -> str:
    if content is None:
        return "none"
    if isinstance(content, str):
        return "empty" if not content else "text"
    if isinstance(content, list):
        kinds = [str(p.get("type", "?")) if isinstance(p, dict) else type(p).__name__
                 for p in content]
        return "parts(" + ",".join(kinds) + ")"
    return type(content).__name__


def _shape(message: Any) -> str:
    if not isinstance(message, dict):
        return type(message).__name__
    shape = f"{message.get('role', '?')}:{_content_kind(message.get('content'))}"
    calls = message.get("tool_calls")
    if isinstance(calls, list) and calls:
        shape += f"+tool_calls×{len(calls)}"
    if "tool_call_id" in message:
        shape += "+tool_call_id"
    extra = sorted(set(message) - {"role", "content", "tool_calls", "tool_call_id", "name"})
    if extra:
        shape += "+" + "+".join(extra)
    return shape


def message_summary(body: Mapping[str, Any]) -> str:
    """Counts by role and each message's role and content kind, in order (no text)."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return "messages=absent"
    roles = Counter(str(m.get("role", "?")) if isinstance(m, dict) else "?" for m in messages)
    shapes = [_shape(m) for m in messages]
    if len(shapes) > MAX_SHAPES:
        half = MAX_SHAPES // 2
        shapes = [*shapes[:half], f"…{len(shapes) - MAX_SHAPES} more…", *shapes[-half:]]
    tools = body.get("tools")
    return (f"messages={len(messages)} roles={dict(sorted(roles.items()))}"
            f" tools={len(tools) if isinstance(tools, list) else 0}"
            f" stream={body.get('stream', False)} shape=[{', '.join(shapes)}]")


def log_upstream_error(status: int, data: bytes, body: Mapping[str, Any],
                       settings: Mapping[str, Any] | None = None) -> None:
    """One WARNING line for a non-200 upstream answer; see the module docstring."""
    try:
        summary = message_summary(body)
    except Exception as exc:  # diagnosis must never turn an error reply into a crash
        summary = f"(no summary: {type(exc).__name__})"
    log.warning("upstream answered %d model=%s; error body: %s; request: %s", status,
                body.get("model", "-"), error_body_text(data, settings), summary)
