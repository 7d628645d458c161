"""A Messages turn: chat's relay (``relay/``) with the Messages protocol's hooks.

Same behaviour as chat: the ``message_stop`` event is held back
until the turn is stored (so a follow-up sees it); a client leaving mid-reply keeps the turn
as incomplete; a client leaving after the stop reason is read on (bounded) for the usage; a
stream the provider cuts ends with an ``error`` event in Anthropic's shape. The provider's
error status and body reach the client unchanged.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from typing import Any

import aiohttp
from aiohttp import web

from pawwake.chat.prepared import ChatRejected, PreparedChat
from pawwake.errors import anthropic_error
from pawwake.llm.sse import CapturedReply
from pawwake.llm.upstream import UpstreamFailure
from pawwake.protocols.anthropic.capture import (
    MessagesSseCapture,
    capture_message,
    stop_event_start,
)
from pawwake.protocols.anthropic.pipeline import PreparedMessages, prepare_messages
from pawwake.protocols.anthropic.request import parse_messages_body
from pawwake.protocols.anthropic.upstream import forward_messages, upstream_url
from pawwake.relay.turn import ChatTurn
from pawwake.replies_in_flight import SHUTDOWN_MESSAGE
from pawwake.settings import Settings

CUT_EVENT = (b'event: error\ndata: {"type":"error","error":{"type":"api_error",'
             b'"message":"The upstream API broke off the stream."}}\n\n')
# Anthropic's word for "try again shortly": the SDKs treat it as retryable.
SHUTDOWN_EVENT = (b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error",'
                  b'"message":"' + SHUTDOWN_MESSAGE.encode() + b'"}}\n\n')


class MessagesTurn(ChatTurn):
    """One Messages request: chat's turn (see ChatTurn) with the Messages protocol hooks.
    The provider's health is chat's alone; ``message_stop`` and what follows it are held."""

    kind = "messages"
    cut_event = CUT_EVENT
    shutdown_event = SHUTDOWN_EVENT
    track_health = False
    hold_rest_once_done = True
    cut_when_incomplete = True
    capture: MessagesSseCapture | None
    prepared: PreparedMessages | None

    @staticmethod
    def parse_body(raw: bytes) -> dict[str, Any]:
        return parse_messages_body(raw)

    def rejected(self, exc: ChatRejected, error_type: str) -> web.Response:
        return anthropic_error(exc.status, exc.message)

    def upstream_failed(self, exc: UpstreamFailure) -> web.Response:
        return anthropic_error(exc.status, str(exc), error_type="api_error")

    async def prepare(self, settings: Settings, body: dict[str, Any], raw: bytes
                      ) -> PreparedMessages:
        return await prepare_messages(self.parts.flow, settings, self.request.headers, body, raw,
                                      datetime.now(UTC))

    def forward(self, settings: Settings, prepared: PreparedChat
                ) -> AbstractAsyncContextManager[aiohttp.ClientResponse]:
        assert isinstance(prepared, PreparedMessages)
        return forward_messages(self.parts.http.session, settings,
                                upstream_url(settings, self.request.query_string),
                                prepared.payload,
                                prepared.client_headers)

    def is_stream(self, prepared: PreparedChat, content_type: str) -> bool:
        return "text/event-stream" in content_type.lower()

    def new_capture(self, content_type: str) -> MessagesSseCapture:
        return MessagesSseCapture()

    def hold_start(self, chunk: bytes) -> int:
        return stop_event_start(chunk)

    def capture_body(self, data: bytes) -> CapturedReply:
        return capture_message(data)

