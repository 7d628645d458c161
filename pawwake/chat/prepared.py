"""A chat request on its way upstream, and the typed contract of the steps that shape it.

A step (``ChatStep``) reads the request through ``StepInput`` (read-only) and returns a
``StepResult``: what it adds (system text, turn context, injected-record entries, named
after-reply hooks) and, for the partition step, the thread the request continues. Only the
pipeline (``chat/pipeline.py``) applies results to the ``PreparedChat``, in step order.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from pawwake.api_error import ApiError
from pawwake.chat.cache_control import strip_cache_control, supports_cache_control
from pawwake.db.partition_state import PartitionState
from pawwake.db.turn_injections import InjectedEntry
from pawwake.llm.sse import CapturedReply
from pawwake.settings import Settings
from pawwake.text.messages import ChatMessage

if TYPE_CHECKING:
    from pawwake.database import Database

SYSTEM_ROLES = ("system", "developer")

Injected = InjectedEntry  # one entry of the injected record (``db/turn_injections.py``)
OnSuccess = Callable[[CapturedReply], Awaitable[None]]
OnFailure = Callable[[str], Awaitable[None]]  # the reason: "client_gone", "upstream_cut"...


class ChatRejected(ApiError):
    """The chat request cannot be served as asked (an ``ApiError`` written status first);
    each protocol's turn answers it in its own envelope, ``param`` naming the field."""

    def __init__(self, status: int, code: str, message: str, *, param: str | None = None) -> None:
        super().__init__(code, message, status=status, **({"param": param} if param else {}))
        self.param = param


@dataclass(frozen=True)
class ReplyHook:
    """Named work once the reply ended: ``on_success`` after a natural end with status 200,
    ``on_failure`` otherwise (releasing what a step claimed). ``before_store`` hooks run ahead
    of the turn writer, so the session's next request already sees their effect."""

    name: str
    on_success: OnSuccess | None = None
    on_failure: OnFailure | None = None
    before_store: bool = False


@dataclass(frozen=True)
class PartitionThread:
    """Partition mode: the request continues the active thread, whose state was read once."""

    thread_id: str  # the session the turn is stored in
    state: PartitionState
    compared: list[ChatMessage]  # the turn's messages as the turn writer compares them


@dataclass(frozen=True)
class StepResult:
    """What one step adds to a request; ``layout`` replaces the upstream body (the partition
    layout, built with the system text gathered so far placed in it)."""

    system_parts: tuple[str, ...] = ()
    turn_blocks: tuple[str, ...] = ()  # context for the current user turn
    injected: tuple[Injected, ...] = ()
    hooks: tuple[ReplyHook, ...] = ()
    memory_count: int = 0
    thread: PartitionThread | None = None
    layout: dict[str, Any] | None = None


NOTHING = StepResult()


class StepInput(Protocol):
    """What a step may read of the request (steps never write it)."""

    @property
    def body(self) -> Mapping[str, Any]: ...
    @property
    def client_messages(self) -> Sequence[ChatMessage]: ...
    @property
    def turn_messages(self) -> Sequence[ChatMessage]: ...
    @property
    def session_id(self) -> str: ...
    @property
    def auxiliary(self) -> bool: ...
    @property
    def system_parts(self) -> Sequence[str]: ...
    @property
    def thread(self) -> PartitionThread | None: ...


@dataclass(frozen=True)
class StepContext:
    """What every step is given for one request: the settings snapshot, the database as
    connected now, and the chat clock (it decides time-window rotations and the time note).
    What else a step works with is its own face, bound to it by the assembly (``BoundStep``)."""

    settings: Settings
    database: Database | None  # connected now; None when away or turned off
    clock: Callable[[], datetime]


ChatStep = Callable[[StepContext, StepInput], Awaitable[StepResult]]
Face = TypeVar("Face")


@dataclass(frozen=True)
class BoundStep(Generic[Face]):
    """A step bound by the assembly to its face: ``run(face, context, request)``, so the step's
    own signature says what it works with (``memories(parts: MemoryStepParts, ...)``)."""

    run: Callable[[Face, StepContext, StepInput], Awaitable[StepResult]]
    face: Face

    async def __call__(self, context: StepContext, request: StepInput) -> StepResult:
        return await self.run(self.face, context, request)


@dataclass
class PreparedChat:
    """One chat request, ready to forward. Steps never write it; the pipeline applies what
    they return."""

    body: dict[str, Any]  # the upstream body; frozen into ``payload`` by finalize()
    client_messages: list[ChatMessage]  # as the client sent them (in the chat form)
    client_session_id: str  # the session as the client named it
    model: str
    stream: bool
    auxiliary: bool
    persist: bool
    received_at: datetime
    system_parts: list[str] = field(default_factory=list)
    turn_blocks: list[str] = field(default_factory=list)  # context for the current user turn
    memory_count: int = 0  # memories and reminders injected (the request's log line)
    # What the gateway added, one entry per item, and why the best memories left out were
    # left out (``InjectedEntry``); read by the try-it page and kept with the stored turn.
    injected: list[Injected] = field(default_factory=list)
    payload: bytes = b""
    hooks: list[ReplyHook] = field(default_factory=list)  # in the order they run
    # The turn's idempotency key: its stored reply (or lone user message) carries it.
    turn_key: str = field(default_factory=lambda: uuid.uuid4().hex)
    stored: asyncio.Event = field(default_factory=asyncio.Event)  # set once the store ended
    store_scheduled: bool = False
    thread: PartitionThread | None = None  # partition mode: the thread this turn continues

    @property
    def session_id(self) -> str:
        """The session the turn is stored in: the active thread in partition mode."""
        return self.thread.thread_id if self.thread is not None else self.client_session_id

    @property
    def turn_messages(self) -> list[ChatMessage]:
        """The messages the turn writer compares with the stored ones."""
        return self.thread.compared if self.thread is not None else self.client_messages

    def apply(self, added: StepResult) -> None:
        """Take in what a step returned (the pipeline's one way of changing a request)."""
        if added.thread is not None:
            self.thread = added.thread
        if added.layout is not None:
            self.body = added.layout
            self.system_parts.clear()  # the layout placed them
        self.system_parts.extend(added.system_parts)
        self.turn_blocks.extend(added.turn_blocks)
        self.injected.extend(added.injected)
        self.memory_count += added.memory_count
        ahead = sum(1 for hook in self.hooks if hook.before_store)
        self.hooks[ahead:ahead] = [hook for hook in added.hooks if hook.before_store]
        self.hooks.extend(hook for hook in added.hooks if not hook.before_store)

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
