"""A fake provider of OpenAI's Responses API: a real aiohttp server on loopback.

It speaks the typed SSE events (``response.created`` ... ``response.completed``) and the
non-stream response object, records every request, and answers queued ``Reply`` objects
(the same scripting as ``fake_upstream``: status, chunks, cut_after, gate...).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web

from tests.fake_upstream import Recorded, Reply, stream_reply

MODEL = "test/model-a"
USAGE = {"input_tokens": 40, "input_tokens_details": {"cached_tokens": 24},
         "output_tokens": 9, "output_tokens_details": {"reasoning_tokens": 3},
         "total_tokens": 49}


def event(data: dict[str, Any]) -> bytes:
    """One typed event, ``event:`` line first as OpenAI sends it."""
    return (f"event: {data['type']}\ndata: "
            f"{json.dumps(data, ensure_ascii=False)}\n\n").encode()


def message_item(text: str, item_id: str = "msg_1") -> dict[str, Any]:
    return {"type": "message", "id": item_id, "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def call_item(name: str, arguments: str, call_id: str) -> dict[str, Any]:
    return {"type": "function_call", "id": "fc_" + call_id, "call_id": call_id,
            "name": name, "arguments": arguments, "status": "completed"}


def response_object(output: list[dict[str, Any]], *, status: str = "completed",
                    usage: dict[str, Any] | None = None, model: str = MODEL,
                    **extra: Any) -> dict[str, Any]:
    return {"id": "resp_fake", "object": "response", "created_at": 1_700_000_000,
            "status": status, "model": model, "output": output,
            "usage": usage if usage is not None else USAGE, "error": None,
            "incomplete_details": None, "parallel_tool_calls": True, "tool_choice": "auto",
            "tools": [], **extra}


def text_events(text: str, *, pieces: int = 3, usage: dict[str, Any] | None = None,
                terminal: str = "response.completed") -> list[bytes]:
    """A streamed text reply: created, the item and its deltas, then the terminal event."""
    size = max(1, -(-len(text) // pieces))
    parts = [text[i:i + size] for i in range(0, len(text), size)] or [""]
    created = response_object([], status="in_progress", usage={})
    chunks = [event({"type": "response.created", "sequence_number": 0, "response": created}),
              event({"type": "response.output_item.added", "sequence_number": 1,
                     "output_index": 0, "item": {**message_item(""), "content": [],
                                                 "status": "in_progress"}})]
    for number, part in enumerate(parts):
        chunks.append(event({"type": "response.output_text.delta", "sequence_number": 2 + number,
                             "item_id": "msg_1", "output_index": 0, "content_index": 0,
                             "delta": part, "logprobs": []}))
    sequence = 2 + len(parts)
    chunks.append(event({"type": "response.output_item.done", "sequence_number": sequence,
                         "output_index": 0, "item": message_item(text)}))
    status = terminal.removeprefix("response.")
    chunks.append(event({"type": terminal, "sequence_number": sequence + 1,
                         "response": response_object([message_item(text)], status=status,
                                                     usage=usage)}))
    return chunks


def call_events(calls: list[dict[str, Any]]) -> list[bytes]:
    """A streamed reply that asks for function calls."""
    chunks = [event({"type": "response.created", "sequence_number": 0,
                     "response": response_object([], status="in_progress", usage={})})]
    for index, call in enumerate(calls):
        chunks.append(event({"type": "response.output_item.done", "sequence_number": 1 + index,
                             "output_index": index, "item": call}))
    chunks.append(event({"type": "response.completed", "sequence_number": 1 + len(calls),
                         "response": response_object(calls)}))
    return chunks


class FakeResponses:
    """Scripted replies first in, first out; a default text reply when none is queued."""

    def __init__(self) -> None:
        self.server: Any = None
        self.requests: list[Recorded] = []
        self.replies: list[Reply] = []
        self.default_text = "你好，我是 Responses 测试模型。"
        self.disconnected = asyncio.Event()

    @property
    def base_url(self) -> str:
        return str(self.server.make_url("/v1"))

    def reply_text(self, text: str, **kwargs: Any) -> None:
        usage = kwargs.get("usage")
        self.replies.append(Reply(chunks=text_events(text, **kwargs),
                                  body=response_object([message_item(text)], usage=usage)))

    def reply_error(self, status: int, message: str = "upstream says no") -> None:
        self.replies.append(Reply(status=status, body={"error": {
            "message": message, "type": "invalid_request_error", "param": None,
            "code": "upstream_refused"}}))

    def build_app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/responses", self._responses)
        return app

    async def _responses(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body = json.loads(raw)
        self.requests.append(Recorded(request.path, dict(request.headers), body, raw))
        if self.replies:
            reply = self.replies.pop(0)
        else:
            reply = Reply(chunks=text_events(self.default_text),
                          body=response_object([message_item(self.default_text)]))
        if reply.status != 200 or not body.get("stream"):
            return web.json_response(reply.body, status=reply.status, headers=reply.headers)
        return await stream_reply(request, reply, self.disconnected.set)
