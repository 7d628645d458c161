"""Which rows a finished turn adds (pure): new messages, re-rolls, tool traffic, the reply.

Clients resend the whole history on every request; only what the database does not hold yet
is stored: the new user message (or, for a re-roll, a replacement of the previous reply), tool
traffic matched by ``tool_call_id``, and the reply itself. A turn the client left before its
end flags its rows ``incomplete``. The transaction that writes the plan is ``turn_store``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pawwake.db.conversations import INCOMPLETE, NewMessage
from pawwake.llm.sse import CapturedReply
from pawwake.text.messages import GATEWAY_METADATA, ChatMessage, MessageSkeleton, TailMessage

_MESSAGE_KEYS = frozenset({"role", "content", "tool_calls", "reasoning_content", "name",
                           "tool_call_id", GATEWAY_METADATA})
_MAX_NOTED_URL = 2048
_TEXT_PARTS = ("text", "input_text", "output_text")


def message_text(content: Any) -> tuple[str, list[dict[str, Any]]]:
    """Text of a message plus notes on non-text parts (images are noted, never copied)."""
    if content is None:
        return "", []
    if isinstance(content, str):
        return content, []
    if not isinstance(content, list):
        return str(content), []
    texts: list[str] = []
    attachments: list[dict[str, Any]] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("text"), str) and part.get("type", "text") in _TEXT_PARTS:
            texts.append(part["text"])
            continue
        note: dict[str, Any] = {"type": part.get("type") or "unknown"}
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, dict) else image
        if isinstance(url, str) and url.startswith(("http://", "https://")) \
                and len(url) <= _MAX_NOTED_URL:
            note["url"] = url
        attachments.append(note)
    return "\n".join(texts), attachments


def user_message(message: ChatMessage, model: str, *, incomplete: bool = False
                 ) -> NewMessage:
    text, attachments = message_text(message.get("content"))
    metadata: dict[str, Any] = {INCOMPLETE: True} if incomplete else {}
    if attachments:
        metadata["attachments"] = attachments
    if isinstance(message.get("name"), str):
        metadata["name"] = message["name"]
    metadata.update(_gateway_metadata(message))
    return NewMessage(role="user", content=text, model=model, metadata=metadata)


def _gateway_metadata(message: ChatMessage) -> dict[str, Any]:
    kept = message.get(GATEWAY_METADATA)
    return kept if isinstance(kept, dict) else {}


def client_assistant_message(message: ChatMessage, model: str) -> NewMessage:
    """An assistant tool-call message as the client resent it (stored when we lack it)."""
    text, _ = message_text(message.get("content"))
    metadata: dict[str, Any] = {"tool_calls": message.get("tool_calls") or []}
    if message.get("reasoning_content"):
        metadata["reasoning_content"] = message["reasoning_content"]
    extras = {k: v for k, v in message.items() if k not in _MESSAGE_KEYS and v is not None}
    if extras:
        metadata["extras"] = extras
    metadata.update(_gateway_metadata(message))
    return NewMessage(role="assistant", content=text, model=model, metadata=metadata)


def tool_message(message: ChatMessage, model: str) -> NewMessage:
    text, _ = message_text(message.get("content"))
    metadata: dict[str, Any] = {"tool_call_id": message.get("tool_call_id")}
    if isinstance(message.get("name"), str):
        metadata["name"] = message["name"]
    metadata.update(_gateway_metadata(message))
    return NewMessage(role="tool", content=text, model=model, metadata=metadata)


def reply_message(reply: CapturedReply, model: str, *, incomplete: bool = False
                  ) -> NewMessage:
    """The captured reply with everything needed to send it back to the provider."""
    metadata: dict[str, Any] = {INCOMPLETE: True} if incomplete else {}
    if reply.tool_calls:
        metadata["tool_calls"] = reply.tool_calls
    if reply.reasoning_content:
        metadata["reasoning_content"] = reply.reasoning_content
    if reply.extras:
        metadata["extras"] = reply.extras
    if reply.finish_reason:
        metadata["finish_reason"] = reply.finish_reason
    metadata.update(reply.metadata)
    return NewMessage(role="assistant", content=reply.content, model=model, metadata=metadata)


def trailing_call_ids(messages: Sequence[ChatMessage]) -> list[str]:
    """Tool-call ids mentioned after the last user message (what may need storing)."""
    ids: list[str] = []
    for message in messages[_last_user_index(messages) + 1:]:
        if not isinstance(message, dict):
            continue
        call_id = message.get("tool_call_id")
        if message.get("role") == "tool" and isinstance(call_id, str):
            ids.append(call_id)
        for call in message.get("tool_calls") or []:
            if isinstance(call, dict) and isinstance(call.get("id"), str):
                ids.append(call["id"])
    return ids


def _last_user_index(messages: Sequence[ChatMessage]) -> int:
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], dict) and messages[index].get("role") == "user":
            return index
    return -1


def _call_ids(message: Any) -> list[str]:
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    return [c["id"] for c in calls or [] if isinstance(c, dict) and isinstance(c.get("id"), str)]


@dataclass
class TurnPlan:
    """What to write: rows to insert in order, and stored rows a re-roll replaces."""

    insert: list[NewMessage] = field(default_factory=list)
    replace_ids: list[int] = field(default_factory=list)
    unflag_ids: list[int] = field(default_factory=list)  # incomplete rows this turn completes


def is_incomplete(row: MessageSkeleton) -> bool:
    return bool((row.get("metadata") or {}).get(INCOMPLETE))


def plan_turn(client_messages: Sequence[ChatMessage], tail: Sequence[TailMessage],
              stored_ids: dict[str, set[str]], reply: NewMessage | None, model: str,
              *, incomplete: bool = False) -> TurnPlan:
    """Decide the writes for one turn (pure).

    ``tail`` is the session's last stored user message and what follows it; ``stored_ids``
    the tool-call ids already stored (as assistant calls and as tool results). An
    ``incomplete`` turn (the client left mid-reply; ``reply`` None when nothing arrived)
    flags its user message and only ever replaces rows that were incomplete themselves; a
    complete turn that answers a stored incomplete user message clears its flag.
    """
    plan = TurnPlan()
    last_user = _last_user_index(client_messages)
    trailing = client_messages[last_user + 1:]
    stored_user = tail[0] if tail and tail[0]["role"] == "user" else None
    if last_user >= 0:
        user = user_message(client_messages[last_user], model, incomplete=incomplete)
        same_text = stored_user is not None and stored_user["content"] == user.content
        after = tail[1:]
        if not same_text:
            plan.insert.append(user)
        elif not trailing and after and not repeats_stored_reply(
                client_messages[:last_user], after):
            # Same question again without the stored answer in the history: a re-roll.
            plan.replace_ids = [row["id"] for row in after]
        elif not trailing and after:
            plan.insert.append(user)  # the user really said the same thing twice
        elif trailing:
            plan.replace_ids = _answered_after(trailing[-1], after, stored_ids)
    for message in trailing:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role == "assistant" and message.get("tool_calls"):
            ids = _call_ids(message)
            if not ids or not set(ids) & stored_ids.get("assistant", set()):
                plan.insert.append(client_assistant_message(message, model))
        elif role == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str) or call_id not in stored_ids.get("tool", set()):
                plan.insert.append(tool_message(message, model))
    if reply is not None:
        plan.insert.append(reply)
    if incomplete:
        flagged = {row["id"] for row in tail if is_incomplete(row)}
        plan.replace_ids = [row_id for row_id in plan.replace_ids if row_id in flagged]
    elif stored_user is not None and is_incomplete(stored_user) \
            and not any(message.role == "user" for message in plan.insert) \
            and stored_user["id"] not in plan.replace_ids:
        plan.unflag_ids = [stored_user["id"]]
    return plan


def _answered_after(last: Any, after: Sequence[TailMessage], stored_ids: dict[str, set[str]]
                    ) -> list[int]:
    """A re-roll after tool results: the client ends with a tool result we stored and already
    answered; the stored answer (everything after that result) is replaced."""
    if not isinstance(last, dict) or last.get("role") != "tool":
        return []
    call_id = last.get("tool_call_id")
    if call_id not in stored_ids.get("tool", set()):
        return []
    for position, row in enumerate(after):
        if row["role"] == "tool" and (row.get("metadata") or {}).get("tool_call_id") == call_id:
            return [later["id"] for later in after[position + 1:]]
    return []


def repeats_stored_reply(earlier: Sequence[ChatMessage], after: Sequence[TailMessage]) -> bool:
    """True when the client's history already ends with the stored reply (so the repeated
    user text is a new message, not a re-roll)."""
    previous = earlier[-1] if earlier else None
    if not isinstance(previous, dict) or previous.get("role") != "assistant":
        return False
    stored = next((row for row in reversed(after) if row["role"] == "assistant"), None)
    if stored is None:
        return False
    text, _ = message_text(previous.get("content"))
    stored_calls = _call_ids(stored.get("metadata") or {})
    return text == stored["content"] and _call_ids(previous) == stored_calls
