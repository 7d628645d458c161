"""A provider's non-200 answer is diagnosable from the log: its error body (bounded, secrets
masked) and the request's message structure, never the conversation text."""

from __future__ import annotations

import json
import logging

import pytest

from pawwake.llm.upstream_errors import MAX_BODY_CHARS, error_body_text, message_summary
from tests.fake_upstream import FakeUpstream, Reply
from tests.gateway_support import GatewayStarter, chat_body

UPSTREAM_KEY = "sk-upstream-test-key-0123456789"
SECRET_WORDS = ["清水寺那天的行程", "tool says sunny", "look at this", "be a kind cat",
                "checking the weather"]


def history() -> list[dict[str, object]]:
    return [
        {"role": "system", "content": "be a kind cat"},
        {"role": "user", "content": "清水寺那天的行程"},
        {"role": "assistant", "content": "checking the weather",
         "tool_calls": [{"id": "call_1", "type": "function",
                         "function": {"name": "weather", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "tool says sunny"},
        {"role": "user", "content": [
            {"type": "text", "text": "look at this"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
    ]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_provider_error_logs_its_body_and_the_message_shape(
        gateway: GatewayStarter, upstream: FakeUpstream, caplog: pytest.LogCaptureFixture,
        stream: bool) -> None:
    error = {"error": {"message": "messages.3: tool_call_id does not match; key "
                       + UPSTREAM_KEY + " was used", "code": "invalid_request_error"}}
    raw = json.dumps(error).encode()
    upstream.queue(Reply(status=400, raw_body=raw, content_type="application/json"))
    client = await gateway()
    with caplog.at_level(logging.WARNING, logger="pawwake.llm.upstream_errors"):
        response = await client.post("/v1/chat/completions",
                                     json=chat_body(stream=stream, messages=history()))
    assert response.status == 400
    assert await response.read() == raw  # the client still gets the body unchanged
    lines = [r.getMessage() for r in caplog.records
             if r.name == "pawwake.llm.upstream_errors" and r.levelno == logging.WARNING]
    assert len(lines) == 1
    line = lines[0]
    assert "upstream answered 400" in line
    assert "tool_call_id does not match" in line
    assert UPSTREAM_KEY not in line and "****" in line
    assert "messages=5" in line
    assert "'user': 2" in line and "'assistant': 1" in line and "'tool': 1" in line
    assert "assistant:text+tool_calls×1" in line
    assert "tool:text+tool_call_id" in line
    assert "user:parts(text,image_url)" in line
    for words in SECRET_WORDS:
        assert words not in line
    assert "base64" not in line


def test_a_long_body_is_cut_and_secrets_of_the_settings_are_masked() -> None:
    password = "dashboard-password-abc"
    data = ("x" * 10 + password + "y" * (3 * MAX_BODY_CHARS) + "\n").encode()
    text = error_body_text(data, {"DASHBOARD_PASSWORD": password})
    assert password not in text and "****" in text
    assert len(text) < MAX_BODY_CHARS + 100
    assert text.endswith("bytes in all]") and "\n" not in text


def test_a_long_history_lists_its_ends_and_counts_all() -> None:
    body = {"messages": [{"role": "user", "content": f"m{i}"} for i in range(500)]}
    summary = message_summary(body)
    assert "messages=500" in summary and "'user': 500" in summary
    assert "…460 more…" in summary
    assert "m499" not in summary
