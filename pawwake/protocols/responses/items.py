"""Responses ``input`` items as chat messages: what the turn writer stores and recall reads.

Message items keep their content parts (``input_text``/``output_text`` are text, images are
noted by the writer); function calls become an assistant message with ``tool_calls`` and
their outputs tool messages, matched by ``call_id`` as chat tool traffic is. Reasoning items
and other provider-side items are the provider's history, not the conversation's.
"""

from __future__ import annotations

from typing import Any

from pawwake.protocols.responses.capture import tool_call
from pawwake.text.messages import ChatMessage

MESSAGE_ROLES = frozenset({"user", "assistant", "system", "developer"})
_CALLS = frozenset({"function_call", "custom_tool_call"})
_TEXT_PARTS = frozenset({"input_text", "output_text"})
_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output"})


def input_messages(value: Any) -> list[ChatMessage]:
    """The request's ``input`` (a string or a list of items) as chat messages."""
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    messages: list[ChatMessage] = []
    for item in value if isinstance(value, list) else ():
        if not isinstance(item, dict):
            continue
        kind = item.get("type") or ("message" if "role" in item else None)
        if kind == "message" and item.get("role") in MESSAGE_ROLES:
            messages.append({"role": item["role"], "content": _content(item.get("content"))})
        elif kind in _CALLS:
            call = tool_call(item)
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant" and last.get("tool_calls"):
                last["tool_calls"].append(call)  # parallel calls: one assistant message
            else:
                messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        elif kind in _OUTPUTS:
            messages.append({"role": "tool", "tool_call_id": item.get("call_id"),
                             "content": item.get("output")})
    return messages


def _content(content: Any) -> Any:
    """Text parts (``input_text``, ``output_text``) as chat's ``text`` parts, which recall
    reads; other parts (images, files) as sent, for the writer to note."""
    if not isinstance(content, list):
        return content
    return [{"type": "text", "text": part["text"]} if isinstance(part, dict)
            and part.get("type") in _TEXT_PARTS and isinstance(part.get("text"), str) else part
            for part in content]


def with_instructions(instructions: Any, text: str) -> str:
    """The client's own instructions first (its cached prefix stays the same), then ours."""
    if isinstance(instructions, str) and instructions.strip():
        return f"{instructions}\n\n{text}"
    return text
