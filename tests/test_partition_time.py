"""The ``time`` rotation trigger with a fake clock (X = 2, window 30 minutes)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from pawwake.partition.layout import time_note
from pawwake.services import services_of
from tests.fake_upstream import Reply, completion_body
from tests.partition_support import CC, PARTITION, a, now_turn, say, state_row, system, u

PERSONA = "你是小爪。"


@pytest.mark.parametrize("max_rotations", [1, 2])
async def test_rotations_wait_for_the_window_then_catch_up(gateway: Any, upstream: Any,
                                                           max_rotations: int) -> None:
    app = gateway.build(persona=PERSONA, CACHE_PARTITION_TRIGGER="time",
                        CACHE_PARTITION_WINDOW=30, TIMEZONE_HOURS=0, CACHE_MAX_ROTATIONS=max_rotations,
                        CACHE_SUMMARY_MODEL="test/summary", **PARTITION)
    clock = {"now": datetime.now(UTC)}
    services_of(app).chat.clock = lambda: clock["now"]
    client = await gateway.start(app)
    for n in range(1, 7):
        await say(client, upstream, f"问{n}", f"答{n}")
    # Zone B has held X rounds since round 5, but zone A is inside the window: no rotation.
    assert await state_row(client) is None
    assert all(r.body.get("model") != "test/summary" for r in upstream.requests)

    clock["now"] += timedelta(hours=2)
    for text in ("摘要一", "摘要二")[:max_rotations]:
        upstream.queue(Reply(body=completion_body(text)))
    sent = await say(client, upstream, "问7", "答7")
    if max_rotations == 2:
        assert sent == [system(PERSONA, ["摘要一", "摘要二"]), u("问5"), a("答5"), u("问6"),
                        a("答6", CC), now_turn("问7")]
    else:
        assert sent == [system(PERSONA, ["摘要一"]), u("问3"), a("答3"), u("问4"),
                        a("答4", CC), u("问5"), a("答5"), u("问6"), a("答6", CC),
                        now_turn("问7")]
    row = await state_row(client)
    assert row["rotations"] == max_rotations
    # The time note tells the fake clock's time (TIMEZONE_HOURS=0).
    current = upstream.requests[-1].body["messages"][-1]["content"]
    assert current == f"{time_note(clock['now'])}\n\n问7"
