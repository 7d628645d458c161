"""Prompt-cache markers: only Claude models understand ``cache_control``; others may reject it."""

from __future__ import annotations

from typing import Any

BLOCK_SEPARATOR = "\n\n"


def supports_cache_control(model: str) -> bool:
    name = model.lower()
    return "claude" in name or "anthropic" in name


def strip_cache_control(messages: list[Any]) -> list[Any]:
    """Messages without any ``cache_control``, in the plain form every OpenAI-compatible
    provider accepts. Inputs are not changed.

    A single text block becomes a plain string. Several text blocks that carried a marker
    (persona and summary parts, split only so each could hold a breakpoint) are joined into
    one string; other lists (images, unmarked client parts) keep their parts.
    """
    cleaned = []
    for message in messages:
        if not isinstance(message, dict):
            cleaned.append(message)
            continue
        message = {k: v for k, v in message.items() if k != "cache_control"}
        content = message.get("content")
        if isinstance(content, list):
            message["content"] = _plain_content(content)
        cleaned.append(message)
    return cleaned


def _plain_content(content: list[Any]) -> Any:
    marked = any(isinstance(part, dict) and "cache_control" in part for part in content)
    parts = [{k: v for k, v in part.items() if k != "cache_control"}
             if isinstance(part, dict) else part for part in content]
    if parts and all(_is_text_block(part) for part in parts) and (marked or len(parts) == 1):
        return BLOCK_SEPARATOR.join(part["text"] for part in parts)
    return parts


def _is_text_block(part: Any) -> bool:
    return isinstance(part, dict) and set(part) == {"type", "text"} \
        and part["type"] == "text" and isinstance(part["text"], str)
