"""What the gateway remembers of a turn: messages by session, re-rolls, tool traffic,
attachments, provider extras and token usage."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from pawwake.chat.sessions import derived_session_id, resolve_session_id
from pawwake.conversations.turn_plan import plan_turn, reply_message
from pawwake.llm.sse import CapturedReply
from tests.fake_upstream import FakeUpstream, Reply, completion_body, text_stream
from tests.gateway_support import GatewayStarter, settle, stored_messages, usage_rows


async def send(client: Any, messages: list[dict[str, Any]], *, stream: bool = False,
               headers: dict[str, str] | None = None, **extra: Any) -> None:
    body = {"model": "test/model-a", "stream": stream, "messages": messages, **extra}
    response = await client.post("/v1/chat/completions", json=body, headers=headers or {})
    assert response.status == 200
    await response.read()
    await settle(client)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


async def test_session_id_rules(gateway: GatewayStarter, upstream: FakeUpstream) -> None:
    client = await gateway()
    await send(client, [user("a")], headers={"X-Session-Id": "from-header"}, user="ignored")
    await send(client, [user("b")], user="from-user-field",
               metadata={"session_id": "ignored"})
    await send(client, [user("c")], metadata={"session_id": "from-metadata"})
    await send(client, [user("first words")])
    await send(client, [user("first words"), assistant("x"), user("more")])
    await send(client, [user("other opening")])
    sessions = [row["session_id"] for row in await stored_messages(client)]
    # The gateway's own routing field is not passed on; the client's other metadata is.
    assert [r.body.get("metadata") for r in upstream.requests[:3]] == [None, None, None]
    await send(client, [user("d")], metadata={"session_id": "m2", "trace": "t"})
    assert upstream.requests[-1].body["metadata"] == {"trace": "t"}
    derived = derived_session_id([user("first words")])
    assert re.fullmatch(r"auto-[0-9a-f]{16}", derived)
    assert sessions[:6] == ["from-header"] * 2 + ["from-user-field"] * 2 + ["from-metadata"] * 2
    assert sessions[6:10] == [derived] * 4
    assert sessions[10:] == [derived_session_id([user("other opening")])] * 2
    assert sessions[10] != derived


def test_session_id_precedence_and_stability() -> None:
    body = {"messages": [{"role": "system", "content": "s"}, user("hello")]}
    assert resolve_session_id({"X-Session-Id": " h "}, {**body, "user": "u"}) == "h"
    assert resolve_session_id({}, {**body, "user": "u",
                                   "metadata": {"session_id": "m"}}) == "u"
    assert resolve_session_id({}, {**body, "user": "  ", "metadata": {"session_id": "m"}}) == "m"
    assert resolve_session_id({}, body) == resolve_session_id({}, {
        "messages": [user("hello"), assistant("hi"), user("next")]})
    parts = {"messages": [{"role": "user", "content": [{"type": "text", "text": "hello"}]}]}
    assert resolve_session_id({}, parts) == resolve_session_id({}, body)


async def test_reroll_replaces_the_previous_reply(gateway: GatewayStarter,
                                                  upstream: FakeUpstream) -> None:
    client = await gateway()
    upstream.reply_text("first answer", pieces=1)
    await send(client, [user("Q")], stream=True)
    upstream.reply_text("second answer", pieces=1)
    await send(client, [user("Q")], stream=True)  # the user pressed "regenerate"
    assert [(r["role"], r["content"]) for r in await stored_messages(client)] == [
        ("user", "Q"), ("assistant", "second answer")]
    upstream.reply_text("B")
    await send(client, [user("Q"), assistant("second answer"), user("Q2")])
    upstream.reply_text("B again")
    # The same words again, after the stored answer: a new round, not a re-roll.
    await send(client, [user("Q"), assistant("second answer"), user("Q2"), assistant("B"),
                        user("Q2")])
    assert [r["content"] for r in await stored_messages(client)] == [
        "Q", "second answer", "Q2", "B", "Q2", "B again"]


async def test_reroll_after_tool_results_replaces_the_final_answer(
        gateway: GatewayStarter, upstream: FakeUpstream) -> None:
    client = await gateway()
    call = {"id": "call_1", "type": "function",
            "function": {"name": "lookup", "arguments": "{}"}}
    upstream.queue(Reply(body=completion_body("", tool_calls=[call],
                                              finish_reason="tool_calls")))
    history = [user("look it up")]
    await send(client, history)
    history += [{"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "call_1", "content": "42"}]
    upstream.reply_text("It is 42.")
    await send(client, history)
    upstream.reply_text("The answer is 42.")
    await send(client, history)  # regenerate the final answer
    rows = await stored_messages(client)
    assert [(r["role"], r["content"]) for r in rows] == [
        ("user", "look it up"), ("assistant", ""), ("tool", "42"),
        ("assistant", "The answer is 42.")]
    assert rows[1]["metadata"]["tool_calls"] == [call]
    assert rows[1]["metadata"]["finish_reason"] == "tool_calls"


async def test_tool_call_message_the_gateway_never_saw_is_stored_once(
        gateway: GatewayStarter, upstream: FakeUpstream) -> None:
    client = await gateway()
    call = {"id": "call_x", "type": "function", "function": {"name": "f", "arguments": "{}"},
            "extra_content": {"google": {"thought_signature": "abc"}}}
    history = [user("go"), {"role": "assistant", "content": "", "tool_calls": [call],
                            "reasoning_details": [{"type": "reasoning.text", "text": "t"}]},
               {"role": "tool", "tool_call_id": "call_x", "name": "f", "content": "ok"}]
    await send(client, history)
    rows = await stored_messages(client)
    assert [r["role"] for r in rows] == ["user", "assistant", "tool", "assistant"]
    assert rows[1]["metadata"]["tool_calls"] == [call]
    assert rows[1]["metadata"]["extras"] == {
        "reasoning_details": [{"type": "reasoning.text", "text": "t"}]}
    assert rows[2]["metadata"] == {"tool_call_id": "call_x", "name": "f"}


async def test_images_are_noted_not_stored(gateway: GatewayStarter,
                                           upstream: FakeUpstream) -> None:
    client = await gateway()
    picture = "data:image/png;base64," + "iVBORw0KGgo" * 200
    content = [{"type": "text", "text": "这是什么？"},
               {"type": "image_url", "image_url": {"url": picture}},
               {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}]
    await send(client, [{"role": "user", "content": content}])
    row = (await stored_messages(client))[0]
    assert row["content"] == "这是什么？"
    assert row["metadata"]["attachments"] == [
        {"type": "image_url"}, {"type": "image_url", "url": "https://example.com/cat.png"}]
    assert "iVBORw0KGgo" not in json.dumps(row, default=str)


async def test_non_stream_reply_keeps_reasoning_and_provider_extras(
        gateway: GatewayStarter, upstream: FakeUpstream) -> None:
    client = await gateway()
    upstream.queue(Reply(body=completion_body(
        "answer", reasoning_content="思考过程", annotations=[{"type": "url_citation"}],
        refusal=None)))
    await send(client, [user("why?")])
    row = (await stored_messages(client))[-1]
    assert row["metadata"] == {"reasoning_content": "思考过程", "finish_reason": "stop",
                               "extras": {"annotations": [{"type": "url_citation"}]}}


async def test_usage_is_recorded_for_stream_and_non_stream(gateway: GatewayStarter,
                                                           upstream: FakeUpstream) -> None:
    client = await gateway()
    upstream.reply_text("streamed", usage={"prompt_tokens": 100, "completion_tokens": 20,
                                           "total_tokens": 120,
                                           "prompt_tokens_details": {"cached_tokens": 64}})
    await send(client, [user("one")], stream=True, headers={"X-Session-Id": "s1"})
    upstream.reply_text("plain", usage={"prompt_tokens": 9, "completion_tokens": 3,
                                        "total_tokens": 12})
    await send(client, [user("two")], headers={"X-Session-Id": "s2"})
    assert await usage_rows(client) == [
        {"session_id": "s1", "model": "test/model-a", "prompt_tokens": 100,
         "completion_tokens": 20, "total_tokens": 120, "cached_tokens": 64,
         "usage_type": "chat"},
        {"session_id": "s2", "model": "test/model-a", "prompt_tokens": 9,
         "completion_tokens": 3, "total_tokens": 12, "cached_tokens": None,
         "usage_type": "chat"}]


async def test_stream_without_usage_stores_the_turn_but_no_usage(
        gateway: GatewayStarter, upstream: FakeUpstream) -> None:
    chunks = [c for c in text_stream("no usage", pieces=1) if b'"usage"' not in c]
    upstream.queue(Reply(chunks=chunks))
    client = await gateway()
    await send(client, [user("q")], stream=True)
    assert len(await stored_messages(client)) == 2
    assert await usage_rows(client) == []


def stored(row_id: int, role: str, content: str, **metadata: Any) -> dict[str, Any]:
    return {"id": row_id, "role": role, "content": content, "metadata": metadata}


def test_plan_turn_cases() -> None:
    reply = reply_message(CapturedReply(content="R", finish_reason="stop"), "m")
    no_ids: dict[str, set[str]] = {"assistant": set(), "tool": set()}
    # A fresh session: user + reply.
    plan = plan_turn([user("hi")], [], no_ids, reply, "m")
    assert [(m.role, m.content) for m in plan.insert] == [("user", "hi"), ("assistant", "R")]
    assert plan.replace_ids == []
    # A re-roll: same text, the stored answer is not in the client's history.
    tail = [stored(1, "user", "hi"), stored(2, "assistant", "old")]
    plan = plan_turn([user("hi")], tail, no_ids, reply, "m")
    assert plan.replace_ids == [2]
    assert [m.role for m in plan.insert] == ["assistant"]
    # The same text after the stored answer: a new round.
    plan = plan_turn([user("hi"), assistant("old"), user("hi")], tail, no_ids, reply, "m")
    assert plan.replace_ids == []
    assert [m.role for m in plan.insert] == ["user", "assistant"]
    # Stored user without an answer (should not happen): no duplicate user row.
    plan = plan_turn([user("hi")], [stored(1, "user", "hi")], no_ids, reply, "m")
    assert [m.role for m in plan.insert] == ["assistant"]


async def test_concurrent_turns_of_one_session_are_all_stored(
        gateway: GatewayStarter, upstream: FakeUpstream) -> None:
    client = await gateway()
    for number in range(6):
        upstream.reply_text(f"answer {number}", pieces=1)
    await asyncio.gather(*(send(client, [user(f"question {n}")], stream=n % 2 == 0,
                                headers={"X-Session-Id": "busy"}) for n in range(6)))
    rows = await stored_messages(client, "busy")
    assert len(rows) == 12
    assert sorted(r["content"] for r in rows if r["role"] == "user") == [
        f"question {n}" for n in range(6)]
    assert [r["role"] for r in rows] == ["user", "assistant"] * 6
