"""The chat gateway relays replies: the OpenAI SDK as a client, exact bytes, tool calls,
streams cut by the provider and clients that hang up."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import aiohttp
import pytest
from openai import APIError, AsyncOpenAI

from pawwake.chat.prepared import (
    ChatRejected,
    ChatStep,
    ReplyHook,
    StepContext,
    StepInput,
    StepResult,
)
from pawwake.llm.sse import CapturedReply
from pawwake.services import services_of
from tests.fake_upstream import (
    EXPECTED_CALLS,
    FakeUpstream,
    Reply,
    text_stream,
    tool_call_stream,
)
from tests.gateway_support import (
    GATEWAY_KEY,
    GatewayStarter,
    chat_body,
    settle,
    stored_messages,
    usage_rows,
)
from tests.turn_support import production_server


async def test_openai_sdk_streams_through_the_gateway(gateway: GatewayStarter,
                                                      upstream: FakeUpstream) -> None:
    client = await gateway(GATEWAY_SECRET=GATEWAY_KEY)
    upstream.reply_text("流式你好, streamed hello", pieces=4)
    async with AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key=GATEWAY_KEY) as oai:
        stream = await oai.chat.completions.create(
            model="test/model-a", stream=True,
            messages=[{"role": "user", "content": "say hello"}])
        pieces = [chunk.choices[0].delta.content or "" async for chunk in stream
                  if chunk.choices]
    assert "".join(pieces) == "流式你好, streamed hello"
    await settle(client)
    rows = await stored_messages(client)
    assert [(r["role"], r["content"]) for r in rows] == [
        ("user", "say hello"), ("assistant", "流式你好, streamed hello")]


async def test_openai_sdk_non_stream_through_the_gateway(gateway: GatewayStarter,
                                                         upstream: FakeUpstream) -> None:
    client = await gateway(GATEWAY_SECRET=GATEWAY_KEY)
    upstream.reply_text("一次性回答")
    async with AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key=GATEWAY_KEY) as oai:
        completion = await oai.chat.completions.create(
            model="test/model-a", messages=[{"role": "user", "content": "hi"}])
    assert completion.choices[0].message.content == "一次性回答"
    assert completion.usage is not None and completion.usage.total_tokens == 18
    await settle(client)
    assert [r["content"] for r in await stored_messages(client)] == ["hi", "一次性回答"]


async def test_client_receives_exactly_the_bytes_the_upstream_sent(
        gateway: GatewayStarter, upstream: FakeUpstream) -> None:
    whole = b"".join(text_stream("雪落无声，猫走过的地方留下爪迹。", pieces=5))
    split_char = whole.index("爪".encode()) + 1  # inside the 3-byte character
    cuts = sorted({1, 5, 17, 64, 65, split_char, len(whole) - 20, len(whole) - 3})
    chunks = [whole[a:b] for a, b in zip([0, *cuts], [*cuts, len(whole)], strict=True)]
    upstream.queue(Reply(chunks=chunks, delay=0.005))
    client = await gateway()
    response = await client.post("/v1/chat/completions", json=chat_body("讲个故事", stream=True))
    received = await response.read()
    assert response.status == 200
    assert received == whole
    assert response.headers["Content-Type"] == "text/event-stream"
    assert response.headers["Cache-Control"] == "no-cache"
    assert response.headers["X-Accel-Buffering"] == "no"
    await settle(client)
    rows = await stored_messages(client)
    assert rows[-1]["content"] == "雪落无声，猫走过的地方留下爪迹。"


async def test_chunks_reach_the_client_before_the_upstream_is_done(
        gateway: GatewayStarter, upstream: FakeUpstream) -> None:
    gate = asyncio.Event()
    chunks = text_stream("first then the rest", pieces=2)
    upstream.queue(Reply(chunks=chunks, gate=gate, gate_after=2))
    client = await gateway()
    response = await client.post("/v1/chat/completions", json=chat_body(stream=True))
    expected_head = chunks[0] + chunks[1]
    head = b""
    while len(head) < len(expected_head):
        head += await response.content.readany()
    assert head == expected_head  # the upstream is still waiting on the gate here
    gate.set()
    assert head + await response.read() == b"".join(chunks)


async def test_tool_call_deltas_with_extras_are_stored_and_tool_results_follow(
        gateway: GatewayStarter, upstream: FakeUpstream) -> None:
    upstream.queue(Reply(chunks=tool_call_stream()))
    client = await gateway()
    history: list[dict[str, Any]] = [{"role": "user", "content": "上海天气和时间？"}]
    body = {"model": "test/model-a", "stream": True, "messages": history,
            "tools": [{"type": "function", "function": {"name": "get_weather"}}]}
    response = await client.post("/v1/chat/completions", json=body,
                                 headers={"X-Session-Id": "tools"})
    assert response.status == 200
    await response.read()
    await settle(client)
    rows = await stored_messages(client, "tools")
    assert [r["role"] for r in rows] == ["user", "assistant"]
    assert rows[1]["metadata"]["tool_calls"] == EXPECTED_CALLS
    assert rows[1]["metadata"]["reasoning_content"] == "need both"
    assert (await usage_rows(client))[0]["cached_tokens"] == 16

    # The client runs the tools and sends the results back with the whole history.
    history += [{"role": "assistant", "content": None, "tool_calls": EXPECTED_CALLS},
                {"role": "tool", "tool_call_id": "call_a", "content": "晴 25°C"},
                {"role": "tool", "tool_call_id": "call_b", "content": "14:00"}]
    upstream.reply_text("上海晴，25°C，现在 14:00。")
    response = await client.post("/v1/chat/completions", json={**body, "messages": history},
                                 headers={"X-Session-Id": "tools"})
    await response.read()
    await settle(client)
    rows = await stored_messages(client, "tools")
    assert [(r["role"], r["metadata"].get("tool_call_id")) for r in rows] == [
        ("user", None), ("assistant", None), ("tool", "call_a"), ("tool", "call_b"),
        ("assistant", None)]
    assert rows[-1]["content"] == "上海晴，25°C，现在 14:00。"


async def test_stream_cut_by_the_upstream_ends_the_client_stream_and_stores_nothing(
        gateway: GatewayStarter, upstream: FakeUpstream) -> None:
    upstream.queue(Reply(chunks=text_stream("this will not finish", pieces=4), cut_after=3))
    client = await gateway(GATEWAY_SECRET=GATEWAY_KEY)
    async with AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key=GATEWAY_KEY,
                           max_retries=0) as oai:
        stream = await oai.chat.completions.create(
            model="test/model-a", stream=True, messages=[{"role": "user", "content": "go"}])
        with pytest.raises(APIError, match="broke off"):
            async for _chunk in stream:
                pass
    await settle(client)
    assert await stored_messages(client) == []
    assert await usage_rows(client) == []


async def test_stream_without_done_or_finish_reason_is_not_stored(
        gateway: GatewayStarter, upstream: FakeUpstream) -> None:
    chunks = text_stream("half", pieces=2)[:2]  # role chunk and one piece, then a clean end
    upstream.queue(Reply(chunks=chunks))
    client = await gateway()
    response = await client.post("/v1/chat/completions", json=chat_body(stream=True))
    assert await response.read() == b"".join(chunks)
    await settle(client)
    assert await stored_messages(client) == []


def add_step(app: Any, step: ChatStep) -> None:
    """Run ``step`` after the chat steps for this app's requests."""
    chat = services_of(app).chat
    chat.steps = (*chat.steps, step)


def record_failures(app: Any) -> list[str]:
    """Add a step whose failure hook records why the request failed."""
    reasons: list[str] = []

    async def on_failure(reason: str) -> None:
        reasons.append(reason)

    async def step(context: StepContext, request: StepInput) -> StepResult:
        return StepResult(hooks=(ReplyHook("record failures", on_failure=on_failure),))

    add_step(app, step)
    return reasons


def _hanging_reply() -> tuple[Reply, list[bytes]]:
    chunks = text_stream("never finished", pieces=3)
    return Reply(chunks=chunks, gate=asyncio.Event(), gate_after=2), chunks


async def _read_first_chunks(response: aiohttp.ClientResponse, expected: bytes) -> None:
    head = b""
    while len(head) < len(expected):
        head += await response.content.readany()
    assert head == expected


async def test_client_disconnect_cancels_the_handler_and_closes_the_upstream(
        gateway: GatewayStarter, upstream: FakeUpstream) -> None:
    """aiohttp's test server cancels the handler when the client goes (CancelledError); what
    the user typed and the part of the reply it saw are kept, flagged incomplete."""
    reply, chunks = _hanging_reply()
    upstream.queue(reply)
    app = gateway.build()
    reasons = record_failures(app)
    client = await gateway.start(app)
    response = await client.post("/v1/chat/completions", json=chat_body(stream=True))
    await _read_first_chunks(response, chunks[0] + chunks[1])
    response.close()  # the user pressed stop
    await asyncio.wait_for(upstream.disconnected.wait(), 10)
    assert upstream.disconnects == 1
    await settle(client)
    assert reasons == ["client_gone"]
    rows = await stored_messages(client)
    assert [(r["role"], r["content"], r["metadata"]) for r in rows] == [
        ("user", "你好", {"incomplete": True}),
        ("assistant", "never", {"incomplete": True})]


async def test_client_disconnect_in_production_mode_closes_the_upstream(
        gateway: GatewayStarter, upstream: FakeUpstream) -> None:
    """``run_app`` does not cancel handlers: the next write raises ConnectionResetError."""
    app = gateway.build()
    reasons = record_failures(app)
    gate = asyncio.Event()
    chunks = text_stream("x" * 40, pieces=20)
    upstream.queue(Reply(chunks=chunks, gate=gate, gate_after=2, delay=0.02))
    async with production_server(app) as base:  # handlers not cancelled, as in production
        async with aiohttp.ClientSession() as session:
            response = await session.post(f"{base}/v1/chat/completions",
                                          json=chat_body(stream=True))
            await _read_first_chunks(response, chunks[0] + chunks[1])
            response.close()
        await asyncio.sleep(0.1)  # let the gateway notice the closed socket
        gate.set()  # the upstream sends on; the gateway's next write fails
        await asyncio.wait_for(upstream.disconnected.wait(), 10)
        await services_of(app).tasks.drain()
        assert reasons == ["client_gone"]
        database = services_of(app).database
        async with database.pool.acquire() as conn, conn.cursor() as cur:
            await cur.execute("SELECT role, metadata->>'incomplete' FROM conversations"
                              " ORDER BY id")
            assert await cur.fetchall() == [("user", "true"), ("assistant", "true")]


async def test_after_success_and_failure_hooks_run_only_when_they_should(
        gateway: GatewayStarter, upstream: FakeUpstream) -> None:
    calls: list[tuple[str, Any]] = []

    async def on_success(reply: CapturedReply) -> None:
        calls.append(("success", reply.content))

    async def on_failure(reason: str) -> None:
        calls.append(("failure", reason))

    async def step(context: StepContext, request: StepInput) -> StepResult:
        return StepResult(hooks=(ReplyHook("record", on_success=on_success,
                                           on_failure=on_failure),))

    app = gateway.build()
    add_step(app, step)
    client = await gateway.start(app)
    upstream.reply_text("fine")
    await (await client.post("/v1/chat/completions", json=chat_body(stream=True))).read()
    upstream.reply_error(500)
    await (await client.post("/v1/chat/completions", json=chat_body())).read()
    upstream.queue(Reply(chunks=text_stream("cut", pieces=3), cut_after=2))
    await (await client.post("/v1/chat/completions", json=chat_body(stream=True))).read()
    await settle(client)
    assert sorted(calls) == [("failure", "upstream_cut"), ("failure", "upstream_status"),
                             ("success", "fine")]


async def test_json_reply_to_a_stream_request_is_relayed_and_stored(
        gateway: GatewayStarter, upstream: FakeUpstream) -> None:
    """A provider that ignores ``stream`` answers JSON: relayed as is, still captured."""
    body = json.dumps({"id": "c", "object": "chat.completion", "choices": [
        {"index": 0, "finish_reason": "stop",
         "message": {"role": "assistant", "content": "json anyway"}}]}).encode()
    upstream.queue(Reply(raw_body=body, content_type="application/json"))
    client = await gateway()
    response = await client.post("/v1/chat/completions", json=chat_body(stream=True))
    assert await response.read() == body
    await settle(client)
    assert (await stored_messages(client))[-1]["content"] == "json anyway"


async def test_a_step_can_refuse_and_earlier_claims_are_released(
        gateway: GatewayStarter, upstream: FakeUpstream) -> None:
    released: list[str] = []

    async def release(reason: str) -> None:
        released.append(reason)

    async def claim(context: StepContext, request: StepInput) -> StepResult:
        return StepResult(hooks=(ReplyHook("release the claim", on_failure=release),))

    async def refuse(context: StepContext, request: StepInput) -> StepResult:
        raise ChatRejected(503, "partition_database_unavailable", "The database is down.")

    app = gateway.build()
    add_step(app, claim)
    add_step(app, refuse)
    client = await gateway.start(app)
    response = await client.post("/v1/chat/completions", json=chat_body())
    assert response.status == 503
    error = (await response.json())["error"]
    assert (error["code"], error["type"]) == ("partition_database_unavailable", "api_error")
    await settle(client)
    assert released == ["not_forwarded"]
    assert upstream.requests == []


async def test_one_info_line_per_request_without_text_or_keys(
        gateway: GatewayStarter, upstream: FakeUpstream,
        caplog: pytest.LogCaptureFixture) -> None:
    client = await gateway(GATEWAY_SECRET=GATEWAY_KEY)
    caplog.set_level(logging.INFO)
    secret_text = "我的银行卡密码是 246810"
    for stream in (True, False):
        upstream.reply_text("好的")
        response = await client.post("/v1/chat/completions",
                                      json=chat_body(secret_text, stream=stream),
                                      headers={"X-Gateway-Key": GATEWAY_KEY})
        await response.read()
    await settle(client)
    lines = [r.getMessage() for r in caplog.records if r.name == "pawwake.routes.chat"]
    assert len(lines) == 2
    assert all("model=test/model-a" in line and "status=200" in line and "memories=0" in line
               and "latency_ms=" in line for line in lines)
    assert ["stream=True" in lines[0], "stream=False" in lines[1]] == [True, True]
    everything = "\n".join(r.getMessage() for r in caplog.records)
    for secret in (secret_text, GATEWAY_KEY, "sk-upstream-test-key"):
        assert secret not in everything


@pytest.mark.parametrize("stream", [True, False])
async def test_invalid_utf8_in_a_reply_is_stored_with_replacement_characters(
        gateway: GatewayStarter, upstream: FakeUpstream, stream: bool) -> None:
    client = await gateway()
    bad = b'\xe4\xbd\xa0\xff\xfe!'  # "你", two bytes that are no UTF-8, "!"
    if stream:
        chunks = text_stream("开头", pieces=1)
        chunks.insert(2, b'data: {"id":"c","object":"chat.completion.chunk","created":1,'
                         b'"model":"test/model-a","choices":[{"index":0,"delta":{"content":"'
                      + bad + b'"},"finish_reason":null}]}\n\n')
        upstream.queue(Reply(chunks=chunks))
    else:
        upstream.queue(Reply(raw_body=b'{"id":"c","object":"chat.completion","created":1,'
                             b'"model":"test/model-a","choices":[{"index":0,"finish_reason":'
                             b'"stop","message":{"role":"assistant","content":"\xe5\xbc\x80'
                             b'\xe5\xa4\xb4' + bad + b'"}}]}', content_type="application/json"))
    response = await client.post("/v1/chat/completions", json=chat_body(stream=stream))
    assert response.status == 200
    assert bad in await response.read()  # the client's bytes are the provider's, untouched
    await settle(client)
    rows = await stored_messages(client)
    assert [(r["role"], r["content"]) for r in rows] == [
        ("user", "你好"), ("assistant", "开头你\ufffd\ufffd!")]
