"""/v1/chat/completions and /v1/models: OpenAI-compatible chat through the gateway.

Replies are relayed byte for byte as they arrive; a capture reads a copy on the side. The
provider's own error status and body reach the client unchanged.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import aiohttp
from aiohttp import web

from pawwake import keys
from pawwake.chat.pipeline import (
    ChatRejected,
    ChatResources,
    PreparedChat,
    after_failure,
    after_reply,
    prepare_chat,
)
from pawwake.errors import openai_error
from pawwake.llm.sse import CapturedReply, SseCapture, capture_completion, new_capture
from pawwake.llm.upstream import UpstreamFailure, forward, read_body, relay_headers
from pawwake.llm.upstream_errors import log_upstream_error
from pawwake.llm.upstream_health import UpstreamHealth
from pawwake.text.json_input import JsonTooDeep, parse_chat_json

log = logging.getLogger(__name__)

MESSAGE_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
CLIENT_GONE = 499  # only ever logged: nobody is left to receive it

# Appended when the provider breaks off a stream between two events, so clients (the OpenAI
# SDK raises on an ``error`` event) learn that the reply is incomplete.
_CUT_EVENT = (b'data: {"error":{"message":"The upstream API broke off the stream.",'
              b'"type":"api_error","code":"upstream_stream_cut"}}\n\n')


def parse_chat_body(raw: bytes) -> dict[str, Any]:
    """The request body as a dict, or ChatRejected(400) saying what is wrong with it."""
    try:
        body = parse_chat_json(raw)
    except JsonTooDeep as exc:
        raise ChatRejected(400, "json_too_deep", str(exc)) from None
    except (ValueError, UnicodeDecodeError):
        raise ChatRejected(400, "invalid_json", "Request body is not valid JSON.") from None
    if not isinstance(body, dict):
        raise ChatRejected(400, "invalid_body", "Request body must be a JSON object.")
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
    """How a relay ended: the response sent, and the reply when it is a usable one."""

    response: web.StreamResponse
    reply: CapturedReply | None
    failure: str | None = None
    status: int = 200


async def chat_completions(request: web.Request) -> web.StreamResponse:
    started = time.perf_counter()
    app = request.app
    prepared: PreparedChat | None = None
    status = 500
    try:
        settings = await app[keys.CONFIG].fresh()
        raw = await request.read()
        body = parse_chat_body(raw)
        prepared = await prepare_chat(app, settings, request.headers, body, raw,
                                      datetime.now(UTC))
        relayed = await relay(request, settings, prepared)
        status = relayed.status
        note_upstream(app, prepared, relayed)
        if relayed.reply is not None:
            after_reply(app[keys.TASKS], prepared, relayed.reply)
        else:
            after_failure(app[keys.TASKS], prepared, relayed.failure or "failed")
        return relayed.response
    except ChatRejected as exc:
        status = exc.status
        return openai_error(exc.status, exc.message, code=exc.code, param=exc.param,
                            error_type="invalid_request_error" if exc.status < 500
                            else "api_error")
    except UpstreamFailure as exc:
        status = exc.status
        app[keys.UPSTREAM_HEALTH].failed(exc.status, prepared.model if prepared else "",
                                         exc.code)
        if prepared is not None:
            after_failure(app[keys.TASKS], prepared, exc.code)
        return openai_error(exc.status, str(exc), error_type="api_error", code=exc.code)
    except asyncio.CancelledError:
        status = CLIENT_GONE
        if prepared is not None:
            after_failure(app[keys.TASKS], prepared, "client_gone")
        raise
    except web.HTTPException as exc:
        status = exc.status
        raise
    finally:
        log.info("chat model=%s stream=%s memories=%d status=%d latency_ms=%.0f",
                 prepared.model if prepared else "-", prepared.stream if prepared else "-",
                 prepared.memory_count if prepared else 0, status,
                 (time.perf_counter() - started) * 1000)


def note_upstream(app: web.Application, prepared: PreparedChat, relayed: Relayed) -> None:
    """Remember the provider's last failure (a client that left is not the provider's)."""
    health = app[keys.UPSTREAM_HEALTH]
    if relayed.reply is not None:
        health.succeeded()
    elif relayed.failure not in (None, "client_gone"):
        health.failed(relayed.status, prepared.model, relayed.failure or "failed")


async def relay(request: web.Request, settings: Any, prepared: PreparedChat) -> Relayed:
    """Forward the prepared body and send the provider's answer to the client."""
    async with forward(request.app[keys.HTTP], settings, prepared.payload) as upstream:
        if upstream.status != 200:
            data = await read_body(upstream)
            log_upstream_error(upstream.status, data, prepared.body, settings)
            response = web.Response(status=upstream.status, body=data,
                                    headers=relay_headers(upstream.headers))
            return Relayed(response, None, "upstream_status", upstream.status)
        content_type = upstream.headers.get("Content-Type", "")
        if prepared.stream or "text/event-stream" in content_type.lower():
            return await relay_stream(request, upstream, content_type)
        return await relay_body(request, upstream)


async def relay_stream(request: web.Request, upstream: aiohttp.ClientResponse,
                       content_type: str) -> Relayed:
    """Write every chunk to the client the moment it arrives, unchanged, and tee it into the
    capture. Client gone: stop (the caller closes the upstream connection). Upstream cut:
    end the client's stream; the turn is not kept."""
    headers = relay_headers(upstream.headers)
    headers.setdefault("Content-Type", "text/event-stream")
    headers["Cache-Control"] = "no-cache"
    headers["X-Accel-Buffering"] = "no"
    response = _RelayResponse(status=200, headers=headers)
    capture = new_capture(content_type or "text/event-stream")
    content = upstream.content
    received = 0
    cut: str | None = None
    try:
        await response.prepare(request)
        while True:
            try:
                chunk = await content.readany()
            except (aiohttp.ClientError, TimeoutError) as exc:
                cut = type(exc).__name__
                break
            if not chunk:
                break
            received += len(chunk)
            await response.write(chunk)
            capture.feed(chunk)
        if cut is not None and capture.at_event_boundary:
            await response.write(_CUT_EVENT)
        await response.write_eof()
    except ConnectionResetError:
        log.info("client went away during a stream after %d bytes", received)
        return Relayed(response, None, "client_gone", CLIENT_GONE)
    reply = capture.finish()
    if cut is not None:
        log.warning("upstream broke off the stream after %d bytes (%s); reply not stored",
                    received, cut)
        return Relayed(response, None, "upstream_cut")
    if not reply.complete:
        log.warning("upstream stream ended without [DONE] or finish_reason%s; reply not stored",
                    " (error event)" if reply.error is not None else "")
        return Relayed(response, None, "upstream_incomplete")
    if isinstance(capture, SseCapture) and capture.malformed:
        log.debug("stream carried %d events that were not JSON", capture.malformed)
    return Relayed(response, reply)


async def relay_body(request: web.Request, upstream: aiohttp.ClientResponse) -> Relayed:
    """A non-stream reply: read it whole, send it, then capture it."""
    data = await read_body(upstream)
    response = web.Response(status=200, body=data, headers=relay_headers(upstream.headers))
    try:
        await response.prepare(request)
        await response.write_eof()
    except ConnectionResetError:
        return Relayed(response, None, "client_gone", CLIENT_GONE)
    reply = capture_completion(data)
    if not reply.complete:
        log.warning("upstream answered 200 without a usable completion; reply not stored")
        return Relayed(response, None, "upstream_incomplete")
    return Relayed(response, reply)


async def list_models(request: web.Request) -> web.Response:
    """DEFAULT_MODEL first, then the provider's models: fresh when it answers in time, else
    the last list it gave (a failing provider is not waited on again for a while)."""
    app = request.app
    settings = await app[keys.CONFIG].fresh()
    default = settings["DEFAULT_MODEL"]
    data: list[dict[str, Any]] = []
    if default:
        data.append({"id": default, "object": "model", "created": 0, "owned_by": "pawwake"})
    listed = await app[keys.MODELS].quick_for(app[keys.HTTP], settings)
    for model in listed.models if listed else ():
        if model["id"] != default:
            data.append({"id": model["id"], "object": "model", "created": 0,
                         "owned_by": listed.source})
    return web.json_response({"object": "list", "data": data})


def setup(app: web.Application) -> None:
    app[keys.CHAT] = ChatResources()
    app[keys.UPSTREAM_HEALTH] = UpstreamHealth()
    app.router.add_post("/v1/chat/completions", chat_completions, name="chat_completions")
    app.router.add_get("/v1/models", list_models, name="models")
