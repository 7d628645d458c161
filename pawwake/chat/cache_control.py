"""Prompt-cache markers: only Claude models understand ``cache_control``; others may reject it."""

from __future__ import annotations

from typing import Any


def supports_cache_control(model: str) -> bool:
    name = model.lower()
    return "claude" in name or "anthropic" in name


def strip_cache_control(messages: list[Any]) -> list[Any]:
    """Messages without any ``cache_control``, and single-text-block contents collapsed back
    to plain strings (what every OpenAI-compatible provider accepts). Inputs are not changed."""
    cleaned = []
    for message in messages:
        if not isinstance(message, dict):
            cleaned.append(message)
            continue
        message = {k: v for k, v in message.items() if k != "cache_control"}
        content = message.get("content")
        if isinstance(content, list):
            parts = [{k: v for k, v in part.items() if k != "cache_control"}
                     if isinstance(part, dict) else part for part in content]
            only = parts[0] if len(parts) == 1 else None
            if isinstance(only, dict) and only.get("type") == "text" and set(only) == {
                    "type", "text"}:
                message["content"] = only["text"]
            else:
                message["content"] = parts
        cleaned.append(message)
    return cleaned
