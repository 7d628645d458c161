"""Storing a finished chat turn: which messages are new, re-rolls, tool traffic, token usage.

Clients resend the whole history on every request; only what the database does not hold yet
is stored: the new user message (or, for a re-roll, a replacement of the previous reply), tool
traffic matched by ``tool_call_id``, and the reply itself. One transaction per turn, written
at most once (the reply row, or a lone user message, carries the turn's key). A turn the
client left before its end is kept flagged ``incomplete``; while the database is unreachable
turns wait in the spool (``turn_spool``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import psycopg2

from pawwake.chat.extraction_schedule import schedule_extraction
from pawwake.chat.recall.index import reindex_messages
from pawwake.chat.turn_spool import StoreTurn
from pawwake.db import conversation_turns, conversations, usage
from pawwake.db import threads as threads_db
from pawwake.db.conversations import INCOMPLETE, NewMessage
from pawwake.db.pool import UNAVAILABLE_ERRORS, transaction
from pawwake.db.turn_injections import record_injection
from pawwake.llm.sse import CapturedReply

if TYPE_CHECKING:
    from pawwake.chat.prepared import OnSuccess, PreparedChat
    from pawwake.chat.resources import ChatResources
    from pawwake.services import Services

log = logging.getLogger(__name__)

SOURCE = "gateway"
PENDING_WAIT_SECONDS = 3.0  # a session's next request waits at most this for the last store
STORE_WAIT_SECONDS = 3.0  # the end of a stream waits at most this for its turn's commit
SPOOL_COPY_AFTER_SECONDS = 2.0  # a store still running then leaves a copy in the spool
_RETRY_DELAYS = (0.1, 0.5)  # fresh-connection retries before a turn goes to the spool


class TurnSource(Protocol):
    """What a store needs of a request (a PreparedChat, or a turn read back from the spool)."""

    @property
    def session_id(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def turn_messages(self) -> list[Any]: ...  # what the client sent, as compared and stored
    @property
    def turn_key(self) -> str: ...

# A message of another protocol, seen as a chat message, carries what to keep of its original
# form (its protocol, its content blocks) under this key; it is stored in the row's metadata.
GATEWAY_METADATA = "_pawwake_metadata"
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


def user_message(message: dict[str, Any], model: str, *, incomplete: bool = False
                 ) -> NewMessage:
    text, attachments = message_text(message.get("content"))
    metadata: dict[str, Any] = {INCOMPLETE: True} if incomplete else {}
    if attachments:
        metadata["attachments"] = attachments
    if isinstance(message.get("name"), str):
        metadata["name"] = message["name"]
    metadata.update(_gateway_metadata(message))
    return NewMessage(role="user", content=text, model=model, metadata=metadata)


def _gateway_metadata(message: dict[str, Any]) -> dict[str, Any]:
    kept = message.get(GATEWAY_METADATA)
    return kept if isinstance(kept, dict) else {}


def client_assistant_message(message: dict[str, Any], model: str) -> NewMessage:
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


def tool_message(message: dict[str, Any], model: str) -> NewMessage:
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
    unflag_ids: list[int] = field(default_factory=list)  # incomplete rows this turn completes


def is_incomplete(row: dict[str, Any]) -> bool:
    return bool((row.get("metadata") or {}).get(INCOMPLETE))


def plan_turn(client_messages: list[Any], tail: list[dict[str, Any]],
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


async def store_turn(services: Services, turn: TurnSource, reply: CapturedReply,
                     *, incomplete: bool = False) -> bool:
    """Write the turn and its token usage in one transaction, serialised per session; False
    when the turn's key shows it was written before (a retry adds nothing).

    The same transaction keeps the recall index current and enqueues memory extraction when
    this turn closes an interval, so both happen exactly when the turn is stored.
    """
    database = services.require_database()
    settings = await services.config.fresh()
    model = turn.model
    call_ids = trailing_call_ids(turn.turn_messages)
    has_reply = bool(reply.content or reply.tool_calls or reply.reasoning_content)
    reply_row = reply_message(reply, model, incomplete=incomplete) \
        if has_reply or not incomplete else None
    extraction_job = None
    try:
        async with transaction(database.pool) as cur:
            session_id = await _stored_under(cur, turn)
            tail = await conversations.session_tail(cur, session_id, lock=True)
            if await conversation_turns.find_turn(cur, SOURCE, session_id,
                                                  turn.turn_key) is not None:
                log.info("a turn written before was offered again; nothing added")
                return False
            stored_ids = await conversations.stored_tool_call_ids(cur, session_id,
                                                                  call_ids)
            plan = plan_turn(turn.turn_messages, tail, stored_ids, reply_row, model,
                             incomplete=incomplete)
            if not plan.insert:
                return False
            plan.insert[-1] = _with_key(plan.insert[-1], turn.turn_key)
            _label_protocol(plan.insert, turn, reply, reply_row)
            await conversations.delete_messages(cur, plan.replace_ids)
            await conversations.clear_incomplete(cur, plan.unflag_ids)
            ids = await conversations.insert_messages(cur, session_id, plan.insert,
                                                      source=SOURCE)
            await record_injection(cur, turn, ids, plan.insert)
            if settings.CONVERSATION_RECALL_ENABLED:
                indexed = [(message_id, message.content) for message_id, message in zip(
                    ids, plan.insert, strict=True) if message.role in ("user", "assistant")
                    and not message.metadata.get(INCOMPLETE)]
                indexed += [(row["id"], row["content"]) for row in tail
                            if row["id"] in plan.unflag_ids]
                await reindex_messages(services, cur, indexed, settings=settings)
            if not incomplete:
                extraction_job = await schedule_extraction(cur, settings, session_id)
            if reply.usage is not None:
                await usage.insert_usage(
                    cur, session_id=session_id, model=model,
                    prompt_tokens=reply.usage.prompt, completion_tokens=reply.usage.completion,
                    total_tokens=reply.usage.total, cached_tokens=reply.usage.cached,
                    cache_creation_tokens=reply.usage.cache_creation, usage_type="chat",
                    cost=reply.usage.cost)
    except psycopg2.errors.UniqueViolation:
        log.info("a concurrent write of the same turn won; nothing added")
        return False
    if extraction_job is not None:
        services.jobs.wake()
    log.debug("stored %d messages (%d replaced%s) for a session", len(plan.insert),
              len(plan.replace_ids), ", incomplete" if incomplete else "")
    return True


async def _stored_under(cur: Any, turn: TurnSource) -> str:
    """The session the turn goes into: its own, or the name its thread was given while the
    reply was on its way (the rename moved the thread's rows already; the turn follows them
    instead of starting a ghost thread under the old name). The session's write lock, which
    a rename also takes, orders the two."""
    began = getattr(turn, "received_at", None)
    if began is None:
        return turn.session_id
    await conversation_turns.lock_session_writes(cur, turn.session_id)
    return await threads_db.renamed_since(cur, turn.session_id, began) or turn.session_id


def _label_protocol(rows: list[NewMessage], turn: TurnSource, reply: CapturedReply,
                    reply_row: NewMessage | None) -> None:
    """Rows of a turn that came through another protocol than chat completions say which
    (``metadata.protocol``); its reply row keeps the provider's reasoning token count."""
    protocol = getattr(turn, "protocol", None)
    if not protocol:
        return
    for row in rows:
        row.metadata["protocol"] = protocol
    details = (reply.raw_usage or {}).get("completion_tokens_details")
    reasoning = details.get("reasoning_tokens") if isinstance(details, dict) else None
    if reply_row is not None and rows and isinstance(reasoning, int) and reasoning > 0:
        rows[-1].metadata["reasoning_tokens"] = reasoning


def _with_key(message: NewMessage, turn_key: str) -> NewMessage:
    return NewMessage(role=message.role, content=message.content, model=message.model,
                      metadata=message.metadata, created_at=message.created_at,
                      turn_id=turn_key)


async def write_turn(services: Services, turn: TurnSource, reply: CapturedReply,
                     *, incomplete: bool = False) -> None:
    """Store a turn; while the database is unreachable, put it in the spool instead (written
    later, in order, exactly once). While turns wait in the spool the database was away a
    moment ago: they are tried once, in order, and if it is still away this turn joins them
    at once (no retries), so an outage costs each turn a disk write, not seconds."""
    spool = services.turn_spool
    if spool.pending:
        try:
            await spool.replay(spooled_turn_writer(services))
        except UNAVAILABLE_ERRORS as exc:
            log.warning("database still unreachable (%s); turn kept in the spool",
                        type(exc).__name__)
            await spool.add(turn, reply, incomplete=incomplete)
            return
    for delay in (*_RETRY_DELAYS, None):
        try:
            await store_turn(services, turn, reply, incomplete=incomplete)
            return
        except UNAVAILABLE_ERRORS as exc:
            if delay is None:
                log.warning("database unreachable (%s); turn kept in the spool",
                            type(exc).__name__)
                break
            await _drop_idle_connections(services)  # after a restart they are all stale
            await asyncio.sleep(delay)
    await spool.add(turn, reply, incomplete=incomplete)


def spooled_turn_writer(services: Services) -> StoreTurn:
    """How the spool writes a turn it kept: the same transaction as a live turn."""

    async def store(turn: Any, reply: CapturedReply, incomplete: bool) -> bool:
        return await store_turn(services, turn, reply, incomplete=incomplete)

    return store


async def _drop_idle_connections(services: Services) -> None:
    """Close the pool's idle connections so the retry opens a fresh one."""
    database = services.database
    if database is not None:
        with contextlib.suppress(Exception):
            await database.pool.clear()


def mark_pending(chat: ChatResources, prepared: PreparedChat) -> None:
    """This turn will be stored: the session's next request (this process) waits for it.
    Registered under the session the client named and the one the turn is stored in (a
    partition thread), as a step may have changed it."""
    pending = chat.pending
    for session_id in {prepared.session_id, prepared.client_session_id}:
        pending[session_id] = prepared.stored


def release_pending(chat: ChatResources, prepared: PreparedChat) -> None:
    """The request ends with no store scheduled: nobody needs to wait for it."""
    if not prepared.store_scheduled:
        _store_ended(chat, prepared)


def _store_ended(chat: ChatResources, prepared: PreparedChat) -> None:
    prepared.stored.set()
    pending = chat.pending
    for session_id in {prepared.session_id, prepared.client_session_id}:
        if pending.get(session_id) is prepared.stored:
            del pending[session_id]


async def wait_pending(chat: ChatResources, session_id: str, seconds: float) -> None:
    """Wait (bounded) for this process's store of the session's previous turn."""
    event = chat.pending.get(session_id)
    if event is None or event.is_set():
        return
    try:
        await asyncio.wait_for(event.wait(), seconds)
    except TimeoutError:
        log.warning("the previous turn of a session was still being stored after %.1f s",
                    seconds)


async def wait_stored(prepared: PreparedChat) -> None:
    """Wait (bounded) until the turn's transaction committed (or the turn was spooled)."""
    if not prepared.store_scheduled or prepared.stored.is_set():
        return
    try:
        await asyncio.wait_for(prepared.stored.wait(), STORE_WAIT_SECONDS)
    except TimeoutError:
        log.warning("turn not stored after %.1f s; the stream ends anyway", STORE_WAIT_SECONDS)


async def store_incomplete(services: Services, prepared: PreparedChat,
                           partial: CapturedReply) -> None:
    """Keep what the user typed (and the part of the reply it saw), flagged incomplete."""
    try:
        await write_turn(services, prepared, partial, incomplete=True)
    finally:
        _store_ended(services.chat, prepared)


def turn_writer(services: Services, prepared: PreparedChat) -> OnSuccess:
    """The after-success hook that stores the turn. The client's end of stream waits for it
    (``wait_stored``): when the database has not committed it within
    ``SPOOL_COPY_AFTER_SECONDS``, a copy goes to the spool first, so a stream that ended
    means a turn that is safe, in the database or on disk, even if the process dies next.
    The copy is written later like any spooled turn and adds nothing when the store won."""

    async def store(reply: CapturedReply) -> None:
        writing = asyncio.ensure_future(write_turn(services, prepared, reply))
        try:
            done, _ = await asyncio.wait({writing}, timeout=SPOOL_COPY_AFTER_SECONDS)
            if not done and await services.turn_spool.add(prepared, reply, incomplete=False):
                log.warning("the database is slow to store a turn; a copy waits in the spool")
                _store_ended(services.chat, prepared)
            await writing
        except asyncio.CancelledError:
            writing.cancel()  # shutdown: the store goes with the hook, as it always did
            raise
        finally:
            _store_ended(services.chat, prepared)

    return store
