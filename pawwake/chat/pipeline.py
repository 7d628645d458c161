"""The chat request flow between parsing and forwarding.

``prepare_chat`` classifies a request, picks its session, applies the body rewrites and the
persona, lets the registered steps (memory injection, partition cache, recall) shape it, and
returns a PreparedChat: the exact upstream payload plus the work to run after the reply.
``after_reply`` / ``after_failure`` start that work as tracked background tasks: success hooks
only after a natural end with status 200, failure hooks (releasing claims) otherwise.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import aiohttp
from aiohttp import web

from pawwake import keys
from pawwake.api_error import ApiError
from pawwake.chat.auxiliary import is_auxiliary
from pawwake.chat.cache_control import strip_cache_control, supports_cache_control
from pawwake.chat.persona import PersonaFile, resolve_persona
from pawwake.chat.sessions import resolve_session_id
from pawwake.chat.turns import PENDING_WAIT_SECONDS, store_incomplete, turn_writer, wait_pending
from pawwake.database import connected_database
from pawwake.db.partition_state import PartitionState
from pawwake.llm.sse import CapturedReply
from pawwake.services import services_of
from pawwake.tasks import BackgroundTasks

log = logging.getLogger(__name__)

SYSTEM_ROLES = ("system", "developer")

SuccessHook = Callable[["PreparedChat", CapturedReply], Awaitable[None]]
FailureHook = Callable[["PreparedChat", str], Awaitable[None]]
ChatStep = Callable[["ChatContext", "PreparedChat"], Awaitable[None]]


class ChatRejected(ApiError):
    """The chat request cannot be served as asked (an ``ApiError`` written status first);
    each protocol's turn answers it in its own envelope, ``param`` naming the field."""

    def __init__(self, status: int, code: str, message: str, *, param: str | None = None) -> None:
        super().__init__(code, message, status=status, **({"param": param} if param else {}))
        self.param = param


@dataclass
class ChatResources:
    """Per-app chat state: the persona file and the pluggable steps.

    ``steps`` run in order for every non-auxiliary request, after the persona and before the
    body is frozen; a step may add ``system_parts``, rewrite ``body["messages"]``, register
    hooks, or raise ChatRejected.
    """

    persona: PersonaFile = field(default_factory=PersonaFile)
    steps: list[ChatStep] = field(default_factory=list)
    # Sessions whose finished turn is being stored, so this process's next request of the
    # session waits for it (set when the store ends either way).
    pending: dict[str, asyncio.Event] = field(default_factory=dict)


@dataclass(frozen=True)
class ChatContext:
    """What a step may use: the settings in force and the app's shared resources."""

    settings: Any
    database: Any  # pawwake.database.Database | None
    http: aiohttp.ClientSession


@dataclass
class PreparedChat:
    """One chat request, ready to forward."""

    body: dict[str, Any]  # the upstream body; frozen into ``payload`` by finalize()
    client_messages: list[dict[str, Any]]  # as the client sent them (what gets stored)
    session_id: str
    model: str
    stream: bool
    auxiliary: bool
    persist: bool
    received_at: datetime
    system_parts: list[str] = field(default_factory=list)
    turn_blocks: list[str] = field(default_factory=list)  # context for the current user turn
    memory_count: int = 0
    # What the gateway added, one entry per item ({"kind": "persona" | "memory" | "reminder" |
    # "fragment" | "partition", ...}); read by the try-it page and kept with the stored turn.
    injected: list[dict[str, Any]] = field(default_factory=list)
    payload: bytes = b""
    after_success: list[SuccessHook] = field(default_factory=list)
    after_failure: list[FailureHook] = field(default_factory=list)
    # The turn's idempotency key: its stored reply (or lone user message) carries it.
    turn_key: str = field(default_factory=lambda: uuid.uuid4().hex)
    stored: asyncio.Event = field(default_factory=asyncio.Event)  # set once the store ended
    store_scheduled: bool = False
    client_session_id: str = ""  # the session as the client named it (steps may move it)
    # The active thread's partition state as the partition step read or saved it (read once
    # per request; later steps use it instead of reading it again).
    partition_state: PartitionState | None = None

    def __post_init__(self) -> None:
        self.client_session_id = self.client_session_id or self.session_id

    def finalize(self, untouched: bytes | None = None) -> None:
        """Freeze the upstream bytes: the client's own bytes when nothing changed, else the
        body with the system text (persona, memories...) put in front."""
        if untouched is not None:
            self.payload = untouched
            return
        if self.system_parts:
            self.body["messages"] = with_system_text(self.body["messages"],
                                                     "\n\n".join(self.system_parts))
        if self.turn_blocks:
            self.body["messages"] = with_turn_context(self.body["messages"],
                                                      "\n\n".join(self.turn_blocks))
        if not supports_cache_control(self.model):
            self.body["messages"] = strip_cache_control(self.body["messages"])
        self.payload = json.dumps(self.body, ensure_ascii=False,
                                  separators=(",", ":")).encode("utf-8")


def with_turn_context(messages: list[Any], text: str) -> list[Any]:
    """Put ``text`` in front of the last user message (the current turn), after every cached
    part of the prompt; images and other parts of that message are kept."""
    messages = list(messages)
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                merged: Any = [{"type": "text", "text": text}, *content]
            else:
                merged = f"{text}\n\n{content or ''}"
            messages[index] = {**message, "content": merged}
            break
    return messages


def with_system_text(messages: list[Any], text: str) -> list[Any]:
    """Put ``text`` before the client's own system text (a new system message when there is
    none). The client's list and message objects are left as they were."""
    messages = list(messages)
    first = messages[0] if messages else None
    if isinstance(first, dict) and first.get("role") in SYSTEM_ROLES:
        content = first.get("content")
        if isinstance(content, list):
            merged: Any = [{"type": "text", "text": text}, *content]
        elif isinstance(content, str) and content.strip():
            merged = f"{text}\n\n{content}"
        else:
            merged = text
        messages[0] = {**first, "content": merged}
    else:
        messages.insert(0, {"role": "system", "content": text})
    return messages


def apply_rewrites(body: dict[str, Any], settings: Any) -> None:
    """FORCE_STREAM, REASONING_EFFORT, and usage reporting for streams."""
    if settings.FORCE_STREAM:
        body["stream"] = True
    if settings.REASONING_EFFORT:
        body["reasoning_effort"] = settings.REASONING_EFFORT
    if body.get("stream") and "stream_options" not in body:
        body["stream_options"] = {"include_usage": True}


def drop_gateway_fields(body: dict[str, Any]) -> None:
    """``metadata.session_id`` is addressed to the gateway; providers may reject it."""
    metadata = body.get("metadata")
    if isinstance(metadata, dict) and "session_id" in metadata:
        rest = {key: value for key, value in metadata.items() if key != "session_id"}
        if rest:
            body["metadata"] = rest
        else:
            del body["metadata"]


async def prepare_chat(app: web.Application, settings: Any, headers: Mapping[str, str],
                       body: dict[str, Any], raw: bytes, received_at: datetime) -> PreparedChat:
    """Turn a validated client body into what goes upstream and what happens afterwards."""
    model = body.get("model") or settings.DEFAULT_MODEL
    if not model:
        raise ChatRejected(400, "missing_model",
                           "No model given and DEFAULT_MODEL is not set.", param="model")
    auxiliary = is_auxiliary(headers, body)
    upstream = {**body, "model": model}
    prepared = PreparedChat(
        body=upstream, client_messages=body["messages"],
        session_id=resolve_session_id(headers, body), model=model,
        stream=bool(body.get("stream")), auxiliary=auxiliary,
        persist=services_of(app).database is not None and not auxiliary, received_at=received_at)
    if auxiliary:
        # The client's own housekeeping: forwarded as sent (a missing model filled in).
        prepared.finalize(untouched=raw if body.get("model") else None)
        return prepared
    apply_rewrites(upstream, settings)
    drop_gateway_fields(upstream)
    prepared.stream = bool(upstream.get("stream"))
    await run_steps(app, settings, prepared, app[keys.CHAT].steps)
    prepared.finalize()
    return prepared


async def run_steps(app: web.Application, settings: Any, prepared: PreparedChat,
                    steps: list[ChatStep], *, step_settings: Any = None) -> None:
    """What every protocol adds before forwarding: the persona, the turn writer (once the
    session's previous store ended), then its steps (run with ``step_settings`` if given)."""
    persona = resolve_persona(settings, app[keys.CHAT].persona)
    if persona:
        prepared.system_parts.append(persona)
        prepared.injected.append({"kind": "persona", "text": persona,
                                  "source": "setting" if settings.SYSTEM_PROMPT
                                  and settings.SYSTEM_PROMPT.strip() else "file"})
    if prepared.persist:
        prepared.after_success.append(turn_writer(app))
        await wait_pending(app, prepared.session_id, PENDING_WAIT_SECONDS)
    services = services_of(app)
    context = ChatContext(settings=step_settings or settings,
                          database=connected_database(services.database), http=services.http)
    try:
        for step in steps:
            await step(context, prepared)
    except BaseException:
        # A step refused, failed or was cancelled: release what earlier steps claimed.
        after_failure(services_of(app).tasks, prepared, "not_forwarded")
        raise


def after_reply(tasks: BackgroundTasks, prepared: PreparedChat, reply: CapturedReply) -> None:
    """The reply ended naturally with 200: run the success hooks (the turn writer first
    stores the turn; ``prepared.stored`` tells when)."""
    if prepared.after_success:
        prepared.store_scheduled = prepared.persist
        tasks.spawn(_run_success(prepared, reply), name="chat-after-success")


def after_incomplete(app: web.Application, prepared: PreparedChat, partial: CapturedReply,
                     reason: str) -> None:
    """The client left mid-reply: release claims like any failure, and keep the user message
    with the partial reply, flagged incomplete."""
    tasks = services_of(app).tasks
    after_failure(tasks, prepared, reason)
    if prepared.persist:
        prepared.store_scheduled = True
        tasks.spawn(store_incomplete(app, prepared, partial), name="chat-store-incomplete")


def after_failure(tasks: BackgroundTasks, prepared: PreparedChat, reason: str) -> None:
    """No usable reply (client gone, upstream error or cut): run the failure hooks only."""
    if prepared.after_failure:
        tasks.spawn(_run_failure(prepared, reason), name="chat-after-failure")


async def _run_success(prepared: PreparedChat, reply: CapturedReply) -> None:
    for hook in prepared.after_success:
        try:
            await hook(prepared, reply)
        except Exception:
            log.exception("after-reply step %s failed", _name(hook))


async def _run_failure(prepared: PreparedChat, reason: str) -> None:
    for hook in prepared.after_failure:
        try:
            await hook(prepared, reason)
        except Exception:
            log.exception("after-failure step %s failed", _name(hook))


def _name(hook: Callable[..., Any]) -> str:
    return getattr(hook, "__qualname__", repr(hook))
