"""Where the gateway's text goes in a Messages request, so the client's cached prefix stays
byte-identical: persona and plain-mode memories after the client's own ``system`` blocks
(its cache breakpoints keep their prefix), per-turn context (partition mode) in the current
user turn after its last breakpoint."""

from __future__ import annotations

from typing import Any


def with_system_after(system: Any, text: str) -> Any:
    """``text`` after the client's system prompt: a string stays a string, blocks get one
    more text block at the end; no system prompt becomes ``text``."""
    if isinstance(system, list):
        return [*system, {"type": "text", "text": text}]
    if isinstance(system, str) and system.strip():
        return f"{system}\n\n{text}"
    return text


def with_turn_context(messages: list[Any], text: str) -> list[Any]:
    """``text`` as a text block in the last user message, after its last block with a
    ``cache_control`` breakpoint (at the end when the client marked the last block)."""
    messages = list(messages)
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        block = {"type": "text", "text": text}
        if isinstance(content, list):
            marked = [i for i, part in enumerate(content)
                      if isinstance(part, dict) and "cache_control" in part]
            at = marked[-1] + 1 if marked else len(content)
            # Tool results must open a user message: never put text before them.
            while at < len(content) and isinstance(content[at], dict) \
                    and content[at].get("type") == "tool_result":
                at += 1
            merged = [*content[:at], block, *content[at:]]
        else:
            merged = [{"type": "text", "text": content or ""}, block]
        messages[index] = {**message, "content": merged}
        break
    return messages
