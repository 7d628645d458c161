"""A fake LLM provider: a real aiohttp server speaking OpenAI's chat completions API.

Tests queue replies (``reply_text``, ``reply_stream``, ``reply_error``...) and read back every
request the gateway sent (``requests``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from aiohttp import web


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes = b""  # the exact bytes the gateway sent


@dataclass
class Reply:
    status: int = 200
    chunks: list[bytes] = field(default_factory=list)  # raw SSE bytes, sent in order
    body: Any = None  # JSON body for non-stream replies
    raw_body: bytes | None = None  # sent as the whole (non-stream) answer when set
    delay: float = 0.0  # seconds before each chunk (or before the body)
    head_delay: float = 0.0  # seconds before any response header is sent
    cut_after: int | None = None  # drop the connection after this many chunks
    gate: asyncio.Event | None = None  # wait for it before sending chunk number ``gate_after``
    gate_after: int = 0
    stream_anyway: bool = False  # answer with SSE even when the request did not ask to stream
    content_type: str = "text/event-stream"
    headers: dict[str, str] = field(default_factory=dict)


async def stream_reply(request: web.Request, reply: Reply,
                       on_disconnect: Callable[[], None]) -> web.StreamResponse:
    """Send ``reply.chunks`` as a stream, honouring its cut, gate and delay: the scripting
    every fake provider shares. ``on_disconnect`` runs when the client goes away."""
    response = web.StreamResponse(headers={"Content-Type": reply.content_type,
                                           "Cache-Control": "no-cache", **reply.headers})
    await response.prepare(request)
    try:
        for number, chunk in enumerate(reply.chunks):
            if reply.cut_after is not None and number >= reply.cut_after:
                assert request.transport is not None
                request.transport.close()
                return response
            if reply.gate is not None and number == reply.gate_after:
                await reply.gate.wait()
            if reply.delay:
                await asyncio.sleep(reply.delay)
            await response.write(chunk)
        await response.write_eof()
    except asyncio.CancelledError:
        on_disconnect()
        raise
    except ConnectionResetError:
        on_disconnect()
    return response


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


def tool_call_stream() -> list[bytes]:
    """Two parallel tool calls, arguments in pieces, with provider extras at both levels."""
    signature = {"google": {"thought_signature": "c2lnbmF0dXJl"}}
    return [
        sse(chat_chunk({"role": "assistant", "content": None, "tool_calls": [
            {"index": 0, "id": "call_a", "type": "function", "extra_content": signature,
             "function": {"name": "get_weather", "arguments": "", "thought_signature": "fs1"}},
        ]})),
        sse(chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": "'}}]})),
        sse(chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '上海"}'}}]})),
        sse(chat_chunk({"tool_calls": [
            {"index": 1, "id": "call_b", "type": "function",
             "function": {"name": "get_time", "arguments": '{"tz": 8}'}}]})),
        sse(chat_chunk({"reasoning_content": "need both"})),
        sse(chat_chunk({}, finish_reason="tool_calls")),
        sse({"id": "x", "object": "chat.completion.chunk", "choices": [],
             "usage": {"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42,
                       "prompt_tokens_details": {"cached_tokens": 16}}}),
        sse("[DONE]"),
    ]


# What a capture of tool_call_stream() must produce.
EXPECTED_CALLS = [
    {"id": "call_a", "type": "function",
     "extra_content": {"google": {"thought_signature": "c2lnbmF0dXJl"}},
     "function": {"name": "get_weather", "arguments": '{"city": "上海"}',
                  "thought_signature": "fs1"}},
    {"id": "call_b", "type": "function",
     "function": {"name": "get_time", "arguments": '{"tz": 8}'}},
]


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
    """Scripted replies, served first in, first out; when none is queued, ``responder`` (if
    set) makes one from the request body, else a default text reply."""

    def __init__(self, responder: Callable[[Any], Reply] | None = None) -> None:
        self.responder = responder
        self.server: Any = None
        self.requests: list[Recorded] = []
        self.replies: list[Reply] = []
        self.default_text = "你好，我是测试模型。Hello from the fake model."
        self.models: list[str] = ["test/model-a", "test/model-b"]
        self.model_list: list[dict[str, Any]] | None = None  # a provider's own entries, as is
        self.stream_closed = asyncio.Event()  # set when a streaming handler ends for any reason
        self.disconnects = 0  # streams the gateway closed before they were finished
        self.disconnected = asyncio.Event()
        self.models_status = 200
        self.model_requests = 0
        self.models_gate: asyncio.Event | None = None  # when set, /models waits for it (a hang)

    @property
    def base_url(self) -> str:
        return str(self.server.make_url("/v1"))

    def queue(self, reply: Reply) -> None:
        self.replies.append(reply)

    def reply_text(self, text: str, **kwargs: Any) -> None:
        """Next request gets ``text``: streamed when the request asks to stream, else JSON."""
        pieces = kwargs.pop("pieces", 3)
        self.replies.append(Reply(chunks=text_stream(text, pieces=pieces, **kwargs),
                                  body=completion_body(text, **kwargs)))

    def reply_error(self, status: int, message: str = "upstream says no",
                    headers: dict[str, str] | None = None) -> None:
        self.replies.append(Reply(status=status, headers=dict(headers or {}),
                                  body={"error": {"message": message,
                                                  "type": "upstream_error"}}))

    def build_app(self) -> web.Application:
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        # Provider-shaped model lists (recorded in ``requests``, answered only with a key).
        app.router.add_get("/openrouter/api/v1/models", self._openrouter_models)
        app.router.add_get("/google/v1beta/openai/models", self._google_models)
        return app

    async def _models(self, request: web.Request) -> web.Response:
        self.model_requests += 1
        if self.models_gate is not None:
            await self.models_gate.wait()
        if self.models_status != 200:
            return web.json_response({"error": {"message": "no list"}}, status=self.models_status)
        return web.json_response({"object": "list", "data": self.model_list or [
            {"id": name, "object": "model", "owned_by": "fake"} for name in self.models]})

    def _keyed(self, request: web.Request) -> web.Response | None:
        self.requests.append(Recorded(request.path, dict(request.headers), None))
        if not request.headers.get("Authorization", "").startswith("Bearer "):
            return web.json_response({"error": {"message": "no key"}}, status=401)
        return None

    async def _openrouter_models(self, request: web.Request) -> web.Response:
        refused = self._keyed(request)
        return refused or web.json_response({"data": [
            {"id": "openai/gpt-5", "name": "OpenAI: GPT-5", "context_length": 400000,
             "pricing": {"prompt": "0.00000125"}, "architecture": {"modality": "text->text"}},
            {"id": "anthropic/claude-sonnet-4.5", "name": "Anthropic: Claude Sonnet 4.5",
             "context_length": 1000000, "top_provider": {"is_moderated": False}},
        ]})

    async def _google_models(self, request: web.Request) -> web.Response:
        refused = self._keyed(request)
        return refused or web.json_response({"object": "list", "data": [
            {"id": "models/gemini-2.5-pro", "object": "model", "owned_by": "google"},
            {"id": "models/gemini-2.5-flash", "object": "model", "owned_by": "google",
             "display_name": "Gemini 2.5 Flash"},
        ]})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body = json.loads(raw)
        self.requests.append(Recorded(request.path, dict(request.headers), body, raw))
        if self.replies:
            reply = self.replies.pop(0)
        elif self.responder is not None:
            reply = self.responder(body)
        else:
            reply = Reply(chunks=text_stream(self.default_text),
                          body=completion_body(self.default_text))
        if reply.head_delay:
            await asyncio.sleep(reply.head_delay)
        plain = reply.raw_body is not None or not (body.get("stream") or reply.stream_anyway)
        if reply.status != 200 or plain:
            if reply.gate is not None:  # a plain answer held until the test releases it
                await reply.gate.wait()
            if reply.delay:
                await asyncio.sleep(reply.delay)
            if reply.raw_body is not None:
                return web.Response(status=reply.status, body=reply.raw_body,
                                    headers={"Content-Type": reply.content_type,
                                             **reply.headers})
            return web.json_response(reply.body, status=reply.status, headers=reply.headers)
        try:
            return await stream_reply(request, reply, self._saw_disconnect)
        finally:
            self.stream_closed.set()

    def _saw_disconnect(self) -> None:
        self.disconnects += 1
        self.disconnected.set()

    @property
    def sent_bytes(self) -> bytes:
        """Not tracked per request; tests compare against the chunks they queued."""
        raise AttributeError("compare against the queued chunks instead")


Fake = TypeVar("Fake")


async def on_loopback(fake: Fake, aiohttp_server: Any) -> Fake:
    """``fake`` (any of the fake providers: it has ``build_app`` and ``server``) answering on
    loopback, served by the ``aiohttp_server`` fixture."""
    fake.server = await aiohttp_server(fake.build_app())  # type: ignore[attr-defined]
    return fake
