"""Reading a Messages request: validation, the session id, and the OpenAI-shaped view of its
messages that the turn writer and the memory steps read.

The view keeps each message's original content blocks in metadata (``GATEWAY_METADATA``), so
a stored turn can be sent back to an Anthropic-format provider as it was: text, tool use and
results, thinking with its signature. Image data is never stored, only a placeholder.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pawwake.chat.prepared import ChatRejected
from pawwake.chat.request_body import json_object_body
from pawwake.chat.sessions import (
    MAX_SESSION_ID,
    SESSION_HEADER,
    clean_session_id,
    derived_session_id,
    metadata_session_id,
)
from pawwake.text.messages import GATEWAY_METADATA, ChatMessage, ToolCall

PROTOCOL = "messages"
CLAUDE_CODE_SESSION_HEADER = "X-Claude-Code-Session-Id"
_ROLES = frozenset({"user", "assistant"})
_MEDIA = frozenset({"image", "document"})
# Claude Code's metadata.user_id ends in "_session_<uuid>".
_USER_ID_SESSION = re.compile(r"session_([0-9A-Za-z-]{8,})$")


def parse_messages_body(raw: bytes) -> dict[str, Any]:
    """The request body as a dict, or ChatRejected(400) saying what is wrong with it."""
    body = json_object_body(raw)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ChatRejected(400, "invalid_messages",
                           "messages: a non-empty array of messages is required.")
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in _ROLES:
            raise ChatRejected(400, "invalid_messages",
                               f"messages.{index}: an object with role user or assistant "
                               "is required.")
        content = message.get("content")
        if not isinstance(content, (str, list)):
            raise ChatRejected(400, "invalid_messages",
                               f"messages.{index}.content: a string or an array of content "
                               "blocks is required.")
    system = body.get("system")
    if system is not None and not isinstance(system, (str, list)):
        raise ChatRejected(400, "invalid_system",
                           "system: a string or an array of text blocks is required.")
    for key in ("model",):
        if body.get(key) is not None and not isinstance(body[key], str):
            raise ChatRejected(400, f"invalid_{key}", f"{key}: a string is required.")
    if body.get("stream") is not None and not isinstance(body["stream"], bool):
        raise ChatRejected(400, "invalid_stream", "stream: true or false is required.")
    return body


def messages_session_id(headers: Mapping[str, str], body: Mapping[str, Any],
                        view: Sequence[ChatMessage]) -> str:
    """Claude Code's own session header, else ``X-Session-Id``, else ``metadata.session_id``
    or the session named in ``metadata.user_id``, else derived from the first user text."""
    found = (clean_session_id(headers.get(CLAUDE_CODE_SESSION_HEADER))
             or clean_session_id(headers.get(SESSION_HEADER)))
    if found:
        return found
    found = metadata_session_id(body)
    if found:
        return found
    metadata = body.get("metadata")
    if isinstance(metadata, dict):
        found = _user_id_session(metadata.get("user_id"))
        if found:
            return found
    return derived_session_id(view)


def _user_id_session(user_id: Any) -> str | None:
    """The session Claude Code names in ``metadata.user_id``: a JSON object with
    ``session_id`` (current versions) or a string ending in ``_session_<uuid>`` (older)."""
    if not isinstance(user_id, str):
        return None
    user_id = user_id.strip()
    if user_id.startswith("{"):
        try:
            parsed = json.loads(user_id)
        except ValueError:
            return None
        return (clean_session_id(parsed.get("session_id")) if isinstance(parsed, dict)
                else None)
    match = _USER_ID_SESSION.search(user_id)
    return match.group(1)[:MAX_SESSION_ID] if match else None


def stored_block(block: Any) -> Any:
    """A content block as kept in message metadata: images and documents become a
    placeholder naming their type (their data is never stored); the rest is kept whole but
    for ``cache_control`` (a request's breakpoint, not part of the content)."""
    if isinstance(block, dict) and "cache_control" in block:
        block = {k: v for k, v in block.items() if k != "cache_control"}
    if isinstance(block, dict) and block.get("type") in _MEDIA:
        source = block["source"] if isinstance(block.get("source"), dict) else {}
        kept = {"type": block["type"], "omitted": True}
        if isinstance(source.get("media_type"), str):
            kept["media_type"] = source["media_type"]
        return kept
    if isinstance(block, dict) and block.get("type") == "tool_result" \
            and isinstance(block.get("content"), list):
        return {**block, "content": [stored_block(part) for part in block["content"]]}
    return block


def blocks_text(blocks: Any) -> str:
    """The text of a content value (a string, or the text blocks of a list)."""
    if isinstance(blocks, str):
        return blocks
    if not isinstance(blocks, list):
        return ""
    return "\n".join(block["text"] for block in blocks if isinstance(block, dict)
                     and block.get("type") == "text" and isinstance(block.get("text"), str))


def _meta(blocks: Any) -> dict[str, Any]:
    return {"protocol": PROTOCOL, "content_blocks": [stored_block(b) for b in blocks]
            if isinstance(blocks, list) else blocks}


def tool_calls_of(blocks: list[Any]) -> list[ToolCall]:
    """``tool_use`` blocks as OpenAI tool calls (ids kept, so results match them)."""
    calls: list[ToolCall] = []
    for block in blocks:
        if isinstance(block, dict) and block.get("type") == "tool_use":
            calls.append({"id": str(block.get("id") or ""), "type": "function",
                          "function": {"name": str(block.get("name") or ""),
                                       "arguments": json.dumps(block.get("input", {}),
                                                               ensure_ascii=False)}})
    return calls


def thinking_text(blocks: list[Any]) -> str:
    return "".join(block["thinking"] for block in blocks if isinstance(block, dict)
                   and block.get("type") == "thinking" and isinstance(block.get("thinking"), str))


def _user_parts(blocks: list[Any]) -> list[dict[str, Any]]:
    """Non-tool-result blocks as chat parts: text kept, media noted (never copied)."""
    parts: list[dict[str, Any]] = []
    for block in blocks:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append({"type": "text", "text": block["text"]})
        else:
            parts.append({"type": str(block.get("type") or "unknown")})
    return parts


def chat_view(messages: list[dict[str, Any]]) -> list[ChatMessage]:
    """The messages as chat messages: a user message's ``tool_result`` blocks become tool
    messages (before its other blocks, as Anthropic orders them), ``tool_use`` becomes
    ``tool_calls``, thinking becomes ``reasoning_content``."""
    view: list[ChatMessage] = []
    for message in messages:
        content = message["content"]
        if message["role"] == "assistant":
            blocks = content if isinstance(content, list) else [{"type": "text",
                                                                  "text": content}]
            entry: ChatMessage = {"role": "assistant", "content": blocks_text(blocks),
                                     GATEWAY_METADATA: _meta(content)}
            calls = tool_calls_of(blocks)
            if calls:
                entry["tool_calls"] = calls
            thinking = thinking_text(blocks)
            if thinking:
                entry["reasoning_content"] = thinking
            view.append(entry)
            continue
        if isinstance(content, str):
            view.append({"role": "user", "content": content, GATEWAY_METADATA: _meta(content)})
            continue
        results = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
        rest = [b for b in content if not (isinstance(b, dict)
                                           and b.get("type") == "tool_result")]
        for block in results:
            view.append({"role": "tool", "tool_call_id": str(block.get("tool_use_id") or ""),
                         "content": blocks_text(block.get("content")),
                         GATEWAY_METADATA: _meta([block])})
        if rest or not results:
            view.append({"role": "user", "content": _user_parts(rest),
                         GATEWAY_METADATA: _meta(rest)})
    return view
