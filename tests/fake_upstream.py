"""A fake LLM provider: a real aiohttp server speaking OpenAI's chat completions API.

Tests queue replies (``reply_text``, ``reply_stream``, ``reply_error``...) and read back every
request the gateway sent (``requests``).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class Reply:
    status: int = 200
    chunks: list[bytes] = field(default_factory=list)  # raw SSE bytes, sent in order
    body: Any = None  # JSON body for non-stream replies
    delay: float = 0.0  # seconds before each chunk (or before the body)
    cut_after: int | None = None  # drop the connection after this many chunks
    content_type: str = "text/event-stream"


def sse(data: Any) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return f"data: {payload}\n\n".encode()


def chat_chunk(delta: dict[str, Any], *, finish_reason: str | None = None,
               model: str = "test/model-a", usage: dict[str, int] | None = None) -> dict[str, Any]:
    chunk: dict[str, Any] = {
        "id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1_700_000_000,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }
    if usage is not None:
        chunk["usage"] = usage
    return chunk


def text_stream(text: str, *, pieces: int = 3, usage: dict[str, int] | None = None,
                model: str = "test/model-a") -> list[bytes]:
    """SSE chunks that stream ``text`` in ``pieces`` parts, then usage and [DONE]."""
    size = max(1, -(-len(text) // pieces))
    parts = [text[i:i + size] for i in range(0, len(text), size)] or [""]
    chunks = [sse(chat_chunk({"role": "assistant", "content": ""}, model=model))]
    chunks += [sse(chat_chunk({"content": part}, model=model)) for part in parts]
    chunks.append(sse(chat_chunk({}, finish_reason="stop", model=model)))
    usage = usage or {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
    chunks.append(sse({"id": "chatcmpl-fake", "object": "chat.completion.chunk",
                       "created": 1_700_000_000, "model": model, "choices": [],
                       "usage": usage}))
    chunks.append(sse("[DONE]"))
    return chunks


def completion_body(text: str, *, model: str = "test/model-a",
                    usage: dict[str, int] | None = None,
                    finish_reason: str = "stop", **message_extra: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake", "object": "chat.completion", "created": 1_700_000_000,
        "model": model,
        "choices": [{"index": 0, "finish_reason": finish_reason,
                     "message": {"role": "assistant", "content": text, **message_extra}}],
        "usage": usage or {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


class FakeUpstream:
    """Scripted replies, served first in, first out; a default text reply when none queued."""

    def __init__(self) -> None:
        self.server: Any = None
        self.requests: list[Recorded] = []
        self.replies: list[Reply] = []
        self.default_text = "你好，我是测试模型。Hello from the fake model."
        self.models: list[str] = ["test/model-a", "test/model-b"]
        self.stream_closed = asyncio.Event()  # set when a streaming handler ends for any reason

    @property
    def base_url(self) -> str:
        return str(self.server.make_url("/v1"))

    def queue(self, reply: Reply) -> None:
        self.replies.append(reply)

    def reply_text(self, text: str, **kwargs: Any) -> None:
        """Next request gets ``text``: streamed when the request asks to stream, else JSON."""
        self.replies.append(Reply(chunks=text_stream(text, **kwargs),
                                  body=completion_body(text, **kwargs)))

    def reply_error(self, status: int, message: str = "upstream says no") -> None:
        self.replies.append(Reply(status=status, body={"error": {"message": message,
                                                                 "type": "upstream_error"}}))

    def build_app(self) -> web.Application:
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        return app

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [
            {"id": name, "object": "model", "owned_by": "fake"} for name in self.models]})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(Recorded(request.path, dict(request.headers), body))
        reply = self.replies.pop(0) if self.replies else Reply(
            chunks=text_stream(self.default_text), body=completion_body(self.default_text))
        if reply.status != 200 or not body.get("stream"):
            if reply.delay:
                await asyncio.sleep(reply.delay)
            return web.json_response(reply.body, status=reply.status)
        response = web.StreamResponse(headers={"Content-Type": reply.content_type,
                                               "Cache-Control": "no-cache"})
        await response.prepare(request)
        try:
            for number, chunk in enumerate(reply.chunks):
                if reply.cut_after is not None and number >= reply.cut_after:
                    assert request.transport is not None
                    request.transport.close()
                    return response
                if reply.delay:
                    await asyncio.sleep(reply.delay)
                await response.write(chunk)
            await response.write_eof()
        finally:
            self.stream_closed.set()
        return response

    @property
    def sent_bytes(self) -> bytes:
        """Not tracked per request; tests compare against the chunks they queued."""
        raise AttributeError("compare against the queued chunks instead")
