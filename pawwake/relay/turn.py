"""One chat turn: its state while it is relayed, the protocol's hooks, and its end.

``ChatTurn`` is chat completions' turn; the other protocols (``protocols/anthropic/turn.py``,
``protocols/responses/turn.py``) subclass it and override only the hooks (how the request is
parsed and prepared, where it goes, how its reply is read, which event is held back, how a
cut stream ends). The relay itself is ``relay/stream.py``; the request's life, ``relay/serve.py``.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from typing import Any

import aiohttp
from aiohttp import web

from pawwake.app_faces import RELAY, face_of
from pawwake.chat.pipeline import prepare_chat
from pawwake.chat.prepared import ChatRejected, PreparedChat
from pawwake.chat.request_body import parse_chat_body
from pawwake.errors import openai_error
from pawwake.llm.sse import (
    CapturedReply,
    JsonCapture,
    SseCapture,
    capture_completion,
    done_event_start,
    new_capture,
)
from pawwake.llm.upstream import UpstreamFailure, forward
from pawwake.relay.ending import TurnEnd, end_turn, failed, finished, incomplete
from pawwake.replies_in_flight import SHUTDOWN_CODE, SHUTDOWN_MESSAGE, EndedForShutdown
from pawwake.settings import Settings

log = logging.getLogger(__name__)

# Appended when the provider breaks off a stream between two events, so clients (the OpenAI
# SDK raises on an ``error`` event) learn that the reply is incomplete.
_CUT_EVENT = (b'data: {"error":{"message":"The upstream API broke off the stream.",'
              b'"type":"api_error","code":"upstream_stream_cut"}}\n\n')
# Ends a stream still open when the shutdown grace is over (see replies_in_flight).
_SHUTDOWN_EVENT = (b'data: {"error":{"message":"' + SHUTDOWN_MESSAGE.encode()
                   + b'","type":"api_error","code":"' + SHUTDOWN_CODE.encode() + b'"}}\n\n')


class ShutdownRefusal(UpstreamFailure):
    """A request the shutdown stopped before its reply began streaming (503)."""

    status = 503
    code = SHUTDOWN_CODE


class ChatTurn:
    """One chat request served in a task of its own, so that a client leaving after the
    reply finished (aiohttp's test server cancels the handler; production gets
    ConnectionResetError) never stops the upstream read or the store.

    Its end is decided once (``end``): by the relay, by an upstream failure, or when its task
    is cancelled (``cut_short``); ``ended`` holds it from then on.
    """

    kind = "chat"  # names the log line and the task
    cut_event = _CUT_EVENT
    shutdown_event = _SHUTDOWN_EVENT
    track_health = True  # the provider's failures count towards the dashboard's health
    hold_rest_once_done = False  # everything after the held event is held too
    cut_when_incomplete = False  # a stream ending without its stop also gets ``cut_event``
    drain_seconds = 5.0  # how long a finished reply is read on for its usage once the client left

    def __init__(self, request: web.Request) -> None:
        self.request = request
        self.parts = face_of(request, RELAY)
        self.prepared: PreparedChat | None = None
        self.capture: SseCapture | JsonCapture | None = None
        self.forwarded = False  # from here on, a client that leaves keeps what it typed
        self.status = 500
        self.ended: TurnEnd | None = None
        self.drain_expired = False
        self.ended_by_shutdown = False
        self.upstream_content: aiohttp.StreamReader | None = None  # while relaying a stream
        self.task: asyncio.Task[web.StreamResponse] | None = None

    @property
    def finished(self) -> bool:
        """The reply is whole (or its end decided): a client leaving now changes nothing."""
        return self.ended is not None or (self.capture is not None and self.capture.finished)

    def end(self, end: TurnEnd) -> None:
        """The turn's end: its after-work starts and the provider's health is told (chat's
        turns only). Once per turn."""
        assert self.ended is None
        self.ended = end
        end_turn(self.parts.flow, self.prepared, end,
                 health=self.parts.upstream_health if self.track_health else None)

    def cut_short(self) -> TurnEnd:
        """How a turn whose task was cancelled (client gone, the drain bound, shutdown) ends:
        a reply that had finished upstream is stored; one forwarded is kept as incomplete."""
        capture = self.capture
        if capture is not None and capture.finished:
            # The reply had finished (its end did not come in time, or shutdown).
            log.info("a finished reply was stored without the end of its stream")
            return finished(capture.finish(), noted=False)
        reason = "shutdown" if self.ended_by_shutdown else "client_gone"
        if not self.forwarded:
            return failed(reason, noted=False)
        if self.ended_by_shutdown:
            log.warning("reply ended by shutdown before it began; turn kept as incomplete")
        else:
            log.info("client went away before the reply finished; turn kept as incomplete")
        return incomplete(capture.finish() if capture is not None else CapturedReply(), reason)

    def client_left(self) -> None:
        """The handler was cancelled: drop the reply unless it already finished upstream;
        a finished one is read on for its usage, at most ``drain_seconds``."""
        if self.task is None or self.task.done():
            return
        if not self.finished:
            self.task.cancel()
        elif self.ended is None:
            asyncio.get_running_loop().call_later(self.drain_seconds, self._drain_expired)

    def _drain_expired(self) -> None:
        if self.task is not None and not self.task.done() and self.ended is None:
            self.drain_expired = True
            self.task.cancel()

    def end_for_shutdown(self) -> None:
        """The shutdown grace is over: a stream being relayed ends with ``shutdown_event``;
        a request not streaming yet is answered 503 in the protocol's error shape."""
        if self.task is None or self.task.done() or self.finished:
            return
        self.ended_by_shutdown = True
        if self.upstream_content is not None:
            self.upstream_content.set_exception(EndedForShutdown())
        else:
            self.task.cancel()

    # The protocol's hooks: chat completions here, overridden by the other protocols.

    @staticmethod
    def parse_body(raw: bytes) -> dict[str, Any]:
        return parse_chat_body(raw)

    def rejected(self, exc: ChatRejected, error_type: str) -> web.Response:
        """The gateway's own refusal, in the protocol's error shape."""
        return openai_error(exc.status, exc.message, code=exc.code, param=exc.param,
                            error_type=error_type)

    def upstream_failed(self, exc: UpstreamFailure) -> web.Response:
        return openai_error(exc.status, str(exc), error_type="api_error", code=exc.code)

    async def prepare(self, settings: Settings, body: dict[str, Any], raw: bytes) -> PreparedChat:
        return await prepare_chat(self.parts.flow, settings, self.request.headers, body, raw,
                                  datetime.now(UTC))

    def forward(self, settings: Settings, prepared: PreparedChat
                ) -> AbstractAsyncContextManager[aiohttp.ClientResponse]:
        return forward(self.parts.http.session, settings, prepared.payload,
                       url=self.upstream_url(settings))

    def upstream_url(self, settings: Settings) -> str:
        return str(settings.chat_completions_url)

    def is_stream(self, prepared: PreparedChat, content_type: str) -> bool:
        return prepared.stream or "text/event-stream" in content_type.lower()

    def new_capture(self, content_type: str) -> SseCapture | JsonCapture:
        return new_capture(content_type)

    def hold_start(self, chunk: bytes) -> int:
        """Where the event held back until the turn is stored starts in ``chunk``."""
        return done_event_start(chunk)

    def capture_body(self, data: bytes) -> CapturedReply:
        return capture_completion(data)
