"""The reply captures: SSE split anywhere, tool calls merged by index with every extra kept,
usage, finish reasons, and the same fields from a JSON body."""

from __future__ import annotations

import itertools
import json
from typing import Any

from pawwake.llm.sse import (
    CapturedReply,
    JsonCapture,
    SseCapture,
    TokenUsage,
    capture_completion,
    new_capture,
)
from tests.fake_upstream import (
    EXPECTED_CALLS,
    chat_chunk,
    completion_body,
    sse,
    text_stream,
    tool_call_stream,
)


def capture_all(data: bytes, cuts: list[int] | None = None) -> CapturedReply:
    capture = SseCapture()
    edges = [0, *(cuts or []), len(data)]
    for start, end in itertools.pairwise(edges):
        capture.feed(data[start:end])
    return capture.finish()


def test_text_stream_with_usage_only_final_chunk() -> None:
    reply = capture_all(b"".join(text_stream("你好，world", pieces=4)))
    assert reply.content == "你好，world"
    assert reply.finish_reason == "stop"
    assert reply.done and reply.complete
    assert reply.usage == TokenUsage(prompt=11, completion=7, total=18, cached=None)
    assert reply.model == "test/model-a"


def test_every_split_point_gives_the_same_capture() -> None:
    data = b"".join(tool_call_stream()) + b"".join(text_stream("尾巴🐾", pieces=2))
    whole = capture_all(data)
    for cut in range(1, len(data)):
        assert capture_all(data, [cut]) == whole, cut
    byte_by_byte = capture_all(data, list(range(1, len(data))))
    assert byte_by_byte == whole


def test_tool_calls_merge_by_index_and_keep_unknown_keys() -> None:
    reply = capture_all(b"".join(tool_call_stream()))
    assert reply.tool_calls == EXPECTED_CALLS
    assert reply.reasoning_content == "need both"
    assert reply.finish_reason == "tool_calls"
    assert reply.usage is not None and reply.usage.cached == 16
    message = reply.assistant_message()
    assert message["tool_calls"] == EXPECTED_CALLS
    assert message["reasoning_content"] == "need both"


def test_tool_call_deltas_without_index_follow_their_id() -> None:
    data = b"".join([
        sse(chat_chunk({"tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{"}}]})),
        sse(chat_chunk({"tool_calls": [{"function": {"arguments": "}"}}]})),
        sse(chat_chunk({"tool_calls": [{"id": "b", "function": {"name": "g",
                                                               "arguments": {"x": 1}}}]})),
        sse(chat_chunk({}, finish_reason="tool_calls")),
    ])
    reply = capture_all(data)
    assert reply.tool_calls == [
        {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
        {"id": "b", "type": "function", "function": {"name": "g", "arguments": '{"x": 1}'}}]


def test_repeated_names_and_signatures_are_not_doubled() -> None:
    data = b"".join([
        sse(chat_chunk({"tool_calls": [{"index": 0, "id": "a", "type": "function",
                                        "extra_content": {"google": {"thought_signature": "s"}},
                                        "function": {"name": "f", "arguments": "{"}}]})),
        sse(chat_chunk({"tool_calls": [{"index": 0, "id": "a", "type": "function",
                                        "extra_content": {"google": {"thought_signature": "s"}},
                                        "function": {"name": "f", "arguments": "}"}}]})),
    ])
    reply = capture_all(data)
    assert reply.tool_calls == [{"id": "a", "type": "function",
                                 "extra_content": {"google": {"thought_signature": "s"}},
                                 "function": {"name": "f", "arguments": "{}"}}]


def test_unknown_delta_keys_are_kept_as_extras() -> None:
    data = b"".join([
        sse(chat_chunk({"reasoning": "step one, "})),
        sse(chat_chunk({"reasoning": "step two", "reasoning_details": [{"type": "t", "n": 1}]})),
        sse(chat_chunk({"reasoning_details": [{"type": "t", "n": 2}], "content": "done"})),
        sse(chat_chunk({}, finish_reason="stop")),
    ])
    reply = capture_all(data)
    assert reply.extras == {"reasoning": "step one, step two",
                            "reasoning_details": [{"type": "t", "n": 1}, {"type": "t", "n": 2}]}
    assert reply.assistant_message() == {"role": "assistant", "content": "done",
                                         **reply.extras}


def test_line_endings_comments_and_multiline_data() -> None:
    chunk = json.dumps(chat_chunk({"content": "crlf"}))
    second = json.dumps(chat_chunk({"content": "-cr"}))
    data = (b": keep-alive\r\n\r\nevent: message\r\nid: 7\r\ndata:" + chunk.encode() + b"\r\n\r\n"
            + b"data: " + second.encode() + b"\r\r"
            + b'data: {"choices": [{"index": 0,\ndata:  "delta": {"content": "-multi"}}]}\n\n'
            + b"retry: 100\n\ndata: [DONE]\n\n")
    for cut in range(1, len(data)):
        reply = capture_all(data, [cut])
        assert reply.content == "crlf-cr-multi", cut
        assert reply.done


def test_last_event_without_blank_line_still_counts() -> None:
    data = sse(chat_chunk({"content": "tail"}, finish_reason="stop")).rstrip(b"\n")
    reply = capture_all(data)
    assert reply.content == "tail" and reply.complete


def test_error_event_and_missing_end_are_not_complete() -> None:
    error = capture_all(sse(chat_chunk({"content": "par"})) + sse(
        {"error": {"message": "overloaded", "code": 502}}) + sse("[DONE]"))
    assert error.error == {"message": "overloaded", "code": 502}
    assert not error.complete
    cut = capture_all(b"".join(text_stream("abc", pieces=3)[:3]))
    assert cut.content == "ab" and not cut.complete


def test_malformed_events_are_skipped() -> None:
    capture = SseCapture()
    capture.feed(b"data: {broken\n\n" + b"".join(text_stream("ok", pieces=1)))
    reply = capture.finish()
    assert reply.content == "ok" and reply.complete
    assert capture.malformed == 1


def test_event_boundary_tracking() -> None:
    capture = SseCapture()
    assert capture.at_event_boundary
    capture.feed(b'data: {"a"')
    assert not capture.at_event_boundary
    capture.feed(b": 1}\n")
    assert not capture.at_event_boundary
    capture.feed(b"\n")
    assert capture.at_event_boundary


def test_non_stream_capture_reads_the_same_fields() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"},
            "extra_content": {"google": {"thought_signature": "z"}}}
    body = completion_body("", tool_calls=[call], reasoning_content="why",
                           annotations=[{"type": "url_citation"}], refusal=None,
                           finish_reason="tool_calls",
                           usage={"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7,
                                  "prompt_tokens_details": {"cached_tokens": 3}})
    for source in (body, json.dumps(body).encode(), json.dumps(body)):
        reply = capture_completion(source)
        assert reply.complete
        assert reply.tool_calls == [call]
        assert reply.reasoning_content == "why"
        assert reply.extras == {"annotations": [{"type": "url_citation"}]}
        assert reply.usage == TokenUsage(prompt=5, completion=2, total=7, cached=3)
        assert reply.finish_reason == "tool_calls"


def test_non_stream_capture_of_bad_bodies() -> None:
    assert capture_completion(b"<html>").error is not None
    assert capture_completion(b"[1]").error is not None
    assert not capture_completion(b'{"choices": []}').complete
    json_capture = new_capture("application/json; charset=utf-8")
    assert isinstance(json_capture, JsonCapture)
    body = json.dumps(completion_body("split")).encode()
    json_capture.feed(body[:10])
    json_capture.feed(body[10:])
    assert json_capture.finish().content == "split"
    assert isinstance(new_capture("text/event-stream; charset=utf-8"), SseCapture)


def test_token_usage_reading() -> None:
    assert TokenUsage.from_openai(None) is None
    assert TokenUsage.from_openai({"prompt_tokens": 4, "completion_tokens": 1}) == TokenUsage(
        4, 1, 5, None)
    odd: dict[str, Any] = {"prompt_tokens": True, "completion_tokens": -3, "total_tokens": "9",
                           "cache_read_input_tokens": 2}
    assert TokenUsage.from_openai(odd) == TokenUsage(0, 0, 0, 2)
