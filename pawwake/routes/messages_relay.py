"""The Messages relay: the provider's bytes reach the client as they arrive, unchanged.

Same behaviour as chat (``pawwake.routes.chat``): the ``message_stop`` event is held back
until the turn is stored (so a follow-up sees it); a client leaving mid-reply keeps the turn
as incomplete; a client leaving after the stop reason is read on (bounded) for the usage; a
stream the provider cuts ends with an ``error`` event in Anthropic's shape. The provider's
error status and body reach the client unchanged.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any

import aiohttp
from aiohttp import web

from pawwake import keys
from pawwake.chat.pipeline import ChatRejected, after_failure, after_reply
from pawwake.chat.turns import mark_pending, release_pending
from pawwake.errors import anthropic_error
from pawwake.llm.upstream import UpstreamFailure, read_body, relay_headers
from pawwake.llm.upstream_errors import log_upstream_error
from pawwake.protocols.anthropic.capture import (
    MessagesSseCapture,
    capture_message,
    stop_event_start,
)
from pawwake.protocols.anthropic.pipeline import PreparedMessages, prepare_messages
from pawwake.protocols.anthropic.upstream import forward_messages, messages_url
from pawwake.routes.chat import CLIENT_GONE, DRAIN_SECONDS, ChatTurn, Relayed

log = logging.getLogger(__name__)

CUT_EVENT = (b'event: error\ndata: {"type":"error","error":{"type":"api_error",'
             b'"message":"The upstream API broke off the stream."}}\n\n')


class _RelayResponse(web.StreamResponse):
    """Headers leave with the first chunk (one write, not two)."""

    _send_headers_immediately = False


class MessagesTurn(ChatTurn):
    """One Messages request in a task of its own (see ChatTurn): only preparing, relaying
    and the error shape differ."""

    capture: MessagesSseCapture | None  # type: ignore[assignment]

    async def run(self, settings: Any, body: dict[str, Any], raw: bytes
                  ) -> web.StreamResponse:
        app = self.app
        try:
            self.prepared = await prepare_messages(app, settings, self.request.headers, body,
                                                   raw, datetime.now(UTC))
            relayed = await relay(self, settings, self.prepared)
            self.status = relayed.status
            await self.conclude(relayed)
            return relayed.response
        except ChatRejected as exc:
            self.status = exc.status
            return anthropic_error(exc.status, exc.message)
        except UpstreamFailure as exc:
            self.status = exc.status
            if self.prepared is not None:
                after_failure(app[keys.TASKS], self.prepared, exc.code)
            return anthropic_error(exc.status, str(exc), error_type="api_error")
        except asyncio.CancelledError:
            self.status = CLIENT_GONE
            if self.prepared is not None and not self.concluding and self.capture is not None \
                    and self.capture.finished:
                log.info("a finished reply was stored without the end of its stream")
                after_reply(app[keys.TASKS], self.prepared, self.capture.finish())
                if self.drain_expired:
                    return web.Response(status=CLIENT_GONE)
            elif self.prepared is not None and not self.concluding:
                self.left_early()
            raise
        finally:
            if self.prepared is not None:
                release_pending(app, self.prepared)


def upstream_url(settings: Any, request: web.Request, suffix: str = "") -> str:
    """The provider's endpoint plus the client's query string (Claude Code adds one)."""
    url = messages_url(settings) + suffix
    if request.query_string:
        url += ("&" if "?" in url else "?") + request.query_string
    return url


async def relay(turn: MessagesTurn, settings: Any, prepared: PreparedMessages) -> Relayed:
    """Forward the prepared body and send the provider's answer to the client."""
    turn.forwarded = True
    url = upstream_url(settings, turn.request)
    async with forward_messages(turn.app[keys.HTTP], settings, url, prepared.payload,
                                prepared.client_headers) as upstream:
        if upstream.status != 200:
            data = await read_body(upstream)
            log_upstream_error(upstream.status, data, prepared.body, settings)
            response = web.Response(status=upstream.status, body=data,
                                    headers=relay_headers(upstream.headers))
            return Relayed(response, None, "upstream_status", upstream.status)
        content_type = upstream.headers.get("Content-Type", "")
        if "text/event-stream" in content_type.lower():
            return await relay_stream(turn, upstream)
        return await relay_body(upstream)


async def relay_stream(turn: MessagesTurn, upstream: aiohttp.ClientResponse) -> Relayed:
    """Write every chunk the moment it arrives and tee it into the capture; hold back
    ``message_stop`` until the turn is stored."""
    prepared = turn.prepared
    assert prepared is not None
    headers = relay_headers(upstream.headers)
    headers.setdefault("Content-Type", "text/event-stream")
    headers["Cache-Control"] = "no-cache"
    headers["X-Accel-Buffering"] = "no"
    response = _RelayResponse(status=200, headers=headers)
    capture = turn.capture = MessagesSseCapture()
    content = upstream.content
    received = 0
    cut: str | None = None
    gone = False
    held = b""
    drain_until = 0.0
    loop = asyncio.get_running_loop()
    try:
        await response.prepare(turn.request)
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
        except (aiohttp.ClientError, TimeoutError) as exc:
            cut = type(exc).__name__
            break
        if not chunk:
            break
        received += len(chunk)
        was_done = capture.done
        capture.feed(chunk)
        if capture.finished:
            mark_pending(turn.app, prepared)
        if gone:
            continue
        if held or capture.done:
            split = len(chunk) if held or was_done else stop_event_start(chunk)
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
        log.info("client went away during a messages stream after %d bytes; turn kept as "
                 "incomplete", received)
        return Relayed(response, None, "client_gone", CLIENT_GONE, partial=reply)
    if cut is not None and not capture.finished:
        if capture.at_event_boundary:
            await _write_quietly(response, CUT_EVENT)
        await _write_quietly(response, b"", eof=True)
        log.warning("upstream broke off a messages stream after %d bytes (%s); reply not "
                    "stored", received, cut)
        return Relayed(response, None, "upstream_cut")
    if not reply.complete:
        if not capture.finished and reply.error is None and capture.at_event_boundary:
            await _write_quietly(response, CUT_EVENT)
        await _write_quietly(response, held, eof=True)
        log.warning("messages stream ended without a stop reason%s; reply not stored",
                    " (error event)" if reply.error is not None else "")
        return Relayed(response, None, "upstream_incomplete")
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


async def relay_body(upstream: aiohttp.ClientResponse) -> Relayed:
    """A non-stream reply: read whole, captured, stored (by the caller) before it is sent."""
    data = await read_body(upstream)
    response = web.Response(status=200, body=data, headers=relay_headers(upstream.headers))
    reply = capture_message(data)
    if not reply.complete:
        log.warning("messages upstream answered 200 without a usable message; not stored")
        return Relayed(response, None, "upstream_incomplete")
    return Relayed(response, reply)

