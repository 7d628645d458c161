"""Tool rounds in partition mode: a tool round stays whole, an in-progress one stays in the
current turn, and only tool results answering the last stored call are taken."""

from __future__ import annotations

from typing import Any

from tests.fake_upstream import Reply, completion_body
from tests.gateway_support import settle
from tests.partition_support import CC, CLAUDE, PARTITION, a, normalised, now_turn, say, system, u

PERSONA = "你是小爪。"
CALL = {"id": "call_w", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\":\"杭州\"}"}}


async def test_a_tool_round_spans_zones_whole(gateway: Any, upstream: Any) -> None:
    client = await gateway(persona=PERSONA, **PARTITION)
    for n in range(1, 4):
        await say(client, upstream, f"问{n}", f"答{n}")
    upstream.queue(Reply(body=completion_body(None, finish_reason="tool_calls",
                                              tool_calls=[CALL],
                                              reasoning_content="先查天气")))
    response = await client.post("/v1/chat/completions", json={
        "model": CLAUDE, "messages": [{"role": "user", "content": "杭州天气"}]})
    assert response.status == 200
    assert (await response.json())["choices"][0]["message"]["tool_calls"][0]["id"] == "call_w"
    history = [system(PERSONA), u("问1"), a("答1"), u("问2"), a("答2", CC), u("问3"),
               a("答3", CC)]
    assert normalised(upstream.requests[-1].body["messages"]) == [*history,
                                                                   now_turn("杭州天气")]
    await settle(client)

    # The client answers the call (and resends junk history the gateway ignores).
    tool_result = {"role": "tool", "tool_call_id": "call_w", "content": "晴，25度"}
    stray = {"role": "tool", "tool_call_id": "call_other", "content": "ignored"}
    sent = await say(client, upstream, "", "杭州晴天", messages=[
        {"role": "user", "content": "whatever the client had"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]}, tool_result, stray])
    call_message = {"role": "assistant", "content": None, "reasoning_content": "先查天气",
                    "tool_calls": [CALL]}
    assert sent == [*history, now_turn("杭州天气"), call_message, tool_result]

    # Next round: 2X settled rounds, so rounds 1-2 slide out and the finished tool round
    # moves into zone A whole.
    zone_a = [system(PERSONA), u("问3"), a("答3"), u("杭州天气"), call_message,
              {**tool_result, "content": [{"type": "text", "text": "晴，25度"}]},
              a("杭州晴天", CC)]
    assert await say(client, upstream, "问5", "答5") == [*zone_a, now_turn("问5")]
    assert await say(client, upstream, "问6", "答6") == [*zone_a, u("问5"), a("答5", CC),
                                                         now_turn("问6")]

async def test_tool_results_that_answer_nothing_are_refused(gateway: Any, upstream: Any
                                                            ) -> None:
    client = await gateway(persona=PERSONA, **PARTITION)
    await say(client, upstream, "问1", "答1")
    response = await client.post("/v1/chat/completions", json={
        "model": CLAUDE, "messages": [{"role": "user", "content": "x"},
                                      {"role": "tool", "tool_call_id": "nope", "content": "r"}]})
    assert response.status == 400
    assert (await response.json())["error"]["code"] == "partition_tool_result_unexpected"
