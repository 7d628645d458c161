"""Re-rolls in partition mode: the re-answered round is the current turn (never repeated in
the context) and its stored reply is replaced; the same words said twice stay two rounds."""

from __future__ import annotations

import json
from typing import Any

from tests.fake_upstream import Reply, completion_body
from tests.gateway_support import settle, stored_messages
from tests.partition_support import (
    CC,
    CLAUDE,
    PARTITION,
    a,
    normalised,
    now_turn,
    say,
    state_row,
    system,
    u,
)

PERSONA = "你是小爪。"
CALL = {"id": "call_w", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\":\"杭州\"}"}}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


async def texts(client: Any) -> list[tuple[str, str]]:
    return [(r["role"], r["content"]) for r in await stored_messages(client, "default")]


async def stream_round(client: Any, upstream: Any, messages: list[dict[str, Any]],
                       reply: str) -> list[dict[str, Any]]:
    """One streamed round; returns the normalised upstream messages."""
    upstream.reply_text(reply, pieces=2)
    response = await client.post("/v1/chat/completions", json={
        "model": CLAUDE, "stream": True, "messages": messages})
    assert response.status == 200
    received = (await response.read()).decode()
    pieces = [json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
              for line in received.splitlines()
              if line.startswith("data: {") and json.loads(line[6:])["choices"]]
    assert "".join(pieces) == reply
    await settle(client)
    return normalised(upstream.requests[-1].body["messages"])


async def test_full_history_reroll_replaces_the_reply_and_sends_the_round_once(
        gateway: Any, upstream: Any) -> None:
    client = await gateway(persona=PERSONA, **PARTITION)
    first = await say(client, upstream, "", "答1", messages=[user("问1")])
    asked = await say(client, upstream, "", "答2",
                      messages=[user("问1"), assistant("答1"), user("问2")])
    # Regenerate: the client drops its last reply and asks 问2 again.
    rerolled = await say(client, upstream, "", "答2 again",
                         messages=[user("问1"), assistant("答1"), user("问2")])
    assert first == [system(PERSONA), now_turn("问1")]
    assert rerolled == asked == [system(PERSONA), u("问1"), a("答1"), now_turn("问2")]
    assert await texts(client) == [("user", "问1"), ("assistant", "答1"),
                                   ("user", "问2"), ("assistant", "答2 again")]
    # The thread goes on from the new reply.
    sent = await say(client, upstream, "", "答3", messages=[
        user("问1"), assistant("答1"), user("问2"), assistant("答2 again"), user("问3")])
    assert sent == [system(PERSONA), u("问1"), a("答1"), u("问2"), a("答2 again", CC),
                    now_turn("问3")]


async def test_streamed_reroll_replaces_the_reply(gateway: Any, upstream: Any) -> None:
    client = await gateway(persona=PERSONA, **PARTITION)
    await stream_round(client, upstream, [user("问1")], "答1")
    await stream_round(client, upstream, [user("问1"), assistant("答1"), user("问2")], "答2")
    sent = await stream_round(client, upstream, [user("问1"), assistant("答1"), user("问2")],
                              "答2 重新生成")
    assert sent == [system(PERSONA), u("问1"), a("答1"), now_turn("问2")]
    assert await texts(client) == [("user", "问1"), ("assistant", "答1"),
                                   ("user", "问2"), ("assistant", "答2 重新生成")]
    # A second regenerate of the same round still leaves one round.
    await stream_round(client, upstream, [user("问1"), assistant("答1"), user("问2")], "答2 第三版")
    assert await texts(client) == [("user", "问1"), ("assistant", "答1"),
                                   ("user", "问2"), ("assistant", "答2 第三版")]


async def test_the_same_words_after_the_stored_reply_are_a_new_round(gateway: Any,
                                                                     upstream: Any) -> None:
    client = await gateway(persona=PERSONA, **PARTITION)
    await say(client, upstream, "", "答1", messages=[user("问1")])
    await say(client, upstream, "", "好的", messages=[user("问1"), assistant("答1"),
                                                     user("再说一遍")])
    sent = await say(client, upstream, "", "好的，再说一遍", messages=[
        user("问1"), assistant("答1"), user("再说一遍"), assistant("好的"), user("再说一遍")])
    assert sent == [system(PERSONA), u("问1"), a("答1"), u("再说一遍"), a("好的", CC),
                    now_turn("再说一遍")]
    assert await texts(client) == [("user", "问1"), ("assistant", "答1"),
                                   ("user", "再说一遍"), ("assistant", "好的"),
                                   ("user", "再说一遍"), ("assistant", "好的，再说一遍")]


async def test_reroll_of_the_rotation_round_sends_the_same_context_without_rotating_again(
        gateway: Any, upstream: Any) -> None:
    client = await gateway(persona=PERSONA, CACHE_SUMMARY_MODEL="test/summary", **PARTITION)
    history: list[dict[str, Any]] = []
    for n in range(1, 5):
        history.append(user(f"问{n}"))
        await say(client, upstream, "", f"答{n}", messages=list(history))
        history.append(assistant(f"答{n}"))
    asked = await say(client, upstream, "", "答5", summary="摘要一",
                      messages=[*history, user("问5")])
    summaries = len([r for r in upstream.requests if r.body.get("model") == "test/summary"])
    rerolled = await say(client, upstream, "", "答5 again", messages=[*history, user("问5")])
    assert rerolled == asked == [system(PERSONA, ["摘要一"]), u("问3"), a("答3"), u("问4"),
                                 a("答4", CC), now_turn("问5")]
    assert len([r for r in upstream.requests
                if r.body.get("model") == "test/summary"]) == summaries == 1
    assert (await state_row(client))["rotations"] == 1
    assert (await texts(client))[-2:] == [("user", "问5"), ("assistant", "答5 again")]


async def test_reroll_after_tool_results_replaces_the_final_answer(gateway: Any,
                                                                   upstream: Any) -> None:
    client = await gateway(persona=PERSONA, **PARTITION)
    await say(client, upstream, "", "答1", messages=[user("问1")])
    upstream.queue(Reply(body=completion_body(None, finish_reason="tool_calls",
                                              tool_calls=[CALL])))
    conversation = [user("问1"), assistant("答1"), user("杭州天气")]
    response = await client.post("/v1/chat/completions", json={
        "model": CLAUDE, "messages": conversation})
    assert response.status == 200
    await settle(client)
    tool_result = {"role": "tool", "tool_call_id": "call_w", "content": "晴，25度"}
    conversation += [{"role": "assistant", "content": None, "tool_calls": [CALL]},
                     tool_result]
    answered = await say(client, upstream, "", "杭州晴天", messages=conversation)
    rerolled = await say(client, upstream, "", "杭州晴，25度", messages=conversation)
    call_message = {"role": "assistant", "content": None, "tool_calls": [CALL]}
    assert rerolled == answered == [system(PERSONA), u("问1"), a("答1"), now_turn("杭州天气"),
                                    call_message, tool_result]
    rows = await stored_messages(client, "default")
    assert [(r["role"], r["content"]) for r in rows] == [
        ("user", "问1"), ("assistant", "答1"), ("user", "杭州天气"), ("assistant", ""),
        ("tool", "晴，25度"), ("assistant", "杭州晴，25度")]
    assert rows[3]["metadata"]["tool_calls"] == [CALL]
