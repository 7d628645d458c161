"""``POST /v1/responses``: OpenAI's Responses API relayed byte for byte, with memory.

The relay, the read-on after a client left, holding back the terminal event until the turn
is stored, incomplete turns and the spool are chat's (``ChatTurn``); this module only says
what differs: how the request is prepared, where it goes, how the reply is read, and how a
cut stream ends.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from pawwake import keys
from pawwake.chat.pipeline import ChatRejected, PreparedChat
from pawwake.errors import openai_error
from pawwake.llm.sse import CapturedReply, JsonCapture, SseCapture
from pawwake.protocols.responses import capture
from pawwake.protocols.responses.prepare import prepare_responses
from pawwake.protocols.responses.request import parse_responses_body
from pawwake.routes.chat import CLIENT_GONE, ChatTurn

log = logging.getLogger(__name__)


class ResponsesTurn(ChatTurn):
    """One Responses request: chat's turn with the Responses protocol hooks."""

    cut_event = capture.CUT_EVENT

    async def prepare(self, settings: Any, body: dict[str, Any], raw: bytes) -> PreparedChat:
        return await prepare_responses(self.app, settings, self.request.headers, body, raw,
                                       datetime.now(UTC))

    def upstream_url(self, settings: Any) -> str:
        return str(settings.responses_url)

    def new_capture(self, content_type: str) -> SseCapture | JsonCapture:
        return capture.new_capture(content_type)

    def hold_start(self, chunk: bytes) -> int:
        return capture.hold_start(chunk)

    def capture_body(self, data: bytes) -> CapturedReply:
        return capture.capture_response_body(data)


async def create_response(request: web.Request) -> web.StreamResponse:
    started = time.perf_counter()
    app = request.app
    turn = ResponsesTurn(request)
    try:
        settings = await app[keys.CONFIG].fresh()
        raw = await request.read()
        body = parse_responses_body(raw)
        turn.task = app[keys.TASKS].spawn(turn.run(settings, body, raw), name="responses-turn")
        return await asyncio.shield(turn.task)
    except ChatRejected as exc:
        turn.status = exc.status
        return openai_error(exc.status, exc.message, code=exc.code, param=exc.param,
                            error_type="invalid_request_error")
    except asyncio.CancelledError:
        turn.status = CLIENT_GONE
        turn.client_left()
        raise
    except web.HTTPException as exc:
        turn.status = exc.status
        raise
    finally:
        prepared = turn.prepared
        log.info("responses model=%s stream=%s memories=%d status=%d latency_ms=%.0f",
                 prepared.model if prepared else "-", prepared.stream if prepared else "-",
                 prepared.memory_count if prepared else 0, turn.status,
                 (time.perf_counter() - started) * 1000)


def setup(app: web.Application) -> None:
    app.router.add_post("/v1/responses", create_response, name="responses")
