"""Golden tests of the exact upstream messages in partition mode (X = 2 unless said), through
the real gateway and the fake upstream, and of the prefix consecutive requests share."""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

from tests.fake_upstream import Reply, completion_body
from tests.gateway_support import settle, stored_messages
from tests.partition_support import (
    CC,
    CC_1H,
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
_MARKER = re.compile(rb',"cache_control":\{[^{}]*\}')


async def test_fewer_than_x_rounds_have_no_zones_then_zone_a_and_b(gateway: Any,
                                                                   upstream: Any) -> None:
    client = await gateway(persona=PERSONA, **PARTITION)
    assert await say(client, upstream, "问1", "答1") == [system(PERSONA), now_turn("问1")]
    assert await say(client, upstream, "问2", "答2") == [
        system(PERSONA), u("问1"), a("答1"), now_turn("问2")]
    assert await say(client, upstream, "问3", "答3") == [
        system(PERSONA), u("问1"), a("答1"), u("问2"), a("答2", CC), now_turn("问3")]
    assert await say(client, upstream, "问4", "答4") == [
        system(PERSONA), u("问1"), a("答1"), u("问2"), a("答2", CC), u("问3"), a("答3", CC),
        now_turn("问4")]
    assert await state_row(client) is None
    rows = await stored_messages(client, "default")
    assert [(r["role"], r["content"]) for r in rows] == [
        (role, f"{'问' if role == 'user' else '答'}{n}") for n in range(1, 5)
        for role in ("user", "assistant")]


async def test_rotations_with_a_summary_model(gateway: Any, upstream: Any) -> None:
    client = await gateway(persona=PERSONA, CACHE_SUMMARY_MODEL="test/summary", **PARTITION)
    for n in range(1, 5):
        await say(client, upstream, f"问{n}", f"答{n}")
    # Zone B holds X = 2 rounds: zone A (rounds 1-2) is summarised, B becomes A.
    sent = await say(client, upstream, "问5", "答5", summary="摘要一")
    summary_request = upstream.requests[-2].body
    assert summary_request["model"] == "test/summary"
    assert "user: 问1" in summary_request["messages"][-1]["content"]
    assert "assistant: 答2" in summary_request["messages"][-1]["content"]
    assert "问3" not in summary_request["messages"][-1]["content"]
    assert sent == [system(PERSONA, ["摘要一"]), u("问3"), a("答3"), u("问4"), a("答4", CC),
                    now_turn("问5")]
    assert await say(client, upstream, "问6", "答6") == [
        system(PERSONA, ["摘要一"]), u("问3"), a("答3"), u("问4"), a("答4", CC),
        u("问5"), a("答5", CC), now_turn("问6")]
    sent = await say(client, upstream, "问7", "答7", summary="摘要二")
    assert sent == [system(PERSONA, ["摘要一", "摘要二"]), u("问5"), a("答5"), u("问6"),
                    a("答6", CC), now_turn("问7")]
    row = await state_row(client)
    assert row == {"summary_parts": ["摘要一", "摘要二"], "rotations": 2,
                   "last_summary_error": None}


async def test_without_a_summary_model_the_zones_slide(gateway: Any, upstream: Any) -> None:
    client = await gateway(persona=PERSONA, **PARTITION)
    for n in range(1, 5):
        await say(client, upstream, f"问{n}", f"答{n}")
    before = len(upstream.requests)
    sent = await say(client, upstream, "问5", "答5")
    assert len(upstream.requests) == before + 1  # no summary call
    assert sent == [system(PERSONA), u("问3"), a("答3"), u("问4"), a("答4", CC), now_turn("问5")]
    assert (await state_row(client))["rotations"] == 1


async def test_a_failed_summary_keeps_zone_a_and_the_next_request_retries(
        gateway: Any, upstream: Any) -> None:
    client = await gateway(persona=PERSONA, CACHE_SUMMARY_MODEL="test/summary", **PARTITION)
    for n in range(1, 5):
        await say(client, upstream, f"问{n}", f"答{n}")
    upstream.reply_error(500, "summary model down")
    sent = await say(client, upstream, "问5", "答5")
    assert sent == [system(PERSONA), u("问1"), a("答1"), u("问2"), a("答2", CC),
                    u("问3"), a("答3"), u("问4"), a("答4", CC), now_turn("问5")]
    row = await state_row(client)
    assert row["rotations"] == 0 and "500" in row["last_summary_error"]
    # The very next request tries the summary again (no waiting period), and fails again.
    before = len(upstream.requests)
    upstream.reply_error(500, "summary model still down")
    sent = await say(client, upstream, "问6", "答6")
    assert len(upstream.requests) == before + 2
    assert upstream.requests[before].body["model"] == "test/summary"
    assert sent[:5] == [system(PERSONA), u("问1"), a("答1"), u("问2"), a("答2", CC)]
    # 3X = 6 history rounds is the cap: past it the oldest X slide out without a summary
    # (the summary was tried once more and failed).
    upstream.reply_error(500, "summary model still down")
    sent = await say(client, upstream, "问7", "答7")
    assert len(sent) == 14 and sent[1] == u("问1")
    upstream.reply_error(500, "summary model still down")
    sent = await say(client, upstream, "问8", "答8")
    assert sent == [system(PERSONA), u("问3"), a("答3"), u("问4"), a("答4", CC),
                    u("问5"), a("答5"), u("问6"), a("答6"), u("问7"), a("答7", CC),
                    now_turn("问8")]
    row = await state_row(client)
    assert row["rotations"] == 1 and row["summary_parts"] == []
    # Once the model answers again, the next due rotation summarises.
    sent = await say(client, upstream, "问9", "答9", summary="回来的摘要")
    assert sent[0] == system(PERSONA, ["回来的摘要"])
    row = await state_row(client)
    assert row["summary_parts"] == ["回来的摘要"] and row["last_summary_error"] is None


def plain(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "content": text}


async def test_non_claude_models_get_plain_strings(gateway: Any, upstream: Any) -> None:
    client = await gateway(persona=PERSONA, **{**PARTITION, "DEFAULT_MODEL": "test/model-a"})
    for n in range(1, 4):
        sent = await say(client, upstream, f"问{n}", f"答{n}", model="test/model-a")
    assert sent == [{"role": "system", "content": PERSONA}, plain("user", "问1"),
                    plain("assistant", "答1"), plain("user", "问2"), plain("assistant", "答2"),
                    now_turn("问3")]
    assert b"cache_control" not in upstream.requests[-1].raw


async def test_a_non_claude_thread_gets_only_string_contents(gateway: Any,
                                                             upstream: Any) -> None:
    """Summary parts, a tool round and both zones: every content is a plain string (null
    only beside tool calls), and no marker is left anywhere."""
    model = "test/model-a"
    client = await gateway(persona=PERSONA, CACHE_SUMMARY_MODEL="test/summary",
                           **{**PARTITION, "DEFAULT_MODEL": model})
    await say(client, upstream, "问1", "答1", model=model)
    await tool_round(client, upstream, "杭州天气", model=model)
    for n in range(3, 8):
        await say(client, upstream, f"问{n}", f"答{n}", model=model,
                  summary={5: "摘要一", 7: "摘要二"}.get(n))
    chats = [r for r in upstream.requests if r.body["model"] == model]
    assert len(chats) == 8
    for request in chats:
        assert b"cache_control" not in request.raw
        for message in request.body["messages"]:
            content = message["content"]
            assert isinstance(content, str) or (content is None and message["tool_calls"]), \
                message
    assert normalised(chats[-1].body["messages"]) == [
        {"role": "system", "content": f"{PERSONA}\n\nSummary of the earlier conversation:\n"
                                      "摘要一\n\n摘要二"},
        plain("user", "问5"), plain("assistant", "答5"), plain("user", "问6"),
        plain("assistant", "答6"), now_turn("问7")]


async def test_one_hour_ttl_marks_every_breakpoint(gateway: Any, upstream: Any) -> None:
    client = await gateway(persona=PERSONA, CACHE_TTL="1h", CACHE_SUMMARY_MODEL="test/summary",
                           **PARTITION)
    for n in range(1, 5):
        await say(client, upstream, f"问{n}", f"答{n}")
    await say(client, upstream, "问5", "答5", summary="摘要一")
    sent = await say(client, upstream, "问6", "答6")
    assert sent == [system(PERSONA, ["摘要一"], CC_1H), u("问3"), a("答3"), u("问4"),
                    a("答4", CC_1H), u("问5"), a("答5", CC_1H), now_turn("问6")]


def _compact(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def _unmarked(data: bytes) -> bytes:
    """The bytes with every ``cache_control`` key taken out and nothing else changed."""
    return _MARKER.sub(b"", data)


def _messages_bytes(request: Any) -> bytes:
    """The exact bytes the gateway sent from the messages array on."""
    head = b'"messages":'
    assert request.raw.count(head) == 1
    return request.raw[request.raw.index(head) + len(head):]


def _cached_prefix(request: Any) -> tuple[bytes, int]:
    """The sent bytes of the messages up to the end of the last one holding a breakpoint,
    markers removed, and that message's index."""
    messages = request.body["messages"]
    last = max(i for i, m in enumerate(messages) if b"cache_control" in _compact(m))
    prefix = _compact(messages[:last + 1])[:-1]
    assert _messages_bytes(request).startswith(prefix)  # the very bytes that were sent
    return _unmarked(prefix), last


async def test_consecutive_claude_requests_share_the_rendered_prefix(gateway: Any,
                                                                     upstream: Any) -> None:
    """Each request repeats the bytes of the previous one, markers aside, up to its last
    breakpoint; once there are zones, that is the whole of zone B. X = 3, so zone B grows
    by a round (and its breakpoint moves on) between rotations."""
    client = await gateway(persona=PERSONA, CACHE_SUMMARY_MODEL="test/summary",
                           **{**PARTITION, "CACHE_PARTITION_X": 3})
    for n in range(1, 5):
        await say(client, upstream, f"问{n}", f"答{n}")
    await tool_round(client, upstream, "杭州天气")  # round 5, in zone B at the next request
    for n in range(6, 11):
        await say(client, upstream, f"问{n}", f"答{n}", summary={7: "摘要一", 10: "摘要二"}.get(n))
    chats = [r for r in upstream.requests if r.body["model"] == CLAUDE]
    assert len(chats) == 11
    checked = covering_zone_b = 0
    for previous, current in itertools.pairwise(chats):
        if previous.body["messages"][0] != current.body["messages"][0]:
            continue  # a rotation rewrote the summary parts
        cached, last = _cached_prefix(previous)
        assert _unmarked(_messages_bytes(current)).startswith(cached)
        checked += 1
        if last > 0:  # zones exist: only the current turn follows the last breakpoint
            after = previous.body["messages"][last + 1]
            assert after["role"] == "user" and after["content"].startswith("[Current time: ")
            covering_zone_b += 1
    assert (checked, covering_zone_b) == (8, 5)


async def tool_round(client: Any, upstream: Any, text: str, *, model: str = CLAUDE) -> None:
    """A round with a tool call, its result and the final answer (two upstream requests)."""
    call = {"id": "call_w", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\":\"杭州\"}"}}
    upstream.queue(Reply(body=completion_body(None, finish_reason="tool_calls",
                                              tool_calls=[call])))
    response = await client.post("/v1/chat/completions", json={
        "model": model, "messages": [{"role": "user", "content": text}]})
    assert response.status == 200, await response.text()
    await settle(client)
    await say(client, upstream, "", "晴", model=model,
              messages=[{"role": "tool", "tool_call_id": "call_w", "content": "晴，25度"}])
