"""POST /v1/responses end to end: the real openai SDK (``responses.create``) through the
gateway to a fake Responses-format provider, with the embedded database."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest
from openai import APIStatusError, AsyncOpenAI

from pawwake.conversations.turn_spool import decode, encode
from pawwake.db.pool import cursor, fetch_one
from pawwake.protocols.responses.capture import (
    CUT_EVENT,
    capture_response_body,
    chat_usage,
    hold_start,
)
from pawwake.services import services_of
from pawwake.settings import Settings
from tests.fake_responses import (
    FakeResponses,
    call_events,
    call_item,
    event,
    message_item,
    response_object,
    text_events,
)
from tests.fake_upstream import Reply, on_loopback
from tests.gateway_support import GATEWAY_KEY, GatewayStarter, settle, stored_messages, usage_rows
from tests.test_memory_injection import MEMORY_ON, add_memory


@pytest.fixture
async def fake(aiohttp_server: Any) -> FakeResponses:
    return await on_loopback(FakeResponses(), aiohttp_server)


async def start(gateway: GatewayStarter, fake: FakeResponses, **settings: Any) -> Any:
    return await gateway(GATEWAY_SECRET=GATEWAY_KEY, RESPONSES_BASE_URL=fake.base_url,
                         **settings)


def sdk(client: Any) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key=GATEWAY_KEY, max_retries=0)


async def test_streamed_reply_reaches_the_sdk_and_memory_goes_into_instructions(
        gateway: GatewayStarter, fake: FakeResponses) -> None:
    client = await start(gateway, fake, persona="你是小爪。", **MEMORY_ON)
    await add_memory(client, "用户的猫叫小橘", event_date="2026-02-17")
    fake.reply_text("小橘可能是换季了。", pieces=4)
    async with sdk(client) as oai:
        stream = await oai.responses.create(
            model="test/model-a", stream=True, instructions="Answer briefly.",
            input=[{"role": "user", "content": [{"type": "input_text",
                                                  "text": "小橘最近胃口不好怎么办"}]}],
            extra_headers={"X-Session-Id": "resp-a"})
        events = [item async for item in stream]
    assert events[0].type == "response.created"
    assert events[-1].type == "response.completed"
    assert events[-1].response.output_text == "小橘可能是换季了。"
    sent = fake.requests[-1]
    assert sent.headers["Authorization"] == "Bearer sk-upstream-test-key-0123456789"
    instructions = sent.body["instructions"]
    assert instructions.startswith("Answer briefly.\n\n你是小爪。")  # the client's own first
    assert "<retrieved_memories>\n[2026-02-17] 用户的猫叫小橘" in instructions
    assert sent.body["input"] == [{"role": "user", "content": [
        {"type": "input_text", "text": "小橘最近胃口不好怎么办"}]}]
    await settle(client)
    rows = await stored_messages(client, "resp-a")
    assert [(r["role"], r["content"]) for r in rows] == [
        ("user", "小橘最近胃口不好怎么办"), ("assistant", "小橘可能是换季了。")]
    assert all(r["metadata"]["protocol"] == "responses" for r in rows)
    assert rows[-1]["metadata"]["reasoning_tokens"] == 3
    assert await usage_rows(client) == [{
        "session_id": "resp-a", "model": "test/model-a", "prompt_tokens": 40,
        "completion_tokens": 9, "total_tokens": 49, "cached_tokens": 24, "usage_type": "chat"}]


async def test_non_stream_reply_is_relayed_and_stored(gateway: GatewayStarter,
                                                      fake: FakeResponses) -> None:
    client = await start(gateway, fake)
    fake.reply_text("一次性回答")
    async with sdk(client) as oai:
        response = await oai.responses.create(model="test/model-a", input="你好",
                                              user="resp-b")
    assert response.output_text == "一次性回答"
    assert response.usage is not None and response.usage.input_tokens == 40
    await settle(client)
    rows = await stored_messages(client, "resp-b")
    assert [(r["role"], r["content"]) for r in rows] == [("user", "你好"),
                                                         ("assistant", "一次性回答")]
    assert (await usage_rows(client))[0]["cached_tokens"] == 24


async def test_codex_shaped_request_gets_instructions_and_its_own_session(
        gateway: GatewayStarter, fake: FakeResponses) -> None:
    """No instructions of its own (Codex puts them in input items), a ``session-id``
    header, provider-side history fields passed through untouched."""
    client = await start(gateway, fake, persona="你是小爪。")
    body = {"model": "test/model-a", "stream": True, "store": False,
            "previous_response_id": "resp_earlier", "prompt_cache_key": "cache-key-1",
            "include": ["reasoning.encrypted_content"],
            "input": [{"type": "message", "role": "developer",
                       "content": [{"type": "input_text", "text": "You are Codex."}]},
                      {"type": "message", "role": "user",
                       "content": [{"type": "input_text", "text": "list the files"}]}]}
    async with aiohttp.ClientSession() as http:
        async with http.post(client.make_url("/v1/responses"), json=body, headers={
                "Authorization": f"Bearer {GATEWAY_KEY}", "session-id": "codex-1"}) as answer:
            assert answer.status == 200
            await answer.read()
    sent = fake.requests[-1].body
    assert sent["instructions"] == "你是小爪。"
    for name in ("store", "previous_response_id", "prompt_cache_key", "include", "input"):
        assert sent[name] == body[name]
    await settle(client)
    rows = await stored_messages(client, "codex-1")
    assert [r["content"] for r in rows] == ["list the files", fake.default_text]


async def test_prompt_cache_key_names_the_session_without_a_header(
        gateway: GatewayStarter, fake: FakeResponses) -> None:
    client = await start(gateway, fake)
    async with sdk(client) as oai:
        await oai.responses.create(model="test/model-a", input="hi",
                                   prompt_cache_key="thread-7")
    await settle(client)
    assert [r["role"] for r in await stored_messages(client, "thread-7")] == [
        "user", "assistant"]


async def test_function_call_items_are_stored_as_tool_traffic(gateway: GatewayStarter,
                                                              fake: FakeResponses) -> None:
    client = await start(gateway, fake)
    weather = call_item("get_weather", '{"city": "上海"}', "call_a")
    fake.replies.append(Reply(chunks=call_events([weather])))
    async with sdk(client) as oai:
        stream = await oai.responses.create(model="test/model-a", stream=True,
                                            input="上海天气如何", user="tools-1")
        events = [item async for item in stream]
        assert events[-1].response.output[0].type == "function_call"
        fake.reply_text("上海晴，25 度。")
        await settle(client)
        answer = await oai.responses.create(model="test/model-a", user="tools-1", input=[
            {"role": "user", "content": "上海天气如何"},
            {"type": "function_call", "call_id": "call_a", "name": "get_weather",
             "arguments": '{"city": "上海"}'},
            {"type": "function_call_output", "call_id": "call_a", "output": '{"temp": 25}'}])
    assert answer.output_text == "上海晴，25 度。"
    await settle(client)
    rows = await stored_messages(client, "tools-1")
    assert [(r["role"], r["content"]) for r in rows] == [
        ("user", "上海天气如何"), ("assistant", ""), ("tool", '{"temp": 25}'),
        ("assistant", "上海晴，25 度。")]
    assert rows[1]["metadata"]["tool_calls"] == [{
        "id": "call_a", "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "上海"}'}}]
    assert rows[1]["metadata"]["finish_reason"] == "tool_calls"
    assert rows[2]["metadata"]["tool_call_id"] == "call_a"


async def test_upstream_error_status_and_body_reach_the_client_unchanged(
        gateway: GatewayStarter, fake: FakeResponses) -> None:
    client = await start(gateway, fake)
    fake.reply_error(400, "previous_response_id not found")
    async with sdk(client) as oai:
        with pytest.raises(APIStatusError) as raised:
            await oai.responses.create(model="test/model-a", input="hi", user="err-1",
                                       previous_response_id="resp_missing")
    assert raised.value.status_code == 400
    assert raised.value.body == {"message": "previous_response_id not found",
                                 "type": "invalid_request_error", "param": None,
                                 "code": "upstream_refused"}
    await settle(client)
    assert await stored_messages(client, "err-1") == []


async def test_a_cut_stream_ends_with_a_responses_error_event(gateway: GatewayStarter,
                                                              fake: FakeResponses) -> None:
    client = await start(gateway, fake)
    fake.replies.append(Reply(chunks=text_events("this will not finish", pieces=4),
                              cut_after=4))
    async with sdk(client) as oai:
        stream = await oai.responses.create(model="test/model-a", stream=True, input="hi",
                                            user="cut-1")
        events = [item async for item in stream]
    assert events[-1].type == "error"
    assert events[-1].code == "upstream_stream_cut"
    assert "response.completed" not in [e.type for e in events]
    await settle(client)
    assert await stored_messages(client, "cut-1") == []


async def test_the_terminal_event_arrives_only_once_the_turn_is_stored_and_a_client_may_leave(
        gateway: GatewayStarter, fake: FakeResponses) -> None:
    """Read your writes: when response.completed reaches the client, the turn is in the
    database; the client then leaves without reading the end of the stream. The provider
    keeps its connection open a while after response.completed, so a gateway that passed
    the event on at once would show it before the turn could be stored."""
    client = await start(gateway, fake)
    chunks = [*text_events("记住了", pieces=2), b": provider still open\n\n"]
    gate = asyncio.Event()
    fake.replies.append(Reply(chunks=chunks, gate=gate, gate_after=len(chunks) - 1))
    asyncio.get_running_loop().call_later(0.5, gate.set)
    body = {"model": "test/model-a", "stream": True, "input": "记住我的生日", "user": "ryw"}
    received = b""
    async with aiohttp.ClientSession() as http:
        async with http.post(client.make_url("/v1/responses"), json=body,
                             headers={"Authorization": f"Bearer {GATEWAY_KEY}"}) as answer:
            async for chunk in answer.content.iter_any():
                received += chunk
                if b'"type": "response.completed"' in received:
                    break
        rows = await stored_messages(client, "ryw")  # no settle: already committed
    assert [r["content"] for r in rows] == ["记住我的生日", "记住了"]
    pool = services_of(client.server.app).database.pool
    async with cursor(pool) as cur:
        assert (await fetch_one(cur, "SELECT count(*) AS n FROM token_usage"))["n"] == 1


async def test_a_client_leaving_mid_reply_keeps_an_incomplete_turn(
        gateway: GatewayStarter, fake: FakeResponses) -> None:
    client = await start(gateway, fake)
    gate = asyncio.Event()
    fake.replies.append(Reply(chunks=text_events("半句话就走了", pieces=3), gate=gate,
                              gate_after=4))
    body = {"model": "test/model-a", "stream": True, "input": "讲个故事", "user": "left"}
    async with aiohttp.ClientSession() as http:
        async with http.post(client.make_url("/v1/responses"), json=body,
                             headers={"Authorization": f"Bearer {GATEWAY_KEY}"}) as answer:
            received = b""
            async for chunk in answer.content.iter_any():
                received += chunk
                if received.count(b"response.output_text.delta") >= 4:  # 2 deltas seen
                    break
    await fake.disconnected.wait()
    gate.set()
    await settle(client)
    rows = await stored_messages(client, "left")
    assert [r["content"] for r in rows] == ["讲个故事", "半句话就"]
    assert all(r["metadata"].get("incomplete") for r in rows)


async def test_requests_without_the_gateway_key_or_with_bad_input_are_refused(
        gateway: GatewayStarter, fake: FakeResponses) -> None:
    client = await start(gateway, fake)
    refused = await client.post("/v1/responses", json={"input": "hi"})
    assert refused.status == 401
    auth = {"Authorization": f"Bearer {GATEWAY_KEY}"}
    for body, code in (({"input": 5}, "invalid_input"), ({"input": ["x"]}, "invalid_input"),
                       ({"input": "hi", "stream": "yes"}, "invalid_stream"), ([1], "invalid_body")):
        answer = await client.post("/v1/responses", json=body, headers=auth)
        assert answer.status == 400
        assert (await answer.json())["error"]["code"] == code
    assert fake.requests == []


def test_responses_url_follows_the_chat_provider_unless_set() -> None:
    openrouter = Settings.from_env({}, API_BASE_URL="https://openrouter.ai/api/v1/chat/completions")
    assert openrouter.responses_url == "https://openrouter.ai/api/v1/responses"
    openai = Settings.from_env({}, API_BASE_URL="https://api.openai.com/v1")
    assert openai.responses_url == "https://api.openai.com/v1/responses"
    own = openai.with_values({"RESPONSES_BASE_URL": "http://127.0.0.1:9/v1/"})
    assert own.responses_url == "http://127.0.0.1:9/v1/responses"


def test_terminal_event_start_and_usage_shape() -> None:
    done = event({"type": "response.completed", "response": {}})
    chunk = b"data: {}\n\n" + done
    assert hold_start(chunk) == len(b"data: {}\n\n")
    assert hold_start(b"data: more of an earlier event\n\n") == 0
    assert chat_usage({"input_tokens": 5, "output_tokens": 2,
                       "input_tokens_details": {"cached_tokens": 1}}) == {
        "prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7,
        "prompt_tokens_details": {"cached_tokens": 1}}
    assert json.loads(CUT_EVENT.split(b"data: ")[1])["type"] == "error"


async def test_a_due_reminder_goes_into_instructions_and_is_delivered_after_the_reply(
        gateway: GatewayStarter, fake: FakeResponses) -> None:
    client = await start(gateway, fake, **MEMORY_ON)
    reminder = await add_memory(client, "提醒用户给妈妈打电话", remind_in_minutes=-1)
    async with sdk(client) as oai:
        await oai.responses.create(model="test/model-a", input="早上好", user="remind-1")
    assert "[提醒 " in fake.requests[-1].body["instructions"]
    await settle(client)
    async with cursor(services_of(client.server.app).database.pool) as cur:
        row = await fetch_one(cur,
                              "SELECT reminder_delivered_at FROM memories WHERE id = %s",
                              (reminder,))
    assert row["reminder_delivered_at"] is not None


def test_a_spooled_turn_keeps_its_protocol() -> None:
    turn = SimpleNamespace(session_id="s", model="m", turn_key="k", protocol="responses",
                           turn_messages=[{"role": "user", "content": "hi"}])
    reply = capture_response_body(json.dumps(response_object([message_item("yo")])).encode())
    restored, again, incomplete = decode(encode(turn, reply, incomplete=False))
    assert restored.protocol == "responses" and not incomplete
    assert again.content == "yo" and again.usage is not None and again.usage.cached == 24


async def test_partition_mode_leaves_responses_input_alone_and_injects_plainly(
        gateway: GatewayStarter, fake: FakeResponses) -> None:
    """The partition cache rebuilds chat histories from the database; a Responses client's
    items (or the provider's stored history) are never replaced, and memories still come."""
    client = await start(gateway, fake, CACHE_PARTITION_ENABLED=True, **MEMORY_ON)
    await add_memory(client, "用户的猫叫小橘")
    items = [{"role": "user", "content": "早"}, {"role": "assistant", "content": "早呀"},
             {"role": "user", "content": "小橘今天怎么样"}]
    async with sdk(client) as oai:
        await oai.responses.create(model="test/model-a", input=items,
                                   extra_headers={"session-id": "codex-p"})
    sent = fake.requests[-1].body
    assert sent["input"] == items
    assert "用户的猫叫小橘" in sent["instructions"]
    await settle(client)
    assert [r["content"] for r in await stored_messages(client, "codex-p")] == [
        "小橘今天怎么样", fake.default_text]


async def test_an_error_event_from_the_provider_is_relayed_and_nothing_is_stored(
        gateway: GatewayStarter, fake: FakeResponses) -> None:
    client = await start(gateway, fake)
    failure = {"type": "error", "sequence_number": 1, "code": "rate_limit_exceeded",
               "message": "slow down", "param": None}
    fake.replies.append(Reply(chunks=[*text_events("x")[:1], event(failure)]))
    async with sdk(client) as oai:
        stream = await oai.responses.create(model="test/model-a", stream=True, input="hi",
                                            user="err-2")
        events = [item async for item in stream]
    assert events[-1].type == "error" and events[-1].code == "rate_limit_exceeded"
    await settle(client)
    assert await stored_messages(client, "err-2") == []
