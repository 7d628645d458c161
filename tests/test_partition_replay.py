"""Faithful replay in partition mode: provider extras and reasoning from a streamed tool call,
images in the current turn, and an abandoned tool call."""

from __future__ import annotations

from typing import Any

from tests.fake_upstream import EXPECTED_CALLS, Reply, completion_body, tool_call_stream
from tests.gateway_support import settle
from tests.partition_support import CLAUDE, PARTITION, a, normalised, now_turn, say, system, u

PERSONA = "你是小爪。"


async def test_streamed_tool_calls_replay_with_provider_extras(gateway: Any, upstream: Any
                                                               ) -> None:
    client = await gateway(persona=PERSONA, **PARTITION)
    upstream.queue(Reply(chunks=tool_call_stream()))
    response = await client.post("/v1/chat/completions", json={
        "model": CLAUDE, "stream": True, "messages": [{"role": "user", "content": "天气和时间"}]})
    assert response.status == 200
    await response.read()
    await settle(client)
    results = [{"role": "tool", "tool_call_id": "call_a", "content": "晴"},
               {"role": "tool", "tool_call_id": "call_b", "content": "10:00"}]
    sent = await say(client, upstream, "", "晴，十点", messages=results)
    assert sent == [system(PERSONA), now_turn("天气和时间"),
                    {"role": "assistant", "content": None, "reasoning_content": "need both",
                     "tool_calls": EXPECTED_CALLS}, *results]


async def test_images_stay_in_the_current_turn_and_history_keeps_text(gateway: Any,
                                                                      upstream: Any) -> None:
    client = await gateway(persona=PERSONA, **PARTITION)
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    upstream.reply_text("一只猫")
    response = await client.post("/v1/chat/completions", json={
        "model": CLAUDE, "messages": [{"role": "user", "content": [
            {"type": "text", "text": "这是什么"}, image]}]})
    assert response.status == 200
    current = upstream.requests[-1].body["messages"][-1]["content"]
    assert current[0]["text"].startswith("[Current time: ") and current[1:] == [
        {"type": "text", "text": "这是什么"}, image]
    await settle(client)
    assert await say(client, upstream, "问2", "答2") == [system(PERSONA), u("这是什么"),
                                                         a("一只猫"), now_turn("问2")]


async def test_an_abandoned_tool_call_is_not_replayed(gateway: Any, upstream: Any) -> None:
    client = await gateway(persona=PERSONA, **PARTITION)
    call = {"id": "call_x", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    upstream.queue(Reply(body=completion_body(None, finish_reason="tool_calls",
                                              tool_calls=[call])))
    response = await client.post("/v1/chat/completions", json={
        "model": CLAUDE, "messages": [{"role": "user", "content": "查一下"}]})
    assert response.status == 200
    await settle(client)
    # The user moves on instead of answering the call.
    sent = await say(client, upstream, "算了", "好的")
    assert sent == [system(PERSONA), u("查一下"), now_turn("算了")]
    assert normalised(upstream.requests[-1].body["messages"]) == sent
