"""Reading a Responses API reply on the side of the relay: the typed SSE events or a JSON body.

The reply whole is in the terminal event (``response.completed`` / ``response.incomplete``):
its output items give the text and the function calls, its ``usage`` the tokens. The deltas
only matter for a reply cut short (what the client saw before it left). Usage is kept in the
chat completions shape so the turn writer and the spool read it like any other reply.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pawwake.llm.sse import (
    CapturedReply,
    JsonCapture,
    SseCapture,
    TokenUsage,
    json_of,
    token_count,
)
from pawwake.text.messages import ToolCall

# The events that end a response; ``failed`` ends it without a usable reply.
_TERMINAL_DATA = re.compile(rb'"type"\s*:\s*"response\.(completed|incomplete|failed)"')
_TERMINAL_NAMES = frozenset({b"response.completed", b"response.incomplete", b"response.failed"})
# Where a terminal event starts in a chunk: its ``event:`` line, else its ``data:`` line.
_TERMINAL_START = re.compile(
    rb'(?:^|\n)(event: ?response\.(?:completed|incomplete|failed)\r?\n'
    rb'|data: ?\{\s*"type"\s*:\s*"response\.(?:completed|incomplete|failed)")')

# Appended when the provider breaks off a stream between two events: the Responses API's own
# error event, which the OpenAI SDK and Codex both read as the end of a failed response.
CUT_EVENT = (b'event: error\ndata: {"type":"error","code":"upstream_stream_cut",'
             b'"message":"The upstream API broke off the stream.","param":null}\n\n')


def shutdown_event(message: str, code: str) -> bytes:
    """The ``error`` event that ends a stream cut short by the gateway's shutdown."""
    return (b'event: error\ndata: {"type":"error","code":"' + code.encode()
            + b'","message":"' + message.encode() + b'","param":null}\n\n')

_FUNCTION_CALLS = ("function_call", "custom_tool_call")


def hold_start(chunk: bytes) -> int:
    """Where the terminal event starts in ``chunk``; 0 when it began in an earlier chunk."""
    found = _TERMINAL_START.search(chunk)
    return found.start(1) if found else 0


def chat_usage(usage: Any) -> dict[str, Any] | None:
    """A Responses ``usage`` object in the chat completions shape (tokens the same)."""
    if not isinstance(usage, dict):
        return None
    prompt = token_count(usage.get("input_tokens"))
    completion = token_count(usage.get("output_tokens"))
    converted: dict[str, Any] = {
        "prompt_tokens": prompt, "completion_tokens": completion,
        "total_tokens": token_count(usage.get("total_tokens")) or prompt + completion}
    cached = _detail(usage.get("input_tokens_details"), "cached_tokens")
    if cached is not None:
        converted["prompt_tokens_details"] = {"cached_tokens": cached}
    reasoning = _detail(usage.get("output_tokens_details"), "reasoning_tokens")
    if reasoning is not None:
        converted["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return converted


def _detail(details: Any, name: str) -> int | None:
    if isinstance(details, dict) and details.get(name) is not None:
        return token_count(details.get(name))
    return None


def read_response(response: Any, reply: CapturedReply) -> None:
    """Fill ``reply`` from a response object (the terminal event's, or a non-stream body)."""
    if not isinstance(response, dict):
        reply.error = {"message": "reply is not a response object"}
        return
    if isinstance(response.get("model"), str):
        reply.model = response["model"]
    status = response.get("status")
    if status == "failed" or response.get("error"):
        reply.error = response.get("error") or {"message": "the response failed"}
        return
    texts: list[str] = []
    summaries: list[str] = []
    calls: list[ToolCall] = []
    for item in response.get("output") or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or []:
                if isinstance(part, dict) and isinstance(part.get("text"), str) \
                        and part.get("type") == "output_text":
                    texts.append(part["text"])
        elif kind in _FUNCTION_CALLS:
            calls.append(tool_call(item))
        elif kind == "reasoning":
            summaries += [part["text"] for part in item.get("summary") or []
                          if isinstance(part, dict) and isinstance(part.get("text"), str)]
    if texts or calls or not reply.content:
        reply.content = "".join(texts)
    if summaries:
        reply.reasoning_content = "\n\n".join(summaries)
    reply.tool_calls = calls
    reply.raw_usage = chat_usage(response.get("usage"))
    reply.usage = TokenUsage.from_openai(reply.raw_usage)
    if status == "incomplete":
        details = response.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        reply.finish_reason = "length" if reason == "max_output_tokens" else str(
            reason or "incomplete")
    else:
        reply.finish_reason = "tool_calls" if calls else "stop"
    reply.done = True


def tool_call(item: dict[str, Any]) -> ToolCall:
    """A function (or custom tool) call item as a chat completions tool call."""
    arguments = item.get("arguments") if item.get("type") == "function_call" \
        else item.get("input")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False) if arguments is not None else ""
    call: ToolCall = {"id": item.get("call_id") or item.get("id") or "",
                            "type": "function",
                            "function": {"name": str(item.get("name") or ""),
                                         "arguments": arguments}}
    return call


class ResponsesCapture(SseCapture):
    """The typed event stream. ``done`` once a terminal event begins (the relay holds it back
    until the turn is stored); ``finished`` once a usable one arrived whole."""

    def __init__(self) -> None:
        super().__init__()
        self._named = False  # an ``event:`` line arrived, its data not yet

    @property
    def at_event_boundary(self) -> bool:
        return not self._buffer and not self._data and not self._named

    def _lines(self, lines: list[bytes]) -> None:
        data = self._data
        for line in lines:
            if not line:
                self._named = False
                if data:
                    payload = b"\n".join(data) if len(data) > 1 else data[0]
                    data.clear()
                    self._events.append(payload)
                    if not self.finished and b"response." in payload:
                        found = _TERMINAL_DATA.search(payload)
                        if found:
                            self._done = True
                            self.finished = found.group(1) != b"failed"
            elif line.startswith(b"data:"):
                data.append(line[6:] if line[5:6] == b" " else line[5:])
            elif line.startswith(b"event:"):
                self._named = True
                if line[6:].strip() in _TERMINAL_NAMES:
                    self._done = True

    def finish(self) -> CapturedReply:
        self._flush()
        reply = CapturedReply()
        deltas: list[str] = []
        for event in self._decode():
            if not isinstance(event, dict):
                continue
            kind = event.get("type")
            if kind == "response.output_text.delta" and isinstance(event.get("delta"), str):
                deltas.append(event["delta"])
            elif kind in ("response.completed", "response.incomplete", "response.failed"):
                reply.content = "".join(deltas)
                read_response(event.get("response"), reply)
            elif kind == "error":
                reply.error = {key: event.get(key) for key in ("code", "message", "param")}
        if not reply.done and reply.error is None:
            reply.content = "".join(deltas)  # cut short: what the client saw
        elif reply.error is not None:
            reply.done = False
        return reply


class ResponsesBodyCapture(JsonCapture):
    """A non-stream reply arriving where a stream was asked for."""

    def finish(self) -> CapturedReply:
        return capture_response_body(b"".join(self._parts))


def capture_response_body(body: bytes) -> CapturedReply:
    """Read a non-stream response object; ``complete`` when it completed (or hit a limit)."""
    reply = CapturedReply()
    try:
        data = json_of(body)
    except ValueError:
        reply.error = {"message": "reply body is not JSON"}
        return reply
    read_response(data, reply)
    if reply.error is not None:
        reply.done = False
    return reply


def new_capture(content_type: str) -> ResponsesCapture | ResponsesBodyCapture:
    if "text/event-stream" in content_type.lower():
        return ResponsesCapture()
    return ResponsesBodyCapture()
