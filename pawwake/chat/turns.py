"""Storing a finished chat turn: which messages are new, re-rolls, tool traffic, token usage.

Clients resend the whole history on every request; only what the database does not hold yet
is stored: the new user message (or, for a re-roll, a replacement of the previous reply), tool
traffic matched by ``tool_call_id``, and the reply itself. One transaction per turn.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web

from pawwake import keys
from pawwake.chat.conversation_index import reindex_messages
from pawwake.db import conversations, usage
from pawwake.db.conversations import NewMessage
from pawwake.db.pool import transaction
from pawwake.db.turn_injections import record_injection
from pawwake.llm.sse import CapturedReply
from pawwake.memory.extract import schedule_extraction

if TYPE_CHECKING:
    from pawwake.chat.pipeline import PreparedChat

log = logging.getLogger(__name__)

_MESSAGE_KEYS = frozenset({"role", "content", "tool_calls", "reasoning_content", "name",
                           "tool_call_id"})
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


def user_message(message: dict[str, Any], model: str) -> NewMessage:
    text, attachments = message_text(message.get("content"))
    metadata: dict[str, Any] = {}
    if attachments:
        metadata["attachments"] = attachments
    if isinstance(message.get("name"), str):
        metadata["name"] = message["name"]
    return NewMessage(role="user", content=text, model=model, metadata=metadata)


def client_assistant_message(message: dict[str, Any], model: str) -> NewMessage:
    """An assistant tool-call message as the client resent it (stored when we lack it)."""
    text, _ = message_text(message.get("content"))
    metadata: dict[str, Any] = {"tool_calls": message.get("tool_calls") or []}
    if message.get("reasoning_content"):
        metadata["reasoning_content"] = message["reasoning_content"]
    extras = {k: v for k, v in message.items() if k not in _MESSAGE_KEYS and v is not None}
    if extras:
        metadata["extras"] = extras
    return NewMessage(role="assistant", content=text, model=model, metadata=metadata)


def tool_message(message: dict[str, Any], model: str) -> NewMessage:
    text, _ = message_text(message.get("content"))
    metadata: dict[str, Any] = {"tool_call_id": message.get("tool_call_id")}
    if isinstance(message.get("name"), str):
        metadata["name"] = message["name"]
    return NewMessage(role="tool", content=text, model=model, metadata=metadata)


def reply_message(reply: CapturedReply, model: str) -> NewMessage:
    """The captured reply with everything needed to send it back to the provider."""
    metadata: dict[str, Any] = {}
    if reply.tool_calls:
        metadata["tool_calls"] = reply.tool_calls
    if reply.reasoning_content:
        metadata["reasoning_content"] = reply.reasoning_content
    if reply.extras:
        metadata["extras"] = reply.extras
    if reply.finish_reason:
        metadata["finish_reason"] = reply.finish_reason
    return NewMessage(role="assistant", content=reply.content, model=model, metadata=metadata)


def trailing_call_ids(messages: list[Any]) -> list[str]:
    """Tool-call ids mentioned after the last user message (what may need storing)."""
    ids: list[str] = []
    for message in messages[_last_user_index(messages) + 1:]:
        if not isinstance(message, dict):
            continue
        if message.get("role") == "tool" and isinstance(message.get("tool_call_id"), str):
            ids.append(message["tool_call_id"])
        for call in message.get("tool_calls") or []:
            if isinstance(call, dict) and isinstance(call.get("id"), str):
                ids.append(call["id"])
    return ids


def _last_user_index(messages: list[Any]) -> int:
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


def plan_turn(client_messages: list[Any], tail: list[dict[str, Any]],
              stored_ids: dict[str, set[str]], reply: NewMessage, model: str) -> TurnPlan:
    """Decide the writes for one turn (pure).

    ``tail`` is the session's last stored user message and what follows it; ``stored_ids``
    the tool-call ids already stored (as assistant calls and as tool results).
    """
    plan = TurnPlan()
    last_user = _last_user_index(client_messages)
    trailing = client_messages[last_user + 1:]
    if last_user >= 0:
        user = user_message(client_messages[last_user], model)
        stored_user = tail[0] if tail and tail[0]["role"] == "user" else None
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
    plan.insert.append(reply)
    return plan


def _answered_after(last: Any, after: list[dict[str, Any]], stored_ids: dict[str, set[str]]
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


def repeats_stored_reply(earlier: list[Any], after: list[dict[str, Any]]) -> bool:
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


async def store_turn(app: web.Application, prepared: PreparedChat, reply: CapturedReply
                     ) -> None:
    """Write the turn and its token usage in one transaction, serialised per session.

    The same transaction keeps the recall index current and enqueues memory extraction when
    this turn closes an interval, so both happen exactly when the turn is stored.
    """
    database = app[keys.DATABASE]
    assert database is not None
    settings = await app[keys.CONFIG].fresh()
    model = prepared.model
    call_ids = trailing_call_ids(prepared.client_messages)
    async with transaction(database.pool) as cur:
        tail = await conversations.session_tail(cur, prepared.session_id, lock=True)
        stored_ids = await conversations.stored_tool_call_ids(cur, prepared.session_id,
                                                              call_ids)
        plan = plan_turn(prepared.client_messages, tail, stored_ids,
                         reply_message(reply, model), model)
        await conversations.delete_messages(cur, plan.replace_ids)
        ids = await conversations.insert_messages(cur, prepared.session_id, plan.insert)
        await record_injection(cur, prepared, ids, plan.insert)
        if settings["CONVERSATION_RECALL_ENABLED"]:
            await reindex_messages(app, cur, [
                (message_id, message.content) for message_id, message in zip(
                    ids, plan.insert, strict=True) if message.role in ("user", "assistant")])
        extraction_job = await schedule_extraction(cur, settings, prepared.session_id)
        if reply.usage is not None:
            await usage.insert_usage(
                cur, session_id=prepared.session_id, model=model,
                prompt_tokens=reply.usage.prompt, completion_tokens=reply.usage.completion,
                total_tokens=reply.usage.total, cached_tokens=reply.usage.cached,
                usage_type="chat")
    if extraction_job is not None:
        app[keys.JOBS].wake()
    log.debug("stored %d messages (%d replaced) for a session", len(plan.insert),
              len(plan.replace_ids))


def turn_writer(app: web.Application) -> Callable[[PreparedChat, CapturedReply],
                                                 Awaitable[None]]:
    """The after-success hook that stores the turn."""

    async def store(prepared: PreparedChat, reply: CapturedReply) -> None:
        await store_turn(app, prepared, reply)

    return store
