"""Stored rows as Messages content (pure): what partition mode sends back to the provider.

A row stored from a Messages request carries its content blocks and is replayed with them,
byte for byte (thinking with its signature, tool use, tool results); image placeholders
become a short text note, since the image data was never stored. Rows stored from chat
clients are rendered as text, ``tool_use`` and ``tool_result`` blocks. Consecutive rows of
the same Messages role (a tool result and the user text after it) share one message, as the
API requires alternating roles.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from pawwake.protocols.anthropic.request import PROTOCOL
from pawwake.text.messages import StoredMessage
from pawwake.text.rounds import StoredRound, tool_call_id_of, tool_calls_of

_OMITTED = "[{kind} omitted]"


def without_cache_control(value: Any) -> Any:
    """A block, message or block list minus every ``cache_control`` key (the gateway places
    the breakpoints in partition mode)."""
    if isinstance(value, list):
        return [without_cache_control(item) for item in value]
    if isinstance(value, dict):
        return {k: without_cache_control(v) for k, v in value.items() if k != "cache_control"}
    return value


def _restored(block: Any) -> Any:
    if isinstance(block, dict) and block.get("omitted"):
        return {"type": "text", "text": _OMITTED.format(kind=block.get("type") or "media")}
    if isinstance(block, dict) and block.get("type") == "tool_result" \
            and isinstance(block.get("content"), list):
        return {**block, "content": [_restored(part) for part in block["content"]]}
    return block


def row_blocks(row: StoredMessage, drop_calls: set[str] | frozenset[str] = frozenset()
               ) -> tuple[str, list[dict[str, Any]]]:
    """(Messages role, content blocks) of one stored row."""
    metadata = row.get("metadata") or {}
    role = "assistant" if row["role"] == "assistant" else "user"
    stored = metadata.get("content_blocks") if metadata.get("protocol") == PROTOCOL else None
    if isinstance(stored, str):
        blocks: list[dict[str, Any]] = [{"type": "text", "text": stored}] if stored else []
    elif isinstance(stored, list):
        blocks = [_restored(without_cache_control(b)) for b in stored if isinstance(b, dict)]
    elif row["role"] == "tool":
        blocks = [{"type": "tool_result", "tool_use_id": tool_call_id_of(row) or "",
                   "content": row.get("content") or ""}]
    else:
        blocks = [{"type": "text", "text": row["content"]}] if row.get("content") else []
        for call in tool_calls_of(row):
            function = call.get("function") or {}
            try:
                arguments = json.loads(function.get("arguments") or "{}")
            except ValueError:
                arguments = {}
            blocks.append({"type": "tool_use", "id": call.get("id") or "",
                           "name": function.get("name") or "", "input": arguments})
    if drop_calls:
        blocks = [b for b in blocks if not (b.get("type") == "tool_use"
                                            and b.get("id") in drop_calls)]
    return role, blocks


def as_messages(rows: Iterable[StoredMessage],
                drop_calls: set[str] | frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """Rows as alternating Messages messages; rows left without content are skipped."""
    messages: list[dict[str, Any]] = []
    for row in rows:
        role, blocks = row_blocks(row, drop_calls)
        if not blocks:
            continue
        if messages and messages[-1]["role"] == role:
            messages[-1] = {"role": role, "content": [*messages[-1]["content"], *blocks]}
        else:
            messages.append({"role": role, "content": blocks})
    return messages


def round_messages(rounds: Iterable[StoredRound]) -> list[dict[str, Any]]:
    """History rounds replayed; tool calls of an abandoned round (never answered) dropped."""
    rows: list[StoredMessage] = []
    dropped: set[str] = set()
    for round_ in rounds:
        rows += round_.messages
        dropped |= round_.pending_tool_ids
    return as_messages(rows, dropped)


def merge_turns(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Join neighbours of the same role (history followed by the current turn)."""
    merged: list[dict[str, Any]] = []
    for message in messages:
        if merged and merged[-1]["role"] == message["role"]:
            first = merged[-1]["content"]
            second = message["content"]
            if isinstance(first, str):
                first = [{"type": "text", "text": first}]
            if isinstance(second, str):
                second = [{"type": "text", "text": second}]
            merged[-1] = {"role": message["role"], "content": [*first, *second]}
        else:
            merged.append(message)
    return merged


def mark_last(messages: list[dict[str, Any]], marker: dict[str, str]) -> None:
    """The breakpoint on the last block of the last message (the key goes last, so the
    unmarked bytes of the block are a prefix-stable form)."""
    if messages and isinstance(messages[-1].get("content"), list) and messages[-1]["content"]:
        content = messages[-1]["content"]
        messages[-1] = {**messages[-1],
                        "content": [*content[:-1], {**content[-1], "cache_control": marker}]}
