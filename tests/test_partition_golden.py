"""Golden tests of the exact upstream messages in partition mode (X = 2), through the real
gateway and the fake upstream."""

from __future__ import annotations

from typing import Any

from tests.gateway_support import stored_messages
from tests.partition_support import (
    CC,
    CC_1H,
    PARTITION,
    a,
    now_turn,
    say,
    state_row,
    system,
    u,
)

PERSONA = "你是小爪。"


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
                   "last_summary_error": None, "backing_off": False}


async def test_without_a_summary_model_the_zones_slide(gateway: Any, upstream: Any) -> None:
    client = await gateway(persona=PERSONA, **PARTITION)
    for n in range(1, 5):
        await say(client, upstream, f"问{n}", f"答{n}")
    before = len(upstream.requests)
    sent = await say(client, upstream, "问5", "答5")
    assert len(upstream.requests) == before + 1  # no summary call
    assert sent == [system(PERSONA), u("问3"), a("答3"), u("问4"), a("答4", CC), now_turn("问5")]
    assert (await state_row(client))["rotations"] == 1


async def test_summary_failure_keeps_zone_a_and_backs_off(gateway: Any, upstream: Any) -> None:
    client = await gateway(persona=PERSONA, CACHE_SUMMARY_MODEL="test/summary", **PARTITION)
    for n in range(1, 5):
        await say(client, upstream, f"问{n}", f"答{n}")
    upstream.reply_error(500, "summary model down")
    sent = await say(client, upstream, "问5", "答5")
    assert sent == [system(PERSONA), u("问1"), a("答1"), u("问2"), a("答2", CC),
                    u("问3"), a("答3"), u("问4"), a("答4", CC), now_turn("问5")]
    row = await state_row(client)
    assert row["rotations"] == 0 and row["backing_off"] is True
    assert "500" in row["last_summary_error"]
    # Backing off: the next request makes no summary call and keeps the layout.
    before = len(upstream.requests)
    sent = await say(client, upstream, "问6", "答6")
    assert len(upstream.requests) == before + 1
    assert sent[:5] == [system(PERSONA), u("问1"), a("答1"), u("问2"), a("答2", CC)]
    # 3X = 6 history rounds is the cap; past it the oldest X slide out without a summary.
    sent = await say(client, upstream, "问7", "答7")
    assert len(sent) == 14 and sent[1] == u("问1")
    sent = await say(client, upstream, "问8", "答8")
    assert sent == [system(PERSONA), u("问3"), a("答3"), u("问4"), a("答4", CC),
                    u("问5"), a("答5"), u("问6"), a("答6"), u("问7"), a("答7", CC),
                    now_turn("问8")]
    row = await state_row(client)
    assert row["rotations"] == 1 and row["summary_parts"] == []


async def test_non_claude_models_get_plain_strings(gateway: Any, upstream: Any) -> None:
    client = await gateway(persona=PERSONA, **{**PARTITION, "DEFAULT_MODEL": "test/model-a"})
    for n in range(1, 4):
        sent = await say(client, upstream, f"问{n}", f"答{n}", model="test/model-a")
    assert sent == [{"role": "system", "content": PERSONA}, u("问1"), a("答1"), u("问2"),
                    a("答2"), now_turn("问3")]
    assert b"cache_control" not in upstream.requests[-1].raw


async def test_one_hour_ttl_marks_every_breakpoint(gateway: Any, upstream: Any) -> None:
    client = await gateway(persona=PERSONA, CACHE_TTL="1h", CACHE_SUMMARY_MODEL="test/summary",
                           **PARTITION)
    for n in range(1, 5):
        await say(client, upstream, f"问{n}", f"答{n}")
    await say(client, upstream, "问5", "答5", summary="摘要一")
    sent = await say(client, upstream, "问6", "答6")
    assert sent == [system(PERSONA, ["摘要一"], CC_1H), u("问3"), a("答3"), u("问4"),
                    a("答4", CC_1H), u("问5"), a("答5", CC_1H), now_turn("问6")]
