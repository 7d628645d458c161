"""Capture of an assistant reply from the bytes a provider sends: SSE streams or JSON bodies.

The gateway relays the provider's bytes untouched; these captures read a copy on the side to
learn what was said (text, reasoning, tool calls, provider extras), how it ended and what it
cost, so the turn can be stored and replayed to the provider later exactly.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any, cast

from pawwake.text.messages import ToolCall

log = logging.getLogger(__name__)

# A set finish_reason is a string; the many ``"finish_reason":null`` chunks never match.
_FINISH_SET = re.compile(rb'"finish_reason"\s*:\s*"')
_DONE_EVENT = re.compile(rb"data: ?\[DONE\]")


@dataclass(frozen=True)
class TokenUsage:
    """Token counts as reported by the provider; ``cached`` and ``cost`` only when the provider
    says (OpenRouter puts the call's price, in credits/USD, in ``usage.cost``)."""

    prompt: int = 0
    completion: int = 0
    total: int = 0
    cached: int | None = None
    cost: float | None = None
    cache_creation: int | None = None  # tokens written to the prompt cache (Anthropic)

    @classmethod
    def from_openai(cls, usage: Any) -> TokenUsage | None:
        """Read an OpenAI-style ``usage`` object; None when there is nothing usable."""
        if not isinstance(usage, dict):
            return None
        prompt = token_count(usage.get("prompt_tokens"))
        completion = token_count(usage.get("completion_tokens"))
        total = token_count(usage.get("total_tokens")) or prompt + completion
        details = usage.get("prompt_tokens_details")
        cached = None
        if isinstance(details, dict) and details.get("cached_tokens") is not None:
            cached = token_count(details.get("cached_tokens"))
        elif usage.get("cache_read_input_tokens") is not None:
            cached = token_count(usage.get("cache_read_input_tokens"))
        creation = usage.get("cache_creation_input_tokens")
        return cls(prompt=prompt, completion=completion, total=total, cached=cached,
                   cost=_cost(usage.get("cost")),
                   cache_creation=None if creation is None else token_count(creation))


def token_count(value: Any) -> int:
    """A token count the provider reported: a non-negative int, else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _cost(value: Any) -> float | None:
    """A reported price: a finite non-negative number, else unknown."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if 0 <= value < float("inf") else None


@dataclass
class CapturedReply:
    """What the provider answered, merged from every chunk (or read from one JSON body)."""

    content: str = ""
    reasoning_content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    extras: dict[str, Any] = field(default_factory=dict)  # unknown message keys, kept for replay
    usage: TokenUsage | None = None
    raw_usage: dict[str, Any] | None = None
    finish_reason: str | None = None
    done: bool = False  # "[DONE]" seen (stream) or a complete body parsed (JSON)
    model: str | None = None
    error: Any = None  # an error object the provider sent inside a 200 response
    metadata: dict[str, Any] = field(default_factory=dict)  # stored with the reply as is

    @property
    def complete(self) -> bool:
        """A reply that ended as the provider meant it to, not cut off or failed."""
        return self.error is None and (self.done or self.finish_reason is not None)

    def assistant_message(self) -> dict[str, Any]:
        """The reply as an assistant message that can be sent back to the provider."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        if self.reasoning_content:
            message["reasoning_content"] = self.reasoning_content
        message.update(self.extras)
        return message


class _ReplyBuilder:
    """Merges chunk objects into a CapturedReply (choice 0 only)."""

    def __init__(self) -> None:
        self.reply = CapturedReply()
        self._content: list[str] = []
        self._reasoning: list[str] = []
        self._calls: dict[int, dict[str, Any]] = {}
        self._last_call: int | None = None

    def add_chunk(self, chunk: Any) -> None:
        if not isinstance(chunk, dict):
            return
        reply = self.reply
        if chunk.get("error"):
            reply.error = chunk["error"]
        if isinstance(chunk.get("model"), str):
            reply.model = chunk["model"]
        if isinstance(chunk.get("usage"), dict):
            reply.raw_usage = chunk["usage"]
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            return
        for choice in choices:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            if choice.get("finish_reason") is not None:
                reply.finish_reason = choice["finish_reason"]
            delta = choice.get("delta")
            if delta is None:
                delta = choice.get("message")
            if isinstance(delta, dict):
                content = delta.get("content")
                if len(delta) == 1 and isinstance(content, str):  # most chunks: text only
                    self._content.append(content)
                else:
                    self.add_delta(delta)

    def add_delta(self, delta: dict[str, Any]) -> None:
        for key, value in delta.items():
            if value is None or key == "role":
                continue
            if key == "content":
                self._content.append(_text_of(value))
            elif key == "reasoning_content":
                if isinstance(value, str):
                    self._reasoning.append(value)
            elif key == "tool_calls":
                if isinstance(value, list):
                    for position, call in enumerate(value):
                        if isinstance(call, dict):
                            self._merge_tool_call(call, position)
            else:
                # Text extras (e.g. ``reasoning``, ``refusal``) stream in pieces: concatenate.
                self.reply.extras[key] = _merge_value(self.reply.extras.get(key), value,
                                                      concat_text=True)

    def _merge_tool_call(self, delta: dict[str, Any], position: int) -> None:
        index = delta.get("index")
        if not isinstance(index, int) or isinstance(index, bool):
            index = self._index_without_one(delta, position)
        call = self._calls.get(index)
        if call is None:
            call = self._calls[index] = {}
        self._last_call = index
        for key, value in delta.items():
            if key == "index" or value is None:
                continue
            if key == "function" and isinstance(value, dict):
                function = call.setdefault("function", {})
                for fkey, fvalue in value.items():
                    if fvalue is None:
                        continue
                    if fkey == "arguments":
                        piece = fvalue if isinstance(fvalue, str) else json.dumps(
                            fvalue, ensure_ascii=False)
                        function["arguments"] = function.get("arguments", "") + piece
                    elif fkey == "name":
                        if not function.get("name"):
                            function["name"] = fvalue
                    else:
                        # Signatures and the like arrive whole: a repeat replaces, never doubles.
                        function[fkey] = _merge_value(function.get(fkey), fvalue,
                                                      concat_text=False)
            elif key in ("id", "type"):
                if not call.get(key):
                    call[key] = value
            else:
                call[key] = _merge_value(call.get(key), value, concat_text=False)

    def _index_without_one(self, delta: dict[str, Any], position: int) -> int:
        """Some providers omit ``index``: match by id, else continue the last call."""
        call_id = delta.get("id")
        if call_id:
            for index, call in self._calls.items():
                if call.get("id") == call_id:
                    return index
            return max(self._calls, default=-1) + 1
        if self._last_call is not None:
            return self._last_call
        return position

    def finish(self) -> CapturedReply:
        reply = self.reply
        reply.content = "".join(self._content)
        reply.reasoning_content = "".join(self._reasoning)
        calls: list[ToolCall] = []
        for index in sorted(self._calls):
            call = self._calls[index]
            call.setdefault("type", "function")
            call.setdefault("function", {}).setdefault("arguments", "")
            calls.append(cast(ToolCall, call))  # merged from the deltas' id, type, function
        reply.tool_calls = calls
        reply.usage = TokenUsage.from_openai(reply.raw_usage)
        return reply


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content
                       if isinstance(part, dict) and isinstance(part.get("text"), str))
    return ""


def _merge_value(old: Any, new: Any, *, concat_text: bool) -> Any:
    """Combine a repeated extra: lists extend, dicts merge key by key, text per ``concat_text``."""
    if old is None:
        return new
    if isinstance(old, str) and isinstance(new, str):
        return old + new if concat_text else new
    if isinstance(old, list) and isinstance(new, list):
        return old + new
    if isinstance(old, dict) and isinstance(new, dict):
        merged = dict(old)
        for key, value in new.items():
            if value is not None:
                merged[key] = _merge_value(merged.get(key), value, concat_text=False)
        return merged
    return new


class SseCapture:
    """Incremental SSE reader. Feed it raw chunks split anywhere (mid-line, mid-UTF-8).

    Framing happens as bytes arrive; the events' JSON is decoded in one call when the stream
    ends (one C-level parse instead of one per chunk keeps the relay's CPU cost low).
    """

    def __init__(self) -> None:
        self._buffer = b""
        self._data: list[bytes] = []  # data lines of the event in progress
        self._events: list[bytes] = []  # complete event payloads, JSON still undecoded
        self._done = False
        self.finished = False  # an event with a finish_reason arrived: the reply text is whole
        self.malformed = 0

    @property
    def done(self) -> bool:
        """The ``[DONE]`` event arrived."""
        return self._done

    @property
    def at_event_boundary(self) -> bool:
        """True when no event is half received (safe to append an event of our own)."""
        return not self._buffer and not self._data

    def feed(self, chunk: bytes) -> None:
        buffer = self._buffer + chunk if self._buffer else chunk
        if b"\r" in buffer:
            if buffer.endswith(b"\r"):  # its "\n" may still be on the way: decide later
                self._buffer = buffer
                return
            buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        end = buffer.rfind(b"\n")
        if end < 0:
            self._buffer = buffer
            return
        self._buffer = buffer[end + 1:]
        self._lines(buffer[:end].split(b"\n"))

    def _lines(self, lines: list[bytes]) -> None:
        data = self._data
        for line in lines:
            if not line:
                if data:
                    payload = b"\n".join(data) if len(data) > 1 else data[0]
                    data.clear()
                    self._event(payload)
            elif line.startswith(b"data:"):
                data.append(line[6:] if line[5:6] == b" " else line[5:])
            # comments (":") and the event/id/retry fields carry nothing we keep

    def _event(self, payload: bytes) -> None:
        """One whole event's data; protocols other than chat read other events."""
        if payload.strip() == b"[DONE]":
            self._done = True
        else:
            self._events.append(payload)
            if not self.finished and b"finish_reason" in payload \
                    and _FINISH_SET.search(payload):
                self.finished = True

    def _flush(self) -> None:
        """End of stream: a last unterminated line or event still counts."""
        if self._buffer:
            tail = self._buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            self._buffer = b""
            self._lines([*tail.split(b"\n"), b""])
        self._lines([b""])

    def finish(self) -> CapturedReply:
        self._flush()
        builder = _ReplyBuilder()
        for chunk in self._decode():
            builder.add_chunk(chunk)
        builder.reply.done = self._done
        return builder.finish()

    def _decode(self) -> list[Any]:
        if not self._events:
            return []
        try:
            decoded: list[Any] = json.loads(b"[" + b",".join(self._events) + b"]")
            if len(decoded) == len(self._events):
                return decoded
        except ValueError:
            pass
        chunks = []  # some event is not JSON: decode one by one, skipping the bad ones
        for payload in self._events:
            try:
                chunks.append(json_of(payload))
            except ValueError:
                self.malformed += 1
        return chunks


def done_event_start(chunk: bytes) -> int:
    """Where the ``[DONE]`` event starts in ``chunk``; 0 when it began in an earlier chunk."""
    found = _DONE_EVENT.search(chunk)
    return found.start() if found else 0


class JsonCapture:
    """The same interface for a non-stream body: collect it, parse it at the end."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self.at_event_boundary = False
        self.finished = False
        self.done = False

    def feed(self, chunk: bytes) -> None:
        self._parts.append(chunk)

    def finish(self) -> CapturedReply:
        return capture_completion(b"".join(self._parts))


def json_of(data: bytes | str) -> Any:
    """JSON from a provider's bytes. Bytes that are not UTF-8 (a provider cutting a character
    in two) become U+FFFD in what is stored instead of losing the whole event; the client
    still gets the provider's bytes unchanged."""
    try:
        return json.loads(data)
    except UnicodeDecodeError:
        assert isinstance(data, bytes)
        return json.loads(data.decode("utf-8", "replace"))


def capture_completion(body: bytes | str | dict[str, Any]) -> CapturedReply:
    """Read a non-stream chat completion body (bytes or parsed) into a CapturedReply."""
    data: Any = body
    if isinstance(body, (bytes, str)):
        try:
            data = json_of(body)
        except ValueError:
            return CapturedReply(error={"message": "reply body is not JSON"})
    builder = _ReplyBuilder()
    if not isinstance(data, dict):
        builder.reply.error = {"message": "reply body is not a JSON object"}
        return builder.finish()
    builder.add_chunk(data)
    choices = data.get("choices")
    if isinstance(choices, list) and choices and not builder.reply.error:
        builder.reply.done = True
    elif not builder.reply.error:
        builder.reply.error = {"message": "reply has no choices"}
    return builder.finish()


def new_capture(content_type: str) -> SseCapture | JsonCapture:
    """Pick the capture for a response's Content-Type."""
    if "text/event-stream" in content_type.lower():
        return SseCapture()
    return JsonCapture()
