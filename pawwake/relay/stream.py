"""The relay: the provider's answer reaches the client as it arrives, byte for byte.

A stream is written chunk by chunk the moment each arrives and read on the side by the turn's
capture; the event that ends it (``[DONE]``, Messages' ``message_stop``...) is held back until
the turn is stored. A body reply is read whole. What the relay saw decides the turn's end
(``Relayed.end``); the provider's own error status and body reach the client unchanged.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import aiohttp
from aiohttp import web

from pawwake.chat.prepared import PreparedChat
from pawwake.conversations.pending import mark_pending
from pawwake.llm.sse import SseCapture
from pawwake.llm.upstream import read_body, relay_headers
from pawwake.llm.upstream_errors import log_upstream_error
from pawwake.relay.ending import CLIENT_GONE, TurnEnd, failed, finished, incomplete
from pawwake.relay.turn import ChatTurn, ShutdownRefusal
from pawwake.replies_in_flight import EndedForShutdown
from pawwake.settings import Settings

log = logging.getLogger(__name__)


class _RelayResponse(web.StreamResponse):
    """Its headers leave together with the first chunk (one write, not two): the same
    buffering aiohttp uses for ``web.Response``. Without the attribute, headers just go first."""

    _send_headers_immediately = False


@dataclass
class Relayed:
    """How a relay ended: the response, the turn's end, and what is still unsent.

    ``held`` is the final event, sent only once the turn is stored; ``open`` True while the
    stream still needs its end written.
    """

    response: web.StreamResponse
    end: TurnEnd
    held: bytes = b""
    open: bool = False


async def relay(turn: ChatTurn, settings: Settings, prepared: PreparedChat) -> Relayed:
    """Forward the prepared body and send the provider's answer to the client."""
    turn.forwarded = True
    async with turn.forward(settings, prepared) as upstream:
        if upstream.status != 200:
            data = await read_body(upstream)
            log_upstream_error(upstream.status, data, prepared.body, settings)
            response = web.Response(status=upstream.status, body=data,
                                    headers=relay_headers(upstream.headers))
            return Relayed(response, failed("upstream_status", status=upstream.status))
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
        drain_until = loop.time() + turn.drain_seconds
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
            mark_pending(turn.parts.flow.chat.pending, prepared)
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
        except ConnectionResetError:
            gone = True
            drain_until = loop.time() + turn.drain_seconds
    reply = capture.finish()
    if gone and not capture.finished:
        log.info("client went away during a stream after %d bytes; turn kept as incomplete",
                 received)
        return Relayed(response, incomplete(reply, "client_gone"))
    if gone:
        log.info("client went away after the reply finished; read on to the end (%d bytes)",
                 received)
    if cut == "shutdown" and not capture.finished:
        if capture.at_event_boundary:
            await _write_quietly(response, turn.shutdown_event)
        await _write_quietly(response, b"", eof=True)
        log.warning("%s stream ended by shutdown after %d bytes; turn kept as incomplete",
                    turn.kind, received)
        return Relayed(response, incomplete(reply, "shutdown", status=ShutdownRefusal.status))
    if cut is not None and not capture.finished:
        if capture.at_event_boundary:
            await _write_quietly(response, turn.cut_event)
        await _write_quietly(response, b"", eof=True)
        log.warning("upstream broke off the stream after %d bytes (%s); reply not stored",
                    received, cut)
        return Relayed(response, failed("upstream_cut"))
    if cut is not None:
        log.info("upstream stream ended early (%s) after the finish_reason; reply stored", cut)
    if not reply.complete:
        if turn.cut_when_incomplete and not capture.finished and reply.error is None \
                and capture.at_event_boundary:
            await _write_quietly(response, turn.cut_event)
        await _write_quietly(response, held, eof=True)
        log.warning("upstream stream ended without [DONE] or finish_reason%s; reply not stored",
                    " (error event)" if reply.error is not None else "")
        return Relayed(response, failed("upstream_incomplete"))
    if isinstance(capture, SseCapture) and capture.malformed:
        log.debug("stream carried %d events that were not JSON", capture.malformed)
    return Relayed(response, finished(reply, status=CLIENT_GONE if gone else 200), held=held,
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
        return Relayed(response, failed("upstream_incomplete"))
    return Relayed(response, finished(reply))
