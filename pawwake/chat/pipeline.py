"""The chat request flow between parsing and forwarding, in one place.

``prepare_chat`` classifies a request, picks its session, applies the body rewrites, then
``run_steps`` adds the persona and the turn writer and runs the steps in order:

    chat_steps(...) = (partition_context, memories, recalled_fragments)

each bound by the assembly (``services.py``) to the parts it works with:

1. ``partition_context`` (``partition/step.py``): partition mode rebuilds the history from
   the active thread (read once; later steps use ``thread.state``); the turn is stored there.
2. ``memories`` (``chat/memory_step.py``): due reminders, then the memories that match.
3. ``recalled_fragments`` (``recall/inject.py``): past conversation fragments.

A step returns what it adds (``StepResult``, see ``chat/prepared.py``); only ``run_steps``
applies it to the request (``PreparedChat.apply``). The Messages and Responses protocols run
their own sequences through the same ``run_steps`` (``protocols/anthropic/pipeline.py``,
``protocols/responses/prepare.py``). ``after_reply`` / ``after_failure`` start the named hooks
as tracked background tasks: success hooks only after a natural end with status 200, failure
hooks (releasing claims) otherwise.

Everything here takes the pipeline's face, ``ChatFlow`` (``chat/resources.py``): the database
as configured, the background tasks, the chat resources (persona file, steps, clock, stores in
flight) and the turn store's hooks.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from pawwake.chat.auxiliary import is_auxiliary
from pawwake.chat.memory_step import MemoryStepParts, memories
from pawwake.chat.persona import resolve_persona
from pawwake.chat.prepared import (
    BoundStep,
    ChatRejected,
    ChatStep,
    PreparedChat,
    ReplyHook,
    StepContext,
    StepResult,
)
from pawwake.chat.resources import ChatFlow
from pawwake.chat.sessions import resolve_session_id
from pawwake.conversations.pending import PENDING_WAIT_SECONDS, wait_pending
from pawwake.database import connected_database
from pawwake.llm.sse import CapturedReply
from pawwake.partition.step import PartitionParts, partition_context
from pawwake.recall.faces import ConversationRecall
from pawwake.recall.inject import recalled_fragments
from pawwake.settings import Settings
from pawwake.tasks import BackgroundTasks

log = logging.getLogger(__name__)

def chat_steps(partition: PartitionParts, memory: MemoryStepParts, recall: ConversationRecall
               ) -> tuple[ChatStep, ...]:
    """A chat request's steps in order, each bound to its face (by the assembly)."""
    return (BoundStep(partition_context, partition), BoundStep(memories, memory),
            BoundStep(recalled_fragments, recall))


def apply_rewrites(body: dict[str, Any], settings: Settings) -> None:
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


async def prepare_chat(flow: ChatFlow, settings: Settings, headers: Mapping[str, str],
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
        client_session_id=resolve_session_id(headers, body), model=model,
        stream=bool(body.get("stream")), auxiliary=auxiliary,
        persist=flow.database is not None and not auxiliary, received_at=received_at)
    if auxiliary:
        # The client's own housekeeping: forwarded as sent (a missing model filled in).
        prepared.finalize(untouched=raw if body.get("model") else None)
        return prepared
    apply_rewrites(upstream, settings)
    drop_gateway_fields(upstream)
    prepared.stream = bool(upstream.get("stream"))
    await run_steps(flow, settings, prepared, flow.chat.steps)
    prepared.finalize()
    return prepared


async def run_steps(flow: ChatFlow, settings: Settings, prepared: PreparedChat,
                    steps: Sequence[ChatStep], *, step_settings: Settings | None = None
                    ) -> None:
    """What every protocol adds before forwarding: the persona, the turn writer (once the
    session's previous store ended), then its steps in order, each result applied before the
    next step runs (with ``step_settings`` if given)."""
    chat = flow.chat
    persona = resolve_persona(settings, chat.persona)
    if persona:
        prepared.apply(StepResult(
            system_parts=(persona,),
            injected=({"kind": "persona", "text": persona,
                       "source": "setting" if settings.SYSTEM_PROMPT
                       and settings.SYSTEM_PROMPT.strip() else "file"},)))
    if prepared.persist:
        prepared.apply(StepResult(hooks=(ReplyHook("store the turn",
                                                   on_success=flow.turn_writer(prepared)),)))
        await wait_pending(chat.pending, prepared.session_id, PENDING_WAIT_SECONDS)
    context = StepContext(settings=step_settings or settings,
                          database=connected_database(flow.database), clock=chat.clock)
    try:
        for step in steps:
            prepared.apply(await step(context, prepared))
    except BaseException:
        # A step refused, failed or was cancelled: release what earlier steps claimed.
        after_failure(flow.tasks, prepared, "not_forwarded")
        raise


def after_reply(tasks: BackgroundTasks, prepared: PreparedChat, reply: CapturedReply) -> None:
    """The reply ended naturally with 200: run the success hooks (the turn writer first
    stores the turn; ``prepared.stored`` tells when)."""
    hooks = [hook for hook in prepared.hooks if hook.on_success is not None]
    if hooks:
        prepared.store_scheduled = prepared.persist
        tasks.spawn(_run_success(hooks, reply), name="chat-after-success")


def after_incomplete(flow: ChatFlow, prepared: PreparedChat, partial: CapturedReply,
                     reason: str) -> None:
    """The client left mid-reply: release claims like any failure, and keep the user message
    with the partial reply, flagged incomplete."""
    tasks = flow.tasks
    after_failure(tasks, prepared, reason)
    if prepared.persist:
        prepared.store_scheduled = True
        tasks.spawn(flow.store_incomplete(prepared, partial), name="chat-store-incomplete")


def after_failure(tasks: BackgroundTasks, prepared: PreparedChat, reason: str) -> None:
    """No usable reply (client gone, upstream error or cut): run the failure hooks only."""
    hooks = [hook for hook in prepared.hooks if hook.on_failure is not None]
    if hooks:
        tasks.spawn(_run_failure(hooks, reason), name="chat-after-failure")


async def _run_success(hooks: list[ReplyHook], reply: CapturedReply) -> None:
    for hook in hooks:
        assert hook.on_success is not None
        try:
            await hook.on_success(reply)
        except Exception:
            log.exception("after-reply hook %r failed", hook.name)


async def _run_failure(hooks: list[ReplyHook], reason: str) -> None:
    for hook in hooks:
        assert hook.on_failure is not None
        try:
            await hook.on_failure(reason)
        except Exception:
            log.exception("after-failure hook %r failed", hook.name)
