"""``complete()``: the gateway's own calls to the provider (extraction, summaries...)."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from pawwake.llm.upstream import (
    UpstreamStatusError,
    UpstreamUnreachable,
    complete,
    retry_after_seconds,
)
from pawwake.settings import Settings
from tests.fake_upstream import FakeUpstream, Reply, completion_body


@pytest.fixture
async def http() -> Any:
    async with aiohttp.ClientSession() as session:
        yield session


def settings_for(upstream: FakeUpstream, **overrides: Any) -> Settings:
    return Settings.from_env({}, API_BASE_URL=upstream.base_url, API_KEY="sk-own-calls",
                             DEFAULT_MODEL="test/model-a", **overrides)


async def test_complete_returns_text_usage_and_raw(http: Any, upstream: FakeUpstream) -> None:
    upstream.reply_text("整理好了")
    result = await complete(http, settings_for(upstream), [{"role": "user", "content": "x"}],
                            model="test/small", max_tokens=50, temperature=0.1,
                            extra={"response_format": {"type": "json_object"}})
    assert result.text == "整理好了"
    assert result.finish_reason == "stop"
    assert not result.truncated
    assert result.usage is not None and result.usage.total == 18
    assert result.raw["object"] == "chat.completion"
    sent = upstream.requests[0]
    assert sent.body == {"model": "test/small", "messages": [{"role": "user", "content": "x"}],
                         "stream": False, "max_tokens": 50, "temperature": 0.1,
                         "response_format": {"type": "json_object"}}
    assert sent.headers["Authorization"] == "Bearer sk-own-calls"


async def test_complete_retries_429_honouring_retry_after(http: Any,
                                                          upstream: FakeUpstream) -> None:
    upstream.reply_error(429, headers={"Retry-After": "0"})
    upstream.reply_error(429, headers={"Retry-After": "0.01"})
    upstream.reply_text("finally")
    result = await complete(http, settings_for(upstream), [{"role": "user", "content": "x"}])
    assert result.text == "finally"
    assert len(upstream.requests) == 3


async def test_complete_gives_up_after_the_last_attempt(http: Any,
                                                        upstream: FakeUpstream) -> None:
    for _ in range(2):
        upstream.reply_error(429, headers={"Retry-After": "0"})
    with pytest.raises(UpstreamStatusError) as caught:
        await complete(http, settings_for(upstream), [{"role": "user", "content": "x"}],
                       attempts=2)
    assert caught.value.status == 429
    assert len(upstream.requests) == 2


async def test_complete_reports_truncation(http: Any, upstream: FakeUpstream) -> None:
    upstream.queue(Reply(body=completion_body("half a sent", finish_reason="length")))
    result = await complete(http, settings_for(upstream), [{"role": "user", "content": "x"}])
    assert result.truncated
    assert result.text == "half a sent"


async def test_complete_raises_on_other_statuses_without_retrying(
        http: Any, upstream: FakeUpstream) -> None:
    upstream.reply_error(400, "bad model")
    with pytest.raises(UpstreamStatusError) as caught:
        await complete(http, settings_for(upstream), [{"role": "user", "content": "x"}])
    assert caught.value.status == 400
    assert b"bad model" in caught.value.body
    assert len(upstream.requests) == 1


async def test_complete_unreachable(http: Any) -> None:
    settings = Settings.from_env({}, API_BASE_URL="http://127.0.0.1:9/v1", API_KEY="k")
    with pytest.raises(UpstreamUnreachable):
        await complete(http, settings, [{"role": "user", "content": "x"}])


def test_retry_after_parsing() -> None:
    assert retry_after_seconds("3", 0) == 3.0
    assert retry_after_seconds(None, 0) == 1.0
    assert retry_after_seconds(None, 3) == 8.0
    assert retry_after_seconds("9999", 0, cap=60) == 60
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT", 2) == 0.0  # in the past
    assert retry_after_seconds("soon", 1) == 2.0
