"""/v1/messages and /v1/messages/count_tokens: Anthropic's Messages API through the gateway.

A Messages request gets what a chat request gets (persona, memories, reminders, the stored
turn, token usage); errors of the gateway's own come in Anthropic's shape, the provider's
status and body unchanged.
"""

from __future__ import annotations

import asyncio
import logging
import time

from aiohttp import web

from pawwake import keys
from pawwake.chat.pipeline import ChatRejected
from pawwake.errors import anthropic_error
from pawwake.llm.upstream import UpstreamFailure, read_body, relay_headers
from pawwake.protocols.anthropic.pipeline import setup_messages_steps
from pawwake.protocols.anthropic.request import parse_messages_body
from pawwake.protocols.anthropic.upstream import forward_messages
from pawwake.routes.chat import CLIENT_GONE
from pawwake.routes.messages_relay import MessagesTurn, upstream_url

log = logging.getLogger(__name__)


async def messages(request: web.Request) -> web.StreamResponse:
    started = time.perf_counter()
    app = request.app
    turn = MessagesTurn(request)
    try:
        settings = await app[keys.CONFIG].fresh()
        raw = await request.read()
        body = parse_messages_body(raw)
        turn.task = app[keys.TASKS].spawn(turn.run(settings, body, raw), name="messages-turn")
        return await asyncio.shield(turn.task)
    except ChatRejected as exc:
        turn.status = exc.status
        return anthropic_error(exc.status, exc.message)
    except asyncio.CancelledError:
        turn.status = CLIENT_GONE
        turn.client_left()
        raise
    except web.HTTPException as exc:
        turn.status = exc.status
        raise
    finally:
        prepared = turn.prepared
        log.info("messages model=%s stream=%s memories=%d status=%d latency_ms=%.0f",
                 prepared.model if prepared else "-", prepared.stream if prepared else "-",
                 prepared.memory_count if prepared else 0, turn.status,
                 (time.perf_counter() - started) * 1000)


async def count_tokens(request: web.Request) -> web.Response:
    """Passed through as sent: the provider counts the client's own request."""
    app = request.app
    settings = await app[keys.CONFIG].fresh()
    raw = await request.read()
    url = upstream_url(settings, request, "/count_tokens")
    try:
        async with forward_messages(app[keys.HTTP], settings, url, raw,
                                    request.headers) as upstream:
            data = await read_body(upstream)
            return web.Response(status=upstream.status, body=data,
                                headers=relay_headers(upstream.headers))
    except UpstreamFailure as exc:
        return anthropic_error(exc.status, str(exc), error_type="api_error")


def setup(app: web.Application) -> None:
    setup_messages_steps(app)
    app.router.add_post("/v1/messages", messages, name="messages")
    app.router.add_post("/v1/messages/count_tokens", count_tokens, name="messages_count_tokens")
