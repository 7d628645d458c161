"""/v1/messages and /v1/messages/count_tokens: Anthropic's Messages API through the gateway.

A Messages request gets what a chat request gets (persona, memories, reminders, the stored
turn, token usage); errors of the gateway's own come in Anthropic's shape, the provider's
status and body unchanged.
"""

from __future__ import annotations

import logging

from aiohttp import web

from pawwake.app_faces import HTTP, face_of, settings_of
from pawwake.errors import anthropic_error
from pawwake.llm.upstream import UpstreamFailure, read_body, relay_headers
from pawwake.protocols.anthropic.turn import MessagesTurn
from pawwake.protocols.anthropic.upstream import forward_messages, upstream_url
from pawwake.relay.serve import turn_handler

log = logging.getLogger(__name__)  # the one line per request

messages = turn_handler(MessagesTurn, log)  # POST /v1/messages


async def count_tokens(request: web.Request) -> web.Response:
    """Passed through as sent: the provider counts the client's own request."""
    settings = await settings_of(request)
    raw = await request.read()
    url = upstream_url(settings, request.query_string, "/count_tokens")
    try:
        async with forward_messages(face_of(request, HTTP).session, settings, url, raw,
                                    request.headers) as upstream:
            data = await read_body(upstream)
            return web.Response(status=upstream.status, body=data,
                                headers=relay_headers(upstream.headers))
    except UpstreamFailure as exc:
        return anthropic_error(exc.status, str(exc), error_type="api_error")


def setup(app: web.Application) -> None:
    """Routes of the /v1/messages sub-app (its steps: MESSAGES_STEPS in protocols/anthropic/pipeline.py)."""
    app.router.add_post("", messages, name="messages")
    app.router.add_post("/count_tokens", count_tokens, name="messages_count_tokens")
