"""A Responses turn: chat's relay (``relay/``) with OpenAI's Responses API hooks.

The relay, the read-on after a client left, holding back the terminal event until the turn
is stored, incomplete turns and the spool are chat's (``ChatTurn``); this module only says
what differs: how the request is prepared, where it goes, how the reply is read, and how a
cut stream ends.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pawwake.chat.prepared import PreparedChat
from pawwake.llm.sse import CapturedReply, JsonCapture, SseCapture
from pawwake.protocols.responses import capture
from pawwake.protocols.responses.prepare import prepare_responses
from pawwake.protocols.responses.request import parse_responses_body
from pawwake.relay.turn import ChatTurn
from pawwake.replies_in_flight import SHUTDOWN_CODE, SHUTDOWN_MESSAGE
from pawwake.settings import Settings


class ResponsesTurn(ChatTurn):
    """One Responses request: chat's turn with the Responses protocol hooks."""

    kind = "responses"
    cut_event = capture.CUT_EVENT
    shutdown_event = capture.shutdown_event(SHUTDOWN_MESSAGE, SHUTDOWN_CODE)

    @staticmethod
    def parse_body(raw: bytes) -> dict[str, Any]:
        return parse_responses_body(raw)

    async def prepare(self, settings: Settings, body: dict[str, Any], raw: bytes) -> PreparedChat:
        return await prepare_responses(self.parts.flow, settings, self.request.headers, body, raw,
                                       datetime.now(UTC))

    def upstream_url(self, settings: Settings) -> str:
        return str(settings.responses_url)

    def new_capture(self, content_type: str) -> SseCapture | JsonCapture:
        return capture.new_capture(content_type)

    def hold_start(self, chunk: bytes) -> int:
        return capture.hold_start(chunk)

    def capture_body(self, data: bytes) -> CapturedReply:
        return capture.capture_response_body(data)

