"""Capture of a Messages reply from the provider's bytes: the SSE events (``message_start``
... ``message_stop``) or a non-stream message body.

The bytes go to the client untouched; this reads a copy to learn the content blocks (text,
tool use, thinking with its signature), the stop reason and the token usage, so the turn can
be stored and later replayed to the provider exactly.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pawwake.llm.sse import CapturedReply, SseCapture, TokenUsage, json_of, token_count
from pawwake.protocols.anthropic.request import (
    PROTOCOL,
    blocks_text,
    stored_block,
    thinking_text,
    tool_calls_of,
)

# Anthropic sends the event name on its own line and as the payload's first key.
_EVENT_TYPE = re.compile(rb'^\{\s*"type"\s*:\s*"([a-z_]+)"')
_STOP_EVENT = re.compile(rb"(?m)^(?:event: ?message_stop|data: ?\{\s*\"type\"\s*:\s*"
                         rb"\"message_stop\")")
_STOP_REASON_SET = re.compile(rb'"stop_reason"\s*:\s*"')


def stop_event_start(chunk: bytes) -> int:
    """Where the ``message_stop`` event starts in ``chunk``; 0 when it began earlier."""
    found = _STOP_EVENT.search(chunk)
    return found.start() if found else 0


def anthropic_usage(usage: Any) -> dict[str, Any] | None:
    """Anthropic's usage as the OpenAI-shaped dict the rest of the gateway reads: prompt
    tokens count every input token (fresh, cache written, cache read), as OpenAI's do."""
    if not isinstance(usage, dict):
        return None
    fresh = token_count(usage.get("input_tokens"))
    created = token_count(usage.get("cache_creation_input_tokens"))
    read = token_count(usage.get("cache_read_input_tokens"))
    output = token_count(usage.get("output_tokens"))
    shaped: dict[str, Any] = {"prompt_tokens": fresh + created + read,
                              "completion_tokens": output,
                              "total_tokens": fresh + created + read + output,
                              "prompt_tokens_details": {"cached_tokens": read},
                              "cache_creation_input_tokens": created}
    return shaped


class MessageBuilder:
    """Merges Messages events into the reply's content blocks, usage and stop reason."""

    def __init__(self) -> None:
        self.blocks: dict[int, dict[str, Any]] = {}
        self.partial_json: dict[int, list[str]] = {}
        self.usage: dict[str, Any] = {}
        self.stop_reason: str | None = None
        self.stopped = False
        self.error: Any = None
        self.model: str | None = None
        self.message_id: str | None = None

    def add(self, event: Any) -> None:
        if not isinstance(event, dict):
            return
        kind = event.get("type")
        if kind == "message_start" and isinstance(event.get("message"), dict):
            message = event["message"]
            self.model = message.get("model") if isinstance(message.get("model"), str) \
                else self.model
            self.message_id = message.get("id") if isinstance(message.get("id"), str) \
                else None
            self._usage(message.get("usage"))
        elif kind == "content_block_start" and isinstance(event.get("content_block"), dict):
            self.blocks[_index(event)] = dict(event["content_block"])
        elif kind == "content_block_delta" and isinstance(event.get("delta"), dict):
            self._delta(_index(event), event["delta"])
        elif kind == "message_delta":
            delta = event.get("delta")
            if isinstance(delta, dict) and delta.get("stop_reason") is not None:
                self.stop_reason = str(delta["stop_reason"])
            self._usage(event.get("usage"))
        elif kind == "message_stop":
            self.stopped = True
        elif kind == "error":
            self.error = event.get("error") or {"type": "error"}

    def _usage(self, usage: Any) -> None:
        """``message_delta`` counts are cumulative: a later value replaces an earlier one."""
        if isinstance(usage, dict):
            self.usage.update({k: v for k, v in usage.items() if v is not None})

    def _delta(self, index: int, delta: dict[str, Any]) -> None:
        block = self.blocks.setdefault(index, {"type": "text", "text": ""})
        kind = delta.get("type")
        if kind == "text_delta":
            block["text"] = str(block.get("text") or "") + str(delta.get("text") or "")
        elif kind == "input_json_delta":
            self.partial_json.setdefault(index, []).append(str(delta.get("partial_json") or ""))
        elif kind == "thinking_delta":
            block["thinking"] = str(block.get("thinking") or "") + str(
                delta.get("thinking") or "")
        elif kind == "signature_delta":
            block["signature"] = str(block.get("signature") or "") + str(
                delta.get("signature") or "")
        elif kind == "citations_delta" and isinstance(delta.get("citation"), dict):
            block.setdefault("citations", []).append(delta["citation"])

    def content(self) -> list[dict[str, Any]]:
        blocks = []
        for index in sorted(self.blocks):
            block = self.blocks[index]
            pieces = self.partial_json.get(index)
            if pieces is not None:
                joined = "".join(pieces)
                try:
                    block["input"] = json.loads(joined) if joined.strip() else {}
                except ValueError:
                    block["input"] = {"_unparsed": joined}
            blocks.append(block)
        return blocks

    def reply(self) -> CapturedReply:
        content = self.content()
        raw_usage = anthropic_usage(self.usage) if self.usage else None
        return CapturedReply(
            content=blocks_text(content), reasoning_content=thinking_text(content),
            tool_calls=tool_calls_of(content), raw_usage=raw_usage,
            usage=TokenUsage.from_openai(raw_usage), finish_reason=self.stop_reason,
            done=self.stopped, model=self.model, error=self.error,
            metadata={"protocol": PROTOCOL,
                      "content_blocks": [stored_block(b) for b in content]})


def _index(event: dict[str, Any]) -> int:
    index = event.get("index")
    return index if isinstance(index, int) and not isinstance(index, bool) else 0


class MessagesSseCapture(SseCapture):
    """Incremental SSE reader for Messages events (chat's framing, see SseCapture).

    ``finished``: a ``message_delta`` with a stop reason arrived (the reply is whole);
    ``done``: ``message_stop`` arrived. Payloads are decoded once, at the end.
    """

    def _event(self, payload: bytes) -> None:
        found = _EVENT_TYPE.match(payload)
        kind = found.group(1) if found else b""
        if kind == b"ping":
            return
        self._events.append(payload)
        if kind == b"message_delta" and _STOP_REASON_SET.search(payload):
            self.finished = True
        elif kind == b"message_stop":
            self._done = True
            self.finished = True

    def finish(self) -> CapturedReply:
        self._flush()
        builder = MessageBuilder()
        for event in self._decode():
            builder.add(event)
        return builder.reply()


def capture_message(body: bytes) -> CapturedReply:
    """A non-stream Messages reply (``{"type": "message", "content": [...]}``)."""
    try:
        data = json_of(body)
    except ValueError:
        return CapturedReply(error={"message": "reply body is not JSON"})
    if not isinstance(data, dict) or data.get("type") != "message" \
            or not isinstance(data.get("content"), list):
        return CapturedReply(error={"message": "reply is not a message"})
    builder = MessageBuilder()
    builder.model = data.get("model") if isinstance(data.get("model"), str) else None
    builder.blocks = {i: b for i, b in enumerate(data["content"]) if isinstance(b, dict)}
    builder._usage(data.get("usage"))
    builder.stop_reason = data.get("stop_reason") if isinstance(
        data.get("stop_reason"), str) else None
    builder.stopped = True
    return builder.reply()
