"""Anthropic's Messages API in partition mode, driven by the real ``anthropic`` SDK: the
cached prefix stays byte-identical across rounds and tool results continue the stored round."""

from __future__ import annotations

from typing import Any

from tests.fake_anthropic import FakeAnthropic
from tests.gateway_support import settle, stored_messages
from tests.messages_support import (
    MEMORY_ON,
    anthropic_upstream,  # noqa: F401  (fixture)
    sdk,
    start_gateway,
)
from tests.test_memory_injection import add_memory


async def test_partition_mode_keeps_the_cached_prefix_byte_identical(
        gateway: Any, anthropic_upstream: FakeAnthropic) -> None:  # noqa: F811
    client = await start_gateway(gateway, anthropic_upstream, persona="你是小爪。",
                                 CACHE_PARTITION_ENABLED=True, CACHE_PARTITION_X=2,
                                 **MEMORY_ON)
    await add_memory(client, "用户的猫叫小橘")
    system = [{"type": "text", "text": "Tools manual.", "cache_control": {"type": "ephemeral"}}]
    thinking = {"type": "thinking", "thinking": "Recall the cat.", "signature": "sig-Zz9=="}
    questions = ["小橘今天吃了吗", "小橘还好吗", "它几岁了", "它喜欢什么"]
    history: list[dict[str, Any]] = []
    async with sdk(client) as api:
        for number, question in enumerate(questions):
            anthropic_upstream.reply_blocks([thinking, {"type": "text",
                                                        "text": f"回答{number}"}])
            ask = {"role": "user", "content": [{"type": "text", "text": question,
                                                "cache_control": {"type": "ephemeral"}}]}
            answer = await api.messages.create(model="claude-test-1", max_tokens=10,
                                               system=system, messages=[*history, ask])
            await settle(client)
            history += [{"role": "user", "content": question},
                        {"role": "assistant", "content": [
                            block.model_dump(exclude_none=True) for block in answer.content]}]
    sent = anthropic_upstream.requests[-4:]
    first = sent[0].body
    assert first["system"] == [{"type": "text", "text": "Tools manual."},
                               {"type": "text", "text": "你是小爪。",
                                "cache_control": {"type": "ephemeral"}}]
    turn = first["messages"][-1]["content"]
    assert turn[0] == {"type": "text", "text": "小橘今天吃了吗"}  # client breakpoint removed
    assert "用户的猫叫小橘" in turn[-1]["text"]  # memories after everything cached
    second = sent[1].body["messages"]
    assert second[1]["content"] == [thinking, {"type": "text", "text": "回答0"}]  # from the db
    # Round 3 has zone A (rounds 1-2, marked); round 4 keeps it and adds zone B: the bytes up
    # to the zone A breakpoint are the same in both requests.
    marks = [b for m in sent[3].body["messages"] for b in m["content"]
             if "cache_control" in b]
    assert len(marks) == 2
    marker = b'"cache_control":{"type":"ephemeral"}'
    zone_a_end = sent[2].raw.index(marker, sent[2].raw.index(b'"messages"')) + len(marker)
    assert sent[3].raw[:zone_a_end] == sent[2].raw[:zone_a_end]
    assert sum(b'"cache_control"' in r.raw[:zone_a_end] for r in sent[2:]) == 2
    assert "用户的猫叫小橘" not in str(sent[1].body)  # seen within MEMORY_SEEN_TTL_HOURS
    rows = await stored_messages(client, "default")
    assert [r["content"] for r in rows if r["role"] == "user"] == questions


async def test_partition_mode_tool_results_continue_the_stored_round(
        gateway: Any, anthropic_upstream: FakeAnthropic) -> None:  # noqa: F811
    client = await start_gateway(gateway, anthropic_upstream, CACHE_PARTITION_ENABLED=True,
                                 CACHE_PARTITION_X=2, JOB_WORKERS=0)
    thinking = {"type": "thinking", "thinking": "Use the tool.", "signature": "sig-T=="}
    tool = {"type": "tool_use", "id": "toolu_9", "name": "clock", "input": {"tz": "UTC+8"}}
    anthropic_upstream.reply_blocks([thinking, tool], stop_reason="tool_use")
    tools = [{"name": "clock", "description": "time", "input_schema": {"type": "object"},
              "cache_control": {"type": "ephemeral"}}]
    question = {"role": "user", "content": "几点了"}
    async with sdk(client) as api:
        first = await api.messages.create(model="claude-test-1", max_tokens=10, tools=tools,
                                          messages=[question])
        await settle(client)
        called = {"role": "assistant",
                  "content": [b.model_dump(exclude_none=True) for b in first.content]}
        result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9",
                                                "content": "20:15"}]}
        anthropic_upstream.reply_text("现在是 20:15。")
        await api.messages.create(model="claude-test-1", max_tokens=10, tools=tools,
                                  messages=[question, called, result])
    await settle(client)
    body = anthropic_upstream.requests[-1].body
    assert "cache_control" not in body["tools"][0]  # the gateway owns the four breakpoints
    messages = body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"] == [thinking, tool]
    assert messages[2]["content"][0] == result["content"][0]  # tool results open the turn
    assert messages[2]["content"][-1]["text"].startswith("[Current time:")
    rows = await stored_messages(client, "default")
    assert [r["role"] for r in rows] == ["user", "assistant", "tool", "assistant"]
