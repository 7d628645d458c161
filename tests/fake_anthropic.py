"""A fake provider speaking Anthropic's Messages API on loopback, scripted per test.

Tests queue replies (``reply_text``, ``reply_blocks``, ``reply_error``...) and read back every
request the gateway sent (``requests``), with its headers and exact bytes.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

MODEL = "claude-test-1"
USAGE = {"input_tokens": 12, "cache_creation_input_tokens": 30, "cache_read_input_tokens": 200,
         "output_tokens": 1}


@dataclass
class Recorded:
    path: str
    query: str
    headers: dict[str, str]
    body: Any
    raw: bytes


@dataclass
class Reply:
    status: int = 200
    chunks: list[bytes] = field(default_factory=list)  # SSE bytes for stream requests
    body: Any = None  # the message for non-stream requests
    cut_after: int | None = None  # drop the connection after this many chunks
    delay: float = 0.0
    gate: asyncio.Event | None = None  # waited for before chunk number ``gate_after``
    gate_after: int = 0


def event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def message_stream(blocks: list[dict[str, Any]], *, stop_reason: str = "end_turn",
                   usage: dict[str, int] | None = None, output_tokens: int = 9) -> list[bytes]:
    """The events a provider streams for ``blocks`` (text, tool_use, thinking...)."""
    usage = dict(usage or USAGE)
    chunks = [event("message_start", {"type": "message_start", "message": {
        "id": "msg_fake", "type": "message", "role": "assistant", "model": MODEL,
        "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}}),
        event("ping", {"type": "ping"})]
    for index, block in enumerate(blocks):
        kind = block["type"]
        if kind == "text":
            start: dict[str, Any] = {"type": "text", "text": ""}
            text = block["text"]
            deltas = [{"type": "text_delta", "text": text[:len(text) // 2]},
                      {"type": "text_delta", "text": text[len(text) // 2:]}]
        elif kind == "tool_use":
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            raw = json.dumps(block["input"])
            deltas = [{"type": "input_json_delta", "partial_json": raw[:3]},
                      {"type": "input_json_delta", "partial_json": raw[3:]}]
        elif kind == "thinking":
            start = {"type": "thinking", "thinking": ""}
            deltas = [{"type": "thinking_delta", "thinking": block["thinking"]},
                      {"type": "signature_delta", "signature": block["signature"]}]
        else:
            start, deltas = block, []
        chunks.append(event("content_block_start", {"type": "content_block_start",
                                                    "index": index, "content_block": start}))
        for delta in deltas:
            chunks.append(event("content_block_delta", {"type": "content_block_delta",
                                                        "index": index, "delta": delta}))
        chunks.append(event("content_block_stop", {"type": "content_block_stop",
                                                   "index": index}))
    chunks.append(event("message_delta", {
        "type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None},
        "usage": {"output_tokens": output_tokens}}))
    chunks.append(event("message_stop", {"type": "message_stop"}))
    return chunks


def message_body(blocks: list[dict[str, Any]], *, stop_reason: str = "end_turn",
                 usage: dict[str, int] | None = None) -> dict[str, Any]:
    return {"id": "msg_fake", "type": "message", "role": "assistant", "model": MODEL,
            "content": blocks, "stop_reason": stop_reason, "stop_sequence": None,
            "usage": {**(usage or USAGE), "output_tokens": 9}}


class FakeAnthropic:
    """Answers /v1/messages from the queue (a default text reply when empty)."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.replies: list[Reply] = []
        self.server: Any = None

    @property
    def base_url(self) -> str:
        return str(self.server.make_url("/v1"))

    def queue(self, reply: Reply) -> None:
        self.replies.append(reply)

    def reply_blocks(self, blocks: list[dict[str, Any]], **kwargs: Any) -> None:
        self.queue(Reply(chunks=message_stream(blocks, **kwargs),
                         body=message_body(blocks)))

    def reply_text(self, text: str, **kwargs: Any) -> None:
        self.reply_blocks([{"type": "text", "text": text}], **kwargs)

    def reply_error(self, status: int, error_type: str, message: str) -> None:
        self.queue(Reply(status=status, body={"type": "error", "error": {
            "type": error_type, "message": message}}))

    def build_app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_post("/v1/messages/count_tokens", self._count)
        return app

    async def _record(self, request: web.Request) -> Recorded:
        raw = await request.read()
        recorded = Recorded(request.path, request.query_string, dict(request.headers),
                            json.loads(raw), raw)
        self.requests.append(recorded)
        return recorded

    async def _count(self, request: web.Request) -> web.Response:
        await self._record(request)
        return web.json_response({"input_tokens": 42})

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        recorded = await self._record(request)
        reply = self.replies.pop(0) if self.replies else Reply(
            chunks=message_stream([{"type": "text", "text": "fake reply"}]),
            body=message_body([{"type": "text", "text": "fake reply"}]))
        if reply.status != 200:
            return web.json_response(reply.body, status=reply.status)
        if not recorded.body.get("stream"):
            return web.json_response(reply.body)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                               "request-id": "req_fake"})
        await response.prepare(request)
        for number, chunk in enumerate(reply.chunks):
            if reply.cut_after is not None and number >= reply.cut_after:
                assert request.transport is not None
                request.transport.close()
                return response
            if reply.delay:
                await asyncio.sleep(reply.delay)
            if reply.gate is not None and number == reply.gate_after:
                await reply.gate.wait()
            try:
                await response.write(chunk)
            except ConnectionResetError:
                return response
        await response.write_eof()
        return response
