"""/v1/chat/completions and /v1/models: OpenAI-compatible chat through the gateway.

Replies are relayed byte for byte as they arrive; a capture reads a copy on the side. The
provider's own error status and body reach the client unchanged.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import aiohttp
from aiohttp import web

from pawwake.chat.pipeline import after_failure, after_incomplete, after_reply, prepare_chat
from pawwake.chat.prepared import ChatRejected, PreparedChat
from pawwake.chat.request_body import json_object_body
from pawwake.conversations.pending import mark_pending, release_pending, wait_stored
from pawwake.errors import openai_error
from pawwake.llm.sse import (
    CapturedReply,
    JsonCapture,
    SseCapture,
    capture_completion,
    done_event_start,
    new_capture,
)
from pawwake.llm.upstream import UpstreamFailure, forward, read_body, relay_headers
from pawwake.llm.upstream_errors import log_upstream_error
from pawwake.replies_in_flight import SHUTDOWN_CODE, SHUTDOWN_MESSAGE, EndedForShutdown
from pawwake.services import Services, services_of
from pawwake.settings import Settings

log = logging.getLogger(__name__)

MESSAGE_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
CLIENT_GONE = 499  # only ever logged: nobody is left to receive it
DRAIN_SECONDS = 5.0  # how long a finished reply is read on for its usage once the client left

# Appended when the provider breaks off a stream between two events, so clients (the OpenAI
# SDK raises on an ``error`` event) learn that the reply is incomplete.
_CUT_EVENT = (b'data: {"error":{"message":"The upstream API broke off the stream.",'
              b'"type":"api_error","code":"upstream_stream_cut"}}\n\n')
# Ends a stream still open when the shutdown grace is over (see replies_in_flight).
_SHUTDOWN_EVENT = (b'data: {"error":{"message":"' + SHUTDOWN_MESSAGE.encode()
                   + b'","type":"api_error","code":"' + SHUTDOWN_CODE.encode() + b'"}}\n\n')


class ShutdownRefusal(UpstreamFailure):
    status = 503
    code = SHUTDOWN_CODE


def parse_chat_body(raw: bytes) -> dict[str, Any]:
    """The request body as a dict, or ChatRejected(400) saying what is wrong with it."""
    body = json_object_body(raw)
    messages = body.get("messages")
    if messages is None:
        raise ChatRejected(400, "missing_messages", "'messages' is required.", param="messages")
    if not isinstance(messages, list) or not messages:
        raise ChatRejected(400, "invalid_messages", "'messages' must be a non-empty array.",
                           param="messages")
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in MESSAGE_ROLES:
            raise ChatRejected(
                400, "invalid_messages",
                f"messages[{index}] must be an object with a role of "
                + ", ".join(sorted(MESSAGE_ROLES)) + ".", param=f"messages[{index}]")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise ChatRejected(400, "invalid_model", "'model' must be a string.", param="model")
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise ChatRejected(400, "invalid_stream", "'stream' must be true or false.",
                           param="stream")
    return body


class _RelayResponse(web.StreamResponse):
    """Its headers leave together with the first chunk (one write, not two): the same
    buffering aiohttp uses for ``web.Response``. Without the attribute, headers just go first."""

    _send_headers_immediately = False


@dataclass
class Relayed:
    """How a relay ended: the response, the reply when usable, and what is still unsent.

    ``partial`` is what the client got before it left mid-reply (kept as an incomplete turn);
    ``held`` the ``[DONE]`` event, sent only once the turn is stored; ``open`` True while the
    stream still needs its end written.
    """

    response: web.StreamResponse
    reply: CapturedReply | None
    failure: str | None = None
    status: int = 200
    partial: CapturedReply | None = None
    held: bytes = b""
    open: bool = False


class ChatTurn:
    """One chat request served in a task of its own, so that a client leaving after the
    reply finished (aiohttp's test server cancels the handler; production gets
    ConnectionResetError) never stops the upstream read or the store.

    Other protocols subclass it and override the protocol hooks below (how the request is
    prepared, where it goes, how its reply is read, which event is held back, how a cut
    stream ends); the relay, the read-on and the store are shared.
    """

    kind = "chat"  # names the log line and the task
    cut_event = _CUT_EVENT
    shutdown_event = _SHUTDOWN_EVENT
    track_health = True  # the provider's failures count towards the dashboard's health
    hold_rest_once_done = False  # everything after the held event is held too
    cut_when_incomplete = False  # a stream ending without its stop also gets ``cut_event``

    def __init__(self, request: web.Request) -> None:
        self.request = request
        self.services = services_of(request)
        self.prepared: PreparedChat | None = None
        self.capture: SseCapture | JsonCapture | None = None
        self.forwarded = False
        self.sent = False  # a byte of the reply reached the client
        self.status = 500
        self.concluding = False
        self.drain_expired = False
        self.ended_by_shutdown = False
        self.upstream_content: aiohttp.StreamReader | None = None  # while relaying a stream
        self.task: asyncio.Task[web.StreamResponse] | None = None

    @property
    def finished(self) -> bool:
        """The reply is whole (or being stored): a client leaving now changes nothing."""
        return self.concluding or (self.capture is not None and self.capture.finished)

    def client_left(self) -> None:
        """The handler was cancelled: drop the reply unless it already finished upstream;
        a finished one is read on for its usage, at most DRAIN_SECONDS."""
        if self.task is None or self.task.done():
            return
        if not self.finished:
            self.task.cancel()
        elif not self.concluding:
            asyncio.get_running_loop().call_later(DRAIN_SECONDS, self._drain_expired)

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

    @staticmethod
    def parse_body(raw: bytes) -> dict[str, Any]:
        return parse_chat_body(raw)

    def rejected(self, exc: ChatRejected, error_type: str) -> web.Response:
        """The gateway's own refusal, in the protocol's error shape."""
        return openai_error(exc.status, exc.message, code=exc.code, param=exc.param,
                            error_type=error_type)

    def upstream_failed(self, exc: UpstreamFailure) -> web.Response:
        return openai_error(exc.status, str(exc), error_type="api_error", code=exc.code)

    def forward(self, settings: Settings, prepared: PreparedChat
                ) -> AbstractAsyncContextManager[aiohttp.ClientResponse]:
        return forward(self.services.http, settings, prepared.payload,
                       url=self.upstream_url(settings))

    def is_stream(self, prepared: PreparedChat, content_type: str) -> bool:
        return prepared.stream or "text/event-stream" in content_type.lower()

    async def prepare(self, settings: Settings, body: dict[str, Any], raw: bytes) -> PreparedChat:
        return await prepare_chat(self.services, settings, self.request.headers, body, raw,
                                  datetime.now(UTC))

    def upstream_url(self, settings: Settings) -> str:
        return str(settings.chat_completions_url)

    def new_capture(self, content_type: str) -> SseCapture | JsonCapture:
        return new_capture(content_type)

    def hold_start(self, chunk: bytes) -> int:
        """Where the event held back until the turn is stored starts in ``chunk``."""
        return done_event_start(chunk)

    def capture_body(self, data: bytes) -> CapturedReply:
        return capture_completion(data)

    def _drain_expired(self) -> None:
        if self.task is not None and not self.task.done() and not self.concluding:
            self.drain_expired = True
            self.task.cancel()

    async def run(self, settings: Settings, body: dict[str, Any], raw: bytes
                  ) -> web.StreamResponse:
        services = self.services
        try:
            self.prepared = await self.prepare(settings, body, raw)
            relayed = await relay(self, settings, self.prepared)
            self.status = relayed.status
            if self.track_health:
                note_upstream(services, self.prepared, relayed)
            await self.conclude(relayed)
            return relayed.response
        except ChatRejected as exc:
            self.status = exc.status
            return self.rejected(exc, "invalid_request_error" if exc.status < 500
                                 else "api_error")
        except UpstreamFailure as exc:
            self.status = exc.status
            if self.track_health:
                services.upstream_health.failed(
                    exc.status, self.prepared.model if self.prepared else "", exc.code)
            if self.prepared is not None:
                after_failure(services.tasks, self.prepared, exc.code)
            return self.upstream_failed(exc)
        except asyncio.CancelledError:
            self.status = CLIENT_GONE
            if self.prepared is not None and not self.concluding and self.capture is not None \
                    and self.capture.finished:
                # The reply had finished (its end did not come in time, or shutdown).
                log.info("a finished reply was stored without the end of its stream")
                after_reply(services.tasks, self.prepared, self.capture.finish())
                if self.drain_expired:
                    return web.Response(status=CLIENT_GONE)
            elif self.prepared is not None and not self.concluding:
                self.left_early()
            raise
        finally:
            if self.prepared is not None:
                release_pending(services.chat.pending, self.prepared)

    def left_early(self) -> None:
        """The client went away before the reply finished: keep what it typed (and what it
        saw) as an incomplete turn once the request was forwarded."""
        prepared = self.prepared
        assert prepared is not None
        partial = self.capture.finish() if self.capture is not None and self.forwarded \
            else None
        reason = "shutdown" if self.ended_by_shutdown else "client_gone"
        if self.forwarded:
            if self.ended_by_shutdown:
                log.warning("reply ended by shutdown before it began; turn kept as incomplete")
            else:
                log.info("client went away before the reply finished; turn kept as incomplete")
            after_incomplete(self.services, prepared, partial or CapturedReply(), reason)
        else:
            after_failure(self.services.tasks, prepared, reason)

    async def conclude(self, relayed: Relayed) -> None:
        """Store what the relay produced, then release the held end of the stream."""
        prepared = self.prepared
        assert prepared is not None
        self.concluding = True
        if relayed.reply is not None:
            after_reply(self.services.tasks, prepared, relayed.reply)
            await wait_stored(prepared)
        elif relayed.partial is not None:
            after_incomplete(self.services, prepared, relayed.partial, relayed.failure or "gone")
        else:
            after_failure(self.services.tasks, prepared, relayed.failure or "failed")
        if relayed.open:
            try:
                if relayed.held:
                    await relayed.response.write(relayed.held)
                await relayed.response.write_eof()
            except ConnectionResetError:
                log.debug("client went away before the end of a stored stream")


def turn_handler(turn_class: type[ChatTurn]) -> Handler:
    """The request handler of a protocol, which differs from chat's only in its turn's hooks:
    read and check the request, then serve it in the turn's own task (see ChatTurn)."""

    async def handler(request: web.Request) -> web.StreamResponse:
        started = time.perf_counter()
        turn = turn_class(request)
        try:
            settings = await turn.services.config.fresh()
            raw = await request.read()
            body = turn.parse_body(raw)
            turn.task = turn.services.tasks.spawn(turn.run(settings, body, raw),
                                                  name=f"{turn.kind}-turn")
            in_flight = turn.services.in_flight
            in_flight.add(turn)
            turn.task.add_done_callback(lambda _task: in_flight.discard(turn))
            return await asyncio.shield(turn.task)
        except ChatRejected as exc:
            turn.status = exc.status
            return turn.rejected(exc, "invalid_request_error")
        except asyncio.CancelledError:
            if _ended_for_shutdown(turn):
                turn.status = ShutdownRefusal.status
                return turn.upstream_failed(ShutdownRefusal(SHUTDOWN_MESSAGE))
            turn.status = CLIENT_GONE
            turn.client_left()
            raise
        except web.HTTPException as exc:
            turn.status = exc.status
            raise
        finally:
            prepared = turn.prepared
            log.info("%s model=%s stream=%s memories=%d status=%d latency_ms=%.0f", turn.kind,
                     prepared.model if prepared else "-", prepared.stream if prepared else "-",
                     prepared.memory_count if prepared else 0, turn.status,
                     (time.perf_counter() - started) * 1000)

    return handler


def _ended_for_shutdown(turn: ChatTurn) -> bool:
    """The turn's task was cancelled by the shutdown, not this handler by its client."""
    current = asyncio.current_task()
    return turn.ended_by_shutdown and turn.task is not None and turn.task.cancelled() \
        and current is not None and not current.cancelling()


chat_completions = turn_handler(ChatTurn)


def note_upstream(services: Services, prepared: PreparedChat, relayed: Relayed) -> None:
    """Remember the provider's last failure (a client that left is not the provider's)."""
    health = services.upstream_health
    if relayed.reply is not None:
        health.succeeded()
    elif relayed.failure not in (None, "client_gone", "shutdown"):
        health.failed(relayed.status, prepared.model, relayed.failure or "failed")


async def relay(turn: ChatTurn, settings: Settings, prepared: PreparedChat) -> Relayed:
    """Forward the prepared body and send the provider's answer to the client."""
    turn.forwarded = True  # from here on, a client that leaves keeps what it typed
    async with turn.forward(settings, prepared) as upstream:
        if upstream.status != 200:
            data = await read_body(upstream)
            log_upstream_error(upstream.status, data, prepared.body, settings)
            response = web.Response(status=upstream.status, body=data,
                                    headers=relay_headers(upstream.headers))
            return Relayed(response, None, "upstream_status", upstream.status)
        content_type = upstream.headers.get("Content-Type", "")
        if turn.is_stream(prepared, content_type):
            return await relay_stream(turn, upstream, content_type)
        return await relay_body(turn, upstream)


async def relay_stream(turn: ChatTurn, upstream: aiohttp.ClientResponse,
                       content_type: str) -> Relayed:
    """Write every chunk to the client the moment it arrives, unchanged, and tee it into the
    capture. The ``[DONE]`` event is held back until the turn is stored, so a follow-up sent
    the moment it arrives sees this turn. Client gone mid-reply: stop (the caller closes the
    upstream connection), the turn is kept as incomplete; client gone after the finish_reason:
    read on to the end (bounded) for the usage. Upstream cut: end the client's stream."""
    prepared = turn.prepared
    assert prepared is not None
    headers = relay_headers(upstream.headers)
    headers.setdefault("Content-Type", "text/event-stream")
    headers["Cache-Control"] = "no-cache"
    headers["X-Accel-Buffering"] = "no"
    response = _RelayResponse(status=200, headers=headers)
    capture = turn.capture = turn.new_capture(content_type or "text/event-stream")
    content = upstream.content
    received = 0
    cut: str | None = None
    gone = False
    held = b""
    drain_until = 0.0
    loop = asyncio.get_running_loop()
    try:
        await response.prepare(turn.request)
        turn.upstream_content = content
    except ConnectionResetError:
        gone = True
        drain_until = loop.time() + DRAIN_SECONDS
    while not gone or capture.finished:
        try:
            if gone:
                async with asyncio.timeout_at(drain_until):
                    chunk = await content.readany()
            else:
                chunk = await content.readany()
        except EndedForShutdown:
            cut = "shutdown"
            break
        except (aiohttp.ClientError, TimeoutError) as exc:
            cut = type(exc).__name__
            break
        if not chunk:
            break
        received += len(chunk)
        was_done = turn.hold_rest_once_done and capture.done
        capture.feed(chunk)
        if capture.finished or capture.done:
            mark_pending(turn.services.chat.pending, prepared)
        if gone:
            continue
        if held or capture.done:
            split = len(chunk) if held or was_done else turn.hold_start(chunk)
            held += chunk[split:]
            chunk = chunk[:split]
            if not chunk:
                continue
        try:
            await response.write(chunk)
            turn.sent = True
        except ConnectionResetError:
            gone = True
            drain_until = loop.time() + DRAIN_SECONDS
    reply = capture.finish()
    if gone and not capture.finished:
        log.info("client went away during a stream after %d bytes; turn kept as incomplete",
                 received)
        return Relayed(response, None, "client_gone", CLIENT_GONE, partial=reply)
    if gone:
        log.info("client went away after the reply finished; read on to the end (%d bytes)",
                 received)
    if cut == "shutdown" and not capture.finished:
        if capture.at_event_boundary:
            await _write_quietly(response, turn.shutdown_event)
        await _write_quietly(response, b"", eof=True)
        log.warning("%s stream ended by shutdown after %d bytes; turn kept as incomplete",
                    turn.kind, received)
        return Relayed(response, None, "shutdown", ShutdownRefusal.status, partial=reply)
    if cut is not None and not capture.finished:
        if capture.at_event_boundary:
            await _write_quietly(response, turn.cut_event)
        await _write_quietly(response, b"", eof=True)
        log.warning("upstream broke off the stream after %d bytes (%s); reply not stored",
                    received, cut)
        return Relayed(response, None, "upstream_cut")
    if cut is not None:
        log.info("upstream stream ended early (%s) after the finish_reason; reply stored", cut)
    if not reply.complete:
        if turn.cut_when_incomplete and not capture.finished and reply.error is None \
                and capture.at_event_boundary:
            await _write_quietly(response, turn.cut_event)
        await _write_quietly(response, held, eof=True)
        log.warning("upstream stream ended without [DONE] or finish_reason%s; reply not stored",
                    " (error event)" if reply.error is not None else "")
        return Relayed(response, None, "upstream_incomplete")
    if isinstance(capture, SseCapture) and capture.malformed:
        log.debug("stream carried %d events that were not JSON", capture.malformed)
    return Relayed(response, reply, status=CLIENT_GONE if gone else 200, held=held,
                   open=not gone)


async def _write_quietly(response: web.StreamResponse, data: bytes, *, eof: bool = False
                         ) -> None:
    try:
        if data:
            await response.write(data)
        if eof:
            await response.write_eof()
    except ConnectionResetError:
        pass


async def relay_body(turn: ChatTurn, upstream: aiohttp.ClientResponse) -> Relayed:
    """A non-stream reply: read it whole, capture it, and (by the caller) store it before
    the body is sent, so the next request sees this turn."""
    data = await read_body(upstream)
    response = web.Response(status=200, body=data, headers=relay_headers(upstream.headers))
    reply = turn.capture_body(data)
    if not reply.complete:
        log.warning("upstream answered 200 without a usable completion; reply not stored")
        return Relayed(response, None, "upstream_incomplete")
    return Relayed(response, reply)


async def list_models(request: web.Request) -> web.Response:
    """DEFAULT_MODEL first, then the provider's models: fresh when it answers in time, else
    the last list it gave (a failing provider is not waited on again for a while)."""
    services = services_of(request)
    settings = await services.config.fresh()
    default = settings.DEFAULT_MODEL
    data: list[dict[str, Any]] = []
    if default:
        data.append({"id": default, "object": "model", "created": 0, "owned_by": "pawwake"})
    listed = await services.models.quick_for(services.http, settings)
    if listed is not None:
        for model in listed.models:
            if model["id"] != default:
                data.append({"id": model["id"], "object": "model", "created": 0,
                             "owned_by": listed.source})
    return web.json_response({"object": "list", "data": data})


def setup(app: web.Application) -> None:
    """Routes of the /v1 sub-app (the chat resources are ``Services.chat``, built with the
    gateway's services)."""
    app.router.add_post("/chat/completions", chat_completions, name="chat_completions")
    app.router.add_get("/models", list_models, name="models")
