"""Partition cache layout (pure): the exact upstream messages built from stored history.

Order: persona (BP1), summary parts (BP2 on the last part), zone A of X rounds (BP3), zone B
(BP4), then the current turn, which sits after every breakpoint so per-turn context (time note,
memories, fragments) never invalidates the cached prefix. Stored rows are replayed with what
the provider needs (tool calls, tool_call_id, reasoning_content, provider extras).

Providers hash the rendered bytes, so every message before the current turn has one form
whatever its position: text as a content-block list, whose bytes with a breakpoint differ only
by the ``cache_control`` key appended to the marked block. Non-Claude models get the lists
collapsed back to strings (``cache_control.strip_cache_control``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from pawwake.text.messages import ChatMessage, StoredMessage
from pawwake.text.rounds import StoredRound, tool_call_id_of, tool_calls_of

SUMMARY_HEADING = "Summary of the earlier conversation:"


def breakpoint_marker(ttl: str) -> dict[str, str]:
    """The cache_control value; ``1h`` asks the provider for the long-lived cache."""
    marker = {"type": "ephemeral"}
    if ttl == "1h":
        marker["ttl"] = "1h"
    return marker


def replay(row: StoredMessage) -> ChatMessage:
    """A stored row as the provider expects it back."""
    metadata = row.get("metadata") or {}
    role = row["role"]
    message: ChatMessage = {"role": role, "content": row.get("content") or ""}
    if role == "assistant":
        extras = metadata.get("extras")
        if isinstance(extras, dict):
            # Other providers' keys of the message, passed back as they came.
            message.update(cast(ChatMessage, {k: v for k, v in extras.items()
                                              if k not in ("role", "content")}))
        if metadata.get("reasoning_content"):
            message["reasoning_content"] = metadata["reasoning_content"]
        calls = tool_calls_of(row)
        if calls:
            message["tool_calls"] = calls
            if not message["content"]:
                message["content"] = None
    elif role == "tool":
        message["tool_call_id"] = tool_call_id_of(row)
        if isinstance(metadata.get("name"), str):
            message["name"] = metadata["name"]
    elif role == "user" and isinstance(metadata.get("name"), str):
        message["name"] = metadata["name"]
    return message


def settled_messages(round_: StoredRound) -> list[ChatMessage]:
    """A history round replayed; tool calls that never got a result (an abandoned tool round)
    are removed, since providers reject calls without results."""
    pending = round_.pending_tool_ids
    messages = []
    for row in round_.messages:
        message = replay(row)
        if pending and message.get("tool_calls"):
            kept = [c for c in message["tool_calls"] if c.get("id") not in pending]
            if kept:
                message["tool_calls"] = kept
            else:
                del message["tool_calls"]
                if not message.get("content"):
                    continue
                message.pop("reasoning_content", None)
        messages.append(message)
    return messages


def cached_form(message: ChatMessage) -> ChatMessage:
    """A history message in its one stable form: non-empty text as a single text block.
    Null content (tool calls) and empty text stay as they are: providers reject empty
    text blocks, and such a message never carries a breakpoint."""
    content = message.get("content")
    if isinstance(content, str) and content:
        return {**message, "content": [{"type": "text", "text": content}]}
    return message


def _mark_last(messages: list[ChatMessage], marker: dict[str, str]) -> None:
    """Put the breakpoint on the last text block of the last message that has one. The key
    goes last, so without it the block's bytes are those of the unmarked form."""
    for message in reversed(messages):
        content = message.get("content")
        if isinstance(content, list) and content and isinstance(content[-1], dict):
            message["content"] = [*content[:-1], {**content[-1], "cache_control": marker}]
            return


@dataclass(frozen=True)
class Layout:
    """What was sent: message counts per zone (for status and tests)."""

    zone_a_rounds: int
    zone_b_rounds: int


def zone_split(history: Sequence[StoredRound], x: int
               ) -> tuple[list[StoredRound], list[StoredRound]]:
    """Zone A is the oldest X live rounds, zone B the rest; fewer than X rounds: no zones."""
    if len(history) < x:
        return [], list(history)
    return list(history[:x]), list(history[x:])


def with_note(messages: Sequence[ChatMessage], note: str) -> list[ChatMessage]:
    """Copies of ``messages`` with ``note`` in front of the last user message's text (images
    and other parts kept)."""
    out = [m.copy() for m in messages]
    for message in reversed(out):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, list):
            message["content"] = [{"type": "text", "text": note}, *content]
        else:
            message["content"] = f"{note}\n\n{content or ''}"
        break
    return out


def assemble(*, persona: str, summary_parts: Sequence[str],
             history: Sequence[StoredRound], current: Sequence[ChatMessage], x: int,
             ttl: str, note: str = "") -> tuple[list[ChatMessage], Layout]:
    """The upstream messages: ``history`` are the live rounds (from the zone start on),
    ``current`` the messages of the turn being answered (already in provider form), ``note``
    the time note put in front of the current user text."""
    marker = breakpoint_marker(ttl)
    blocks: list[dict[str, Any]] = []
    if persona:
        blocks.append({"type": "text", "text": persona, "cache_control": marker})
    parts = [part for part in summary_parts if part.strip()]
    for index, part in enumerate(parts):
        text = f"{SUMMARY_HEADING}\n{part}" if index == 0 else part
        block: dict[str, Any] = {"type": "text", "text": text}
        if index == len(parts) - 1:
            block["cache_control"] = marker
        blocks.append(block)
    messages: list[ChatMessage] = []
    if blocks:
        messages.append({"role": "system", "content": blocks})
    zone_a, zone_b = zone_split(history, x)
    a_messages = [cached_form(m) for r in zone_a for m in settled_messages(r)]
    b_messages = [cached_form(m) for r in zone_b for m in settled_messages(r)]
    if zone_a:
        _mark_last(a_messages, marker)
        _mark_last(b_messages, marker)
    messages += a_messages + b_messages
    messages += with_note(current, note) if note else [m.copy() for m in current]
    return messages, Layout(zone_a_rounds=len(zone_a), zone_b_rounds=len(zone_b))


def time_note(now: datetime) -> str:
    """The current time for the model; it lives in the current turn, never in a cached part."""
    return f"[Current time: {now.strftime('%Y-%m-%d %H:%M %A')}]"
