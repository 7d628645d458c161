"""Folding the summary parts under CACHE_SUMMARY_BUDGET_CHARS (X = 2, a tiny budget)."""

from __future__ import annotations

from typing import Any

from tests.fake_upstream import Reply, completion_body
from tests.partition_support import CC, PARTITION, a, now_turn, say, state_row, system, u

PERSONA = "你是小爪。"
SETTINGS = {"persona": PERSONA, "CACHE_SUMMARY_MODEL": "test/summary",
            "CACHE_SUMMARY_BUDGET_CHARS": 10, **PARTITION}
PARTS = ["第一段摘要内容", "第二段摘要内容", "第三段摘要内容"]


async def three_rotations(client: Any, upstream: Any) -> None:
    """Rounds 1-10: rotations at rounds 5, 7 and 9 (three parts, nothing to fold yet)."""
    summaries = {5: PARTS[0], 7: PARTS[1], 9: PARTS[2]}
    for n in range(1, 11):
        await say(client, upstream, f"问{n}", f"答{n}", summary=summaries.get(n))
    assert (await state_row(client))["summary_parts"] == PARTS


async def test_fold_keeps_two_older_parts_and_the_new_one(gateway: Any, upstream: Any
                                                          ) -> None:
    client = await gateway(**SETTINGS)
    await three_rotations(client, upstream)
    upstream.queue(Reply(body=completion_body("第四段")))
    upstream.queue(Reply(body=completion_body("基础")))
    sent = await say(client, upstream, "问11", "答11")
    fold_request = upstream.requests[-2].body
    assert fold_request["model"] == "test/summary"
    assert fold_request["messages"][-1]["content"] == PARTS[0]
    parts = ["基础", PARTS[1], PARTS[2], "第四段"]
    assert sent == [system(PERSONA, parts), u("问9"), a("答9"), u("问10"), a("答10", CC),
                    now_turn("问11")]
    row = await state_row(client)
    assert row["summary_parts"] == parts and row["rotations"] == 4


async def test_failed_or_longer_fold_cancels_the_rotation(gateway: Any, upstream: Any
                                                          ) -> None:
    client = await gateway(**SETTINGS)
    await three_rotations(client, upstream)
    unchanged = [system(PERSONA, PARTS), u("问7"), a("答7"), u("问8"), a("答8", CC),
                 u("问9"), a("答9"), u("问10"), a("答10", CC), now_turn("问11")]
    upstream.queue(Reply(body=completion_body("第四段")))
    upstream.reply_error(500, "fold failed")
    assert await say(client, upstream, "问11", "答11") == unchanged
    row = await state_row(client)
    assert row["summary_parts"] == PARTS and row["rotations"] == 3
    assert "500" in row["last_summary_error"]

    # The next request tries again: a fold no shorter than its input cancels the rotation too.
    upstream.queue(Reply(body=completion_body("第四段")))
    upstream.queue(Reply(body=completion_body("一个比原来那段摘要还要长得多的基础摘要")))
    sent = await say(client, upstream, "问12", "答12")
    assert sent[0] == system(PERSONA, PARTS) and sent[1] == u("问7")
    row = await state_row(client)
    assert row["summary_parts"] == PARTS and row["rotations"] == 3
    assert "no shorter" in row["last_summary_error"]
