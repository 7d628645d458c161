"""Logical rounds: a user message opens a round; tool calls and their results stay inside it.

Shared by memory extraction (which counts rounds and reads the last N) and the partition cache
(which moves whole rounds between zones). Pure functions over message dicts with at least
``role``, ``content`` and optionally ``metadata`` (``tool_calls``, ``tool_call_id``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pawwake.text.messages import Message, StoredMessage, ToolCall

M = TypeVar("M", bound=Message)  # a round holds one kind: a client's messages or stored ones


def tool_calls_of(message: Mapping[str, Any]) -> list[ToolCall]:
    """Tool calls of an assistant message, whether stored in metadata or sent by a client."""
    calls = message.get("tool_calls")
    if calls is None:
        calls = (message.get("metadata") or {}).get("tool_calls")
    return calls if isinstance(calls, list) else []


def tool_call_id_of(message: Mapping[str, Any]) -> str | None:
    value = message.get("tool_call_id")
    if value is None:
        value = (message.get("metadata") or {}).get("tool_call_id")
    return value if isinstance(value, str) else None


@dataclass
class Round(Generic[M]):
    """One user message and everything that answered it."""

    messages: list[M] = field(default_factory=list)

    @property
    def user(self) -> M | None:
        first = self.messages[0] if self.messages else None
        return first if first is not None and first.get("role") == "user" else None

    @property
    def pending_tool_ids(self) -> set[str]:
        """Tool calls asked for in this round that have no result yet."""
        asked: set[Any] = set()  # ids as the client sent them (normally strings)
        answered: set[Any] = set()
        for message in self.messages:
            if message.get("role") == "assistant":
                asked.update(c.get("id") for c in tool_calls_of(message) if c.get("id"))
            elif message.get("role") == "tool":
                call_id = tool_call_id_of(message)
                if call_id:
                    answered.add(call_id)
        return asked - answered

    @property
    def complete(self) -> bool:
        """Closed by a final assistant message: it has no tool calls waiting for results."""
        if not self.messages:
            return False
        last = self.messages[-1]
        return (last.get("role") == "assistant" and not tool_calls_of(last)
                and not self.pending_tool_ids)

    @property
    def final_reply(self) -> M | None:
        return self.messages[-1] if self.complete else None


# A round of stored messages: the partition cache's history, extraction's dialogue.
StoredRound = Round[StoredMessage]


def group_rounds(messages: Sequence[M]) -> list[Round[M]]:
    """Split a history into rounds. Messages before the first user message form no round;
    tool results that answer no known call (orphans) are dropped."""
    rounds: list[Round[M]] = []
    known_calls: set[Any] = set()  # ids as the client sent them (normally strings)
    for message in messages:
        role = message.get("role")
        if role == "system":
            continue
        if role == "user":
            rounds.append(Round([message]))
            known_calls = set()
            continue
        if not rounds:
            continue
        if role == "assistant":
            known_calls.update(c.get("id") for c in tool_calls_of(message) if c.get("id"))
            rounds[-1].messages.append(message)
        elif role == "tool":
            if tool_call_id_of(message) in known_calls:
                rounds[-1].messages.append(message)
    return rounds


def count_complete_rounds(messages: Sequence[Message]) -> int:
    return sum(1 for r in group_rounds(messages) if r.complete)


def dialogue_text(rounds: Sequence[Round[Any]]) -> list[tuple[str, str]]:
    """The (role, text) pairs a reader sees: user text and assistant prose only, no tool
    traffic and no empty tool-call messages."""
    lines: list[tuple[str, str]] = []
    for round_ in rounds:
        for message in round_.messages:
            role = message.get("role")
            if role not in ("user", "assistant"):
                continue
            text = content_text(message.get("content"))
            if text.strip():
                lines.append((role, text.strip()))
    return lines


def content_text(content: Any) -> str:
    """Plain text of a message content: a string, or the text parts of a content list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content
                 if isinstance(p, dict) and p.get("type") == "text"]
        return "\n".join(part for part in parts if isinstance(part, str))
    return ""


def last_user_text(messages: Sequence[Message]) -> str:
    """Text of the newest user message: the current turn's question."""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return content_text(message.get("content"))
    return ""
