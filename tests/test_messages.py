"""Anthropic's Messages API through the gateway, driven by the real ``anthropic`` SDK against
a fake Anthropic-format provider: relay, storage, memory, usage, errors and auth."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anthropic
import pytest
from bs4 import BeautifulSoup

from pawwake.conversations.turn_spool import SpooledTurn, decode, encode
from pawwake.db.pool import cursor, fetch_one
from pawwake.llm.sse import CapturedReply
from pawwake.protocols.anthropic.upstream import messages_headers, messages_url
from pawwake.services import services_of
from pawwake.settings import Settings
from tests.dashboard_support import PASSWORD, SECRET, login
from tests.fake_anthropic import FakeAnthropic, Reply, message_stream
from tests.gateway_support import GATEWAY_KEY, settle, stored_messages
from tests.messages_support import (
    MEMORY_ON,
    anthropic_upstream,  # noqa: F401  (fixture)
    sdk,
    start_gateway,
    usage_with_cache,
)
from tests.test_memory_injection import add_memory
from tests.turn_support import read_until

SESSION = "cc-session-0001"
HEADERS = {"X-Claude-Code-Session-Id": SESSION}


async def test_stream_is_relayed_byte_for_byte_and_the_turn_stored(
        gateway: Any, anthropic_upstream: FakeAnthropic) -> None:  # noqa: F811
    client = await start_gateway(gateway, anthropic_upstream)
    anthropic_upstream.reply_text("你好，我是小爪")
    async with sdk(client) as api:
        async with api.messages.stream(model="claude-test-1", max_tokens=100,
                                       messages=[{"role": "user", "content": "你好"}],
                                       extra_headers=HEADERS) as stream:
            text = "".join([piece async for piece in stream.text_stream])
            final = await stream.get_final_message()
    assert text == "你好，我是小爪"
    assert final.usage.cache_read_input_tokens == 200
    sent = anthropic_upstream.requests[-1]
    assert sent.headers["Authorization"] == "Bearer sk-upstream-test-key-0123456789"
    assert GATEWAY_KEY not in json.dumps(sent.headers)
    assert sent.headers["anthropic-version"] == anthropic.AsyncAnthropic(
        api_key="x").default_headers["anthropic-version"]  # the client's own, passed on
    await settle(client)
    rows = await stored_messages(client, SESSION)
    assert [(r["role"], r["content"]) for r in rows] == [("user", "你好"),
                                                          ("assistant", "你好，我是小爪")]
    assert rows[1]["metadata"]["protocol"] == "messages"
    assert rows[1]["metadata"]["content_blocks"] == [{"type": "text", "text": "你好，我是小爪"}]
    assert rows[0]["metadata"]["protocol"] == "messages"


async def test_raw_stream_bytes_reach_the_client_unchanged(
        gateway: Any, anthropic_upstream: FakeAnthropic) -> None:  # noqa: F811
    client = await start_gateway(gateway, anthropic_upstream)
    chunks = message_stream([{"type": "text", "text": "abc"}])
    anthropic_upstream.queue(Reply(chunks=chunks))
    response = await client.post("/v1/messages", json={
        "model": "claude-test-1", "max_tokens": 10, "stream": True,
        "messages": [{"role": "user", "content": "hi"}]}, headers={"x-api-key": GATEWAY_KEY})
    assert response.status == 200
    assert await response.read() == b"".join(chunks)


async def test_non_stream_reply_and_usage_with_cache_tokens(
        gateway: Any, anthropic_upstream: FakeAnthropic) -> None:  # noqa: F811
    client = await start_gateway(gateway, anthropic_upstream)
    anthropic_upstream.reply_text("plain answer")
    async with sdk(client) as api:
        message = await api.messages.create(
            model="claude-test-1", max_tokens=100, extra_headers=HEADERS,
            messages=[{"role": "user", "content": "hello"}])
    assert message.content[0].text == "plain answer"
    rows = await stored_messages(client, SESSION)  # stored before the body was sent
    assert [r["content"] for r in rows] == ["hello", "plain answer"]
    await settle(client)
    usage = await usage_with_cache(client)
    assert usage == [{"session_id": SESSION, "model": "claude-test-1", "prompt_tokens": 242,
                      "completion_tokens": 9, "total_tokens": 251, "cached_tokens": 200,
                      "cache_creation_tokens": 30}]


async def test_streamed_usage_with_cache_tokens_is_stored(
        gateway: Any, anthropic_upstream: FakeAnthropic) -> None:  # noqa: F811
    client = await start_gateway(gateway, anthropic_upstream)
    anthropic_upstream.reply_text("x", output_tokens=17)
    async with sdk(client) as api:
        async with api.messages.stream(model="claude-test-1", max_tokens=100,
                                       messages=[{"role": "user", "content": "q"}],
                                       extra_headers=HEADERS) as stream:
            await stream.get_final_message()
    await settle(client)
    usage = await usage_with_cache(client)
    assert usage[0]["prompt_tokens"] == 242 and usage[0]["completion_tokens"] == 17
    assert (usage[0]["cached_tokens"], usage[0]["cache_creation_tokens"]) == (200, 30)


async def test_tool_use_round_trip_and_thinking_signature_replayed_unchanged(
        gateway: Any, anthropic_upstream: FakeAnthropic) -> None:  # noqa: F811
    client = await start_gateway(gateway, anthropic_upstream)
    thinking = {"type": "thinking", "thinking": "Need the weather.", "signature": "sig-Abc=="}
    tool = {"type": "tool_use", "id": "toolu_01", "name": "get_weather",
            "input": {"city": "杭州"}}
    anthropic_upstream.reply_blocks([thinking, tool], stop_reason="tool_use")
    tools = [{"name": "get_weather", "description": "weather",
              "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]
    question = {"role": "user", "content": "杭州天气？"}
    async with sdk(client) as api:
        async with api.messages.stream(model="claude-test-1", max_tokens=100, tools=tools,
                                       messages=[question], extra_headers=HEADERS) as stream:
            first = await stream.get_final_message()
        assert first.stop_reason == "tool_use"
        assistant = {"role": "assistant",
                     "content": [block.model_dump(exclude_none=True) for block in first.content]}
        assert assistant["content"][0] == thinking
        result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01",
                                                "content": "晴，25度"}]}
        anthropic_upstream.reply_text("杭州今天晴，25度。")
        async with api.messages.stream(model="claude-test-1", max_tokens=100, tools=tools,
                                       messages=[question, assistant, result],
                                       extra_headers=HEADERS) as stream:
            second = await stream.get_final_message()
    assert second.content[0].text == "杭州今天晴，25度。"
    replayed = anthropic_upstream.requests[-1].body["messages"][1]["content"]
    assert replayed[0] == thinking  # the signature travels back unchanged
    await settle(client)
    rows = await stored_messages(client, SESSION)
    assert [r["role"] for r in rows] == ["user", "assistant", "tool", "assistant"]
    call = rows[1]["metadata"]
    assert call["tool_calls"][0]["id"] == "toolu_01"
    assert call["content_blocks"] == [thinking, tool]
    assert rows[2]["metadata"]["tool_call_id"] == "toolu_01"
    assert rows[2]["content"] == "晴，25度"
    assert rows[2]["metadata"]["content_blocks"][0]["type"] == "tool_result"


async def test_images_are_stored_as_a_placeholder(
        gateway: Any, anthropic_upstream: FakeAnthropic) -> None:  # noqa: F811
    client = await start_gateway(gateway, anthropic_upstream)
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": "iVBORw0KGgo" * 50}}
    async with sdk(client) as api:
        await api.messages.create(model="claude-test-1", max_tokens=10, extra_headers=HEADERS,
                                  messages=[{"role": "user", "content": [
                                      image, {"type": "text", "text": "这是什么？"}]}])
    rows = await stored_messages(client, SESSION)
    assert rows[0]["content"] == "这是什么？"
    assert rows[0]["metadata"]["content_blocks"][0] == {"type": "image", "omitted": True,
                                                         "media_type": "image/png"}
    assert "iVBOR" not in json.dumps(rows[0]["metadata"])
    sent = anthropic_upstream.requests[-1].body["messages"][0]["content"][0]
    assert sent == image  # the provider still gets the image itself


async def test_memory_and_persona_go_after_the_client_system_blocks(
        gateway: Any, anthropic_upstream: FakeAnthropic) -> None:  # noqa: F811
    client = await start_gateway(gateway, anthropic_upstream, persona="你是小爪。", **MEMORY_ON)
    await add_memory(client, "用户的猫叫小橘", event_date="2026-02-17")
    system = [{"type": "text", "text": "You are Claude Code.",
               "cache_control": {"type": "ephemeral"}}]
    async with sdk(client) as api:
        await api.messages.create(model="claude-test-1", max_tokens=10, system=system,
                                  extra_headers=HEADERS,
                                  messages=[{"role": "user", "content": "小橘最近胃口不好"}])
    sent = anthropic_upstream.requests[-1].body["system"]
    assert sent[0] == system[0]  # the client's cached block first, untouched
    assert sent[1]["text"].startswith("你是小爪。")
    assert "<retrieved_memories>\n[2026-02-17] 用户的猫叫小橘" in sent[1]["text"]
    assert anthropic_upstream.requests[-1].body["messages"] == [
        {"role": "user", "content": "小橘最近胃口不好"}]


async def test_string_system_gets_memory_appended(
        gateway: Any, anthropic_upstream: FakeAnthropic) -> None:  # noqa: F811
    client = await start_gateway(gateway, anthropic_upstream, **MEMORY_ON)
    await add_memory(client, "用户的猫叫小橘")
    async with sdk(client) as api:
        await api.messages.create(model="claude-test-1", max_tokens=10, system="Be brief.",
                                  extra_headers=HEADERS,
                                  messages=[{"role": "user", "content": "小橘在哪"}])
    sent = anthropic_upstream.requests[-1].body["system"]
    assert sent.startswith("Be brief.\n\n") and "用户的猫叫小橘" in sent


async def test_nothing_to_add_forwards_the_client_bytes(
        gateway: Any, anthropic_upstream: FakeAnthropic) -> None:  # noqa: F811
    client = await start_gateway(gateway, anthropic_upstream)
    raw = b'{"model": "claude-test-1", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}'
    response = await client.post("/v1/messages", data=raw, headers={
        "x-api-key": GATEWAY_KEY, "Content-Type": "application/json",
        "anthropic-beta": "interleaved-thinking-2025-05-14,context-1m",
        "anthropic-version": "2023-06-01"})
    assert response.status == 200
    sent = anthropic_upstream.requests[-1]
    assert sent.raw == raw
    assert sent.headers["anthropic-beta"] == "interleaved-thinking-2025-05-14,context-1m"


@pytest.mark.parametrize("status,kind", [(400, "invalid_request_error"),
                                         (529, "overloaded_error")])
async def test_upstream_errors_reach_the_client_unchanged(
        gateway: Any, anthropic_upstream: FakeAnthropic, status: int,  # noqa: F811
        kind: str) -> None:
    client = await start_gateway(gateway, anthropic_upstream)
    anthropic_upstream.reply_error(status, kind, "provider says no")
    async with sdk(client) as api:
        with pytest.raises(anthropic.APIStatusError) as caught:
            await api.messages.create(model="claude-test-1", max_tokens=10,
                                      extra_headers=HEADERS,
                                      messages=[{"role": "user", "content": "q"}])
    assert caught.value.status_code == status
    assert caught.value.body == {"type": "error", "error": {"type": kind,
                                                            "message": "provider says no"}}
    await settle(client)
    assert await stored_messages(client, SESSION) == []


async def test_a_cut_stream_ends_with_an_anthropic_error_event(
        gateway: Any, anthropic_upstream: FakeAnthropic) -> None:  # noqa: F811
    client = await start_gateway(gateway, anthropic_upstream)
    anthropic_upstream.queue(Reply(chunks=message_stream([{"type": "text", "text": "half"}]),
                                   cut_after=4))
    response = await client.post("/v1/messages", json={
        "model": "claude-test-1", "max_tokens": 10, "stream": True,
        "messages": [{"role": "user", "content": "q"}]}, headers={"x-api-key": GATEWAY_KEY})
    body = await response.read()
    assert body.endswith(b'event: error\ndata: {"type":"error","error":{"type":"api_error",'
                         b'"message":"The upstream API broke off the stream."}}\n\n')
    async with sdk(client) as api:
        anthropic_upstream.queue(Reply(chunks=message_stream([{"type": "text",
                                                               "text": "half"}]), cut_after=4))
        with pytest.raises(anthropic.APIStatusError):
            async with api.messages.stream(model="claude-test-1", max_tokens=10,
                                           messages=[{"role": "user", "content": "q"}],
                                           extra_headers=HEADERS) as stream:
                await stream.get_final_message()
    await settle(client)
    assert await stored_messages(client, SESSION) == []


async def test_auth_with_x_api_key_and_bearer_and_refused_without(
        gateway: Any, anthropic_upstream: FakeAnthropic) -> None:  # noqa: F811
    client = await start_gateway(gateway, anthropic_upstream)
    body = {"model": "claude-test-1", "max_tokens": 5,
            "messages": [{"role": "user", "content": "hi"}]}
    async with sdk(client) as api:
        assert (await api.messages.create(**body)).content[0].text == "fake reply"
    async with sdk(client, api_key=None, auth_token=GATEWAY_KEY) as api:
        assert (await api.messages.create(**body)).content[0].text == "fake reply"
    async with sdk(client, api_key="wrong-key") as api:
        with pytest.raises(anthropic.AuthenticationError) as caught:
            await api.messages.create(**body)
    assert caught.value.body["type"] == "error"
    assert caught.value.body["error"]["type"] == "authentication_error"
    for sent in anthropic_upstream.requests:
        assert GATEWAY_KEY not in json.dumps(sent.headers)
        assert "x-api-key" not in {k.lower() for k in sent.headers}


async def test_bad_requests_get_anthropic_errors(
        gateway: Any, anthropic_upstream: FakeAnthropic) -> None:  # noqa: F811
    client = await start_gateway(gateway, anthropic_upstream)
    response = await client.post("/v1/messages", json={"model": "m", "messages": []},
                                 headers={"x-api-key": GATEWAY_KEY})
    assert response.status == 400
    body = await response.json()
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert anthropic_upstream.requests == []


async def test_count_tokens_is_passed_through(
        gateway: Any, anthropic_upstream: FakeAnthropic) -> None:  # noqa: F811
    client = await start_gateway(gateway, anthropic_upstream)
    async with sdk(client) as api:
        counted = await api.messages.count_tokens(
            model="claude-test-1", messages=[{"role": "user", "content": "hi"}])
    assert counted.input_tokens == 42
    assert anthropic_upstream.requests[-1].path == "/v1/messages/count_tokens"


async def test_upstream_url_and_key_settings_are_hot(
        gateway: Any, anthropic_upstream: FakeAnthropic) -> None:  # noqa: F811
    client = await start_gateway(gateway, anthropic_upstream)
    config = services_of(client.server.app).config
    await config.update({"MESSAGES_API_KEY": "sk-messages-only-0123456789",
                         "MESSAGES_AUTH_HEADER": "x-api-key"})
    async with sdk(client) as api:
        await api.messages.create(model="claude-test-1", max_tokens=5,
                                  messages=[{"role": "user", "content": "hi"}])
    sent = anthropic_upstream.requests[-1].headers
    assert sent["x-api-key"] == "sk-messages-only-0123456789"
    assert "Authorization" not in sent


async def test_session_from_claude_code_header_then_metadata(
        gateway: Any, anthropic_upstream: FakeAnthropic) -> None:  # noqa: F811
    client = await start_gateway(gateway, anthropic_upstream)
    user_id = json.dumps({"device_id": "d", "session_id": "from-metadata-0001"})
    async with sdk(client) as api:
        await api.messages.create(model="claude-test-1", max_tokens=5,
                                  metadata={"user_id": user_id}, extra_headers=HEADERS,
                                  messages=[{"role": "user", "content": "one"}])
        await api.messages.create(model="claude-test-1", max_tokens=5,
                                  metadata={"user_id": user_id},
                                  messages=[{"role": "user", "content": "two"}])
    first = await stored_messages(client, SESSION)
    second = await stored_messages(client, "from-metadata-0001")
    assert (first[0]["content"], second[0]["content"]) == ("one", "two")


async def test_a_due_reminder_is_delivered_once_and_released_on_failure(
        gateway: Any, anthropic_upstream: FakeAnthropic) -> None:  # noqa: F811
    client = await start_gateway(gateway, anthropic_upstream, **MEMORY_ON)
    reminder = await add_memory(client, "提醒用户给妈妈打电话", remind_in_minutes=-1)
    pool = services_of(client.server.app).database.pool
    sql = ("SELECT reminder_delivered_at, reminder_claim_token FROM memories WHERE id = %s")
    anthropic_upstream.reply_error(529, "overloaded_error", "busy")
    body = {"model": "claude-test-1", "max_tokens": 5,
            "messages": [{"role": "user", "content": "早上好"}]}
    async with sdk(client) as api:
        with pytest.raises(anthropic.APIStatusError):
            await api.messages.create(**body)
        await settle(client)
        async with cursor(pool) as cur:
            row = await fetch_one(cur, sql, (reminder,))
        assert row["reminder_delivered_at"] is None and row["reminder_claim_token"] is None
        await api.messages.create(**body)
        await settle(client)
        assert "[提醒 " in str(anthropic_upstream.requests[-1].body["system"])
        async with cursor(pool) as cur:
            row = await fetch_one(cur, sql, (reminder,))
        assert row["reminder_delivered_at"] is not None
        await api.messages.create(**body)
    assert "提醒用户给妈妈打电话" not in str(anthropic_upstream.requests[-1].body)


async def test_dashboard_labels_the_protocol_and_shows_cache_tokens(
        gateway: Any, anthropic_upstream: FakeAnthropic) -> None:  # noqa: F811
    client = await start_gateway(gateway, anthropic_upstream, DASHBOARD_PASSWORD=PASSWORD,
                                 SESSION_SECRET=SECRET)
    async with sdk(client) as api:
        await api.messages.create(model="claude-test-1", max_tokens=5, extra_headers=HEADERS,
                                  messages=[{"role": "user", "content": "hi"}])
    await settle(client)
    assert (await login(client)).status == 303
    english = {"Cookie": "pawwake_lang=en"}
    response = await client.get("/dashboard/conversations/view",
                                params={"session": SESSION}, headers=english)
    html = BeautifulSoup(await response.text(), "html.parser")
    labels = [pill.get_text() for pill in html.select("[data-protocol='messages']")]
    assert labels == ["via Anthropic Messages"] * 2
    response = await client.get("/dashboard/usage", headers=english)
    html = BeautifulSoup(await response.text(), "html.parser")
    heads = [th.get_text() for th in html.select("table[data-table='sessions'] thead th")]
    row = html.select("table[data-table='sessions'] tbody tr")[0].find_all(["th", "td"])
    assert row[heads.index("Cache read")].get_text() == "200"
    assert row[heads.index("Cache written")].get_text() == "30"


async def test_leaving_mid_stream_keeps_an_incomplete_turn(
        gateway: Any, anthropic_upstream: FakeAnthropic) -> None:  # noqa: F811
    client = await start_gateway(gateway, anthropic_upstream)
    gate = asyncio.Event()
    chunks = message_stream([{"type": "text", "text": "first part, second part"}])
    anthropic_upstream.queue(Reply(chunks=chunks, gate=gate, gate_after=4))
    response = await client.post("/v1/messages", json={
        "model": "claude-test-1", "max_tokens": 10, "stream": True,
        "messages": [{"role": "user", "content": "我的猫叫团子"}]},
        headers={"x-api-key": GATEWAY_KEY, **HEADERS})
    await read_until(response, b"first part")
    response.close()
    await asyncio.sleep(0.2)
    await settle(client)
    gate.set()
    rows = await stored_messages(client, SESSION)
    assert [(r["role"], r["content"], r["metadata"].get("incomplete")) for r in rows] == [
        ("user", "我的猫叫团子", True), ("assistant", "first part,", True)]


async def test_the_turn_is_stored_before_message_stop_reaches_the_client(
        gateway: Any, anthropic_upstream: FakeAnthropic) -> None:  # noqa: F811
    client = await start_gateway(gateway, anthropic_upstream)
    async with sdk(client) as api:
        async with api.messages.stream(model="claude-test-1", max_tokens=10,
                                       messages=[{"role": "user", "content": "记得我吗"}],
                                       extra_headers=HEADERS) as stream:
            await stream.get_final_message()
        rows = await stored_messages(client, SESSION)  # no settle: read your writes
    assert [r["content"] for r in rows] == ["记得我吗", "fake reply"]


def test_spooled_turns_keep_the_content_blocks() -> None:
    reply = CapturedReply(content="hi", metadata={"protocol": "messages", "content_blocks": [
        {"type": "thinking", "thinking": "t", "signature": "s"}]}, done=True)
    turn = SpooledTurn(session_id="s", model="m", turn_messages=[
        {"role": "user", "content": "q", "_pawwake_metadata": {"protocol": "messages"}}],
        turn_key="k")
    back_turn, back_reply, _ = decode(encode(turn, reply, incomplete=False))
    assert back_reply.metadata == reply.metadata
    assert back_turn.turn_messages == turn.turn_messages


async def test_a_title_request_is_forwarded_untouched_and_not_stored(
        gateway: Any, anthropic_upstream: FakeAnthropic) -> None:  # noqa: F811
    client = await start_gateway(gateway, anthropic_upstream, persona="你是小爪。")
    async with sdk(client) as api:
        await api.messages.create(
            model="claude-test-1", max_tokens=20, extra_headers=HEADERS,
            system="Generate a concise title (max 5 words) for this conversation.",
            messages=[{"role": "user", "content": "帮我看看这个 Python 报错"}])
    await settle(client)
    assert anthropic_upstream.requests[-1].body["system"] == (
        "Generate a concise title (max 5 words) for this conversation.")
    assert await stored_messages(client, SESSION) == []


@pytest.mark.parametrize("base,expected", [
    ("https://openrouter.ai/api/v1/chat/completions", "https://openrouter.ai/api/v1/messages"),
    ("https://api.deepseek.com/v1", "https://api.deepseek.com/anthropic/v1/messages"),
    ("https://open.bigmodel.cn/api/paas/v4",
     "https://open.bigmodel.cn/api/anthropic/v1/messages"),
    ("http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1/messages"),
])
def test_messages_url_is_derived_from_the_provider(base: str, expected: str) -> None:
    settings = Settings.from_env({}, API_BASE_URL=base)
    assert messages_url(settings) == expected
    assert messages_url(settings.with_values({"MESSAGES_BASE_URL": "https://x.test/v1"})
                        ) == "https://x.test/v1/messages"
    key_header = messages_headers(settings.with_values({"API_KEY": "k"}), expected, {})
    assert key_header["Authorization"] == "Bearer k"
    anthropic_direct = messages_headers(settings.with_values({"API_KEY": "k"}),
                                        "https://api.anthropic.com/v1/messages", {})
    assert anthropic_direct["x-api-key"] == "k" and "Authorization" not in anthropic_direct
