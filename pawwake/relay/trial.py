"""One chat turn sent from the dashboard's try-it page through the gateway's own pipeline.

The same ``prepare_chat`` and ``forward`` as /v1/chat/completions, called in process: the
gateway secret never leaves the server. Events are yielded as they happen - ``prepared``
(what was injected), ``chunk`` (provider bytes, unchanged), then ``done`` or ``failed``.
The turn is stored and learnt from like any other chat, and ends the same way
(``relay/ending.py``); ``done`` comes once it is stored, so the next message sees it. A page
that leaves mid-reply keeps the turn as incomplete.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import aiohttp

from pawwake.chat.pipeline import prepare_chat
from pawwake.chat.resources import ChatFlow
from pawwake.chat.sessions import SESSION_HEADER
from pawwake.conversations.pending import mark_pending, release_pending, wait_stored
from pawwake.llm.http import HttpClient
from pawwake.llm.sse import CapturedReply, new_capture
from pawwake.llm.upstream import UpstreamFailure, forward, read_body
from pawwake.llm.upstream_errors import error_body_text, log_upstream_error
from pawwake.llm.upstream_health import UpstreamHealth
from pawwake.relay.ending import TurnEnd, end_turn, failed, finished, incomplete
from pawwake.settings import Settings
from pawwake.text.messages import ChatMessage

log = logging.getLogger(__name__)

MAX_ERROR_CHARS = 300


def provider_message(data: bytes, settings: Settings) -> str:
    """The provider's own error message, secrets masked and shortened."""
    try:
        parsed = json.loads(data)
        message = parsed.get("error", {}).get("message") if isinstance(parsed, dict) else None
    except (ValueError, AttributeError):
        message = None
    text = error_body_text(str(message).encode() if message else data, settings)
    return text[:MAX_ERROR_CHARS]


@dataclass(frozen=True)
class TrialParts:
    """What the try-it page's turn works with: the chat pipeline, the HTTP client and the
    provider's health (a failed try is a failed chat)."""

    flow: ChatFlow
    http: HttpClient
    upstream_health: UpstreamHealth


async def trial_chat(parts: TrialParts, session_id: str, model: str,
                     messages: list[ChatMessage], *, settings: Settings
                     ) -> AsyncIterator[tuple[str, Any]]:
    """Run one streamed turn; see the module docstring for the events.

    Raises ChatRejected before anything is yielded when the pipeline refuses the request.
    Leaving the generator early (the page went away) releases the turn's claims."""
    body: dict[str, Any] = {"messages": messages, "stream": True}
    if model:
        body["model"] = model
    raw = json.dumps(body, ensure_ascii=False).encode("utf-8")
    prepared = await prepare_chat(parts.flow, settings, {SESSION_HEADER: session_id}, body, raw,
                                  datetime.now(UTC))
    ended: TurnEnd | None = None

    def end(how: TurnEnd) -> None:
        nonlocal ended
        ended = how
        end_turn(parts.flow, prepared, how, health=parts.upstream_health)

    capture = None
    forwarded = False
    try:
        yield "prepared", prepared
        forwarded = True
        try:
            async with forward(parts.http.session, settings, prepared.payload) as upstream:
                if upstream.status != 200:
                    data = await read_body(upstream)
                    log_upstream_error(upstream.status, data, prepared.body, settings)
                    end(failed("upstream_status", status=upstream.status))
                    yield "failed", {"status": upstream.status,
                                     "message": provider_message(data, settings)}
                    return
                capture = new_capture(upstream.headers.get("Content-Type")
                                      or "text/event-stream")
                cut = False
                while True:
                    try:
                        chunk = await upstream.content.readany()
                    except (aiohttp.ClientError, TimeoutError):
                        cut = True
                        break
                    if not chunk:
                        break
                    capture.feed(chunk)
                    if capture.finished or capture.done:
                        mark_pending(parts.flow.chat.pending, prepared)
                    yield "chunk", chunk
                reply = capture.finish()
        except UpstreamFailure as exc:
            end(failed(exc.code, status=exc.status))
            yield "failed", {"status": exc.status, "message": str(exc)}
            return
        if cut or not reply.complete:
            end(failed("upstream_cut" if cut else "upstream_incomplete"))
            yield "failed", {"status": 502, "message": "The reply ended early.",
                             "text": reply.content}
            return
        end(finished(reply))
        await wait_stored(prepared)
        yield "done", {"text": reply.content, "model": reply.model or prepared.model,
                       "usage": reply.raw_usage}
    finally:
        if ended is None and forwarded:  # the page left: keep what was typed, as chat does
            end(incomplete(capture.finish() if capture is not None else CapturedReply(),
                           "client_gone"))
        elif ended is None:
            end(failed("client_gone"))
        release_pending(parts.flow.chat.pending, prepared)
