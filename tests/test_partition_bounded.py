"""A thread stored without partition state (plain mode before the switch, or an import) is
never read whole: its first partition request jumps to a bounded live history, once."""

from __future__ import annotations

import asyncio
from typing import Any

from pawwake.db.partition_state import recent_thread_messages
from pawwake.db.pool import cursor, execute, fetch_one
from pawwake.services import services_of
from pawwake.text.rounds import group_rounds
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
OLD_ROUNDS = 1500  # 3000 stored messages


async def store_old_rounds(client: Any, rounds: int = OLD_ROUNDS,
                           thread: str = "default") -> None:
    """``rounds`` question/answer pairs stored as plain mode left them, a minute apart and
    ending an hour ago; no partition state."""
    async with cursor(services_of(client.server.app).database.pool) as cur:
        await execute(
            cur,
            "INSERT INTO conversations (session_id, role, content, model, created_at)"
            " SELECT %(thread)s, r.role, CASE r.role WHEN 'user' THEN '问' ELSE '答' END || g,"
            " 'test/model-a', now() - interval '1 hour'"
            " - make_interval(mins => %(rounds)s - g) + r.offset_secs * interval '1 second'"
            " FROM generate_series(1, %(rounds)s) AS g,"
            " (VALUES ('user', 0), ('assistant', 1)) AS r(role, offset_secs)"
            " ORDER BY g, r.offset_secs", {"thread": thread, "rounds": rounds})


async def zone_start_text(client: Any) -> str:
    async with cursor(services_of(client.server.app).database.pool) as cur:
        row = await fetch_one(cur,
                              "SELECT c.content FROM partition_state s JOIN conversations c"
                              " ON c.id = s.zone_start_message_id WHERE s.thread_id = 'default'")
    assert row is not None
    return row["content"]


async def test_first_request_jumps_to_the_newest_x_rounds_and_the_next_does_not_rotate(
        gateway: Any, upstream: Any) -> None:
    client = await gateway(persona=PERSONA, **PARTITION)
    await store_old_rounds(client)
    assert await state_row(client) is None
    n = OLD_ROUNDS
    before = len(upstream.requests)
    sent = await say(client, upstream, "新问题", "新回答")
    assert len(upstream.requests) == before + 1  # no summary model: no summary call
    # X = 2: zone A is the newest two stored rounds, as right after a rotation.
    assert sent == [system(PERSONA), u(f"问{n - 1}"), a(f"答{n - 1}"), u(f"问{n}"),
                    a(f"答{n}", CC), now_turn("新问题")]
    assert await state_row(client) == {"summary_parts": [], "rotations": 1,
                                       "last_summary_error": None}
    assert await zone_start_text(client) == f"问{n - 1}"
    # The second request grows zone B and does not rotate again.
    sent = await say(client, upstream, "第二个问题", "第二个回答")
    assert sent == [system(PERSONA), u(f"问{n - 1}"), a(f"答{n - 1}"), u(f"问{n}"),
                    a(f"答{n}", CC), u("新问题"), a("新回答", CC), now_turn("第二个问题")]
    assert (await state_row(client))["rotations"] == 1
    assert await zone_start_text(client) == f"问{n - 1}"
    # Nothing stored was lost: the older rounds only left the live history.
    assert len(await stored_messages(client, "default")) == 2 * n + 4


async def test_with_a_summary_model_only_the_last_zone_a_slice_is_summarised(
        gateway: Any, upstream: Any) -> None:
    client = await gateway(persona=PERSONA, CACHE_SUMMARY_MODEL="test/summary", **PARTITION)
    await store_old_rounds(client)
    n = OLD_ROUNDS
    before = len(upstream.requests)
    sent = await say(client, upstream, "新问题", "新回答", summary="最近的摘要")
    summaries = [r.body for r in upstream.requests[before:]
                 if r.body.get("model") == "test/summary"]
    assert len(summaries) == 1
    prompt = summaries[0]["messages"][-1]["content"]
    assert prompt == (f"user: 问{n - 3}\n\nassistant: 答{n - 3}\n\n"
                      f"user: 问{n - 2}\n\nassistant: 答{n - 2}")
    assert sent == [system(PERSONA, ["最近的摘要"]), u(f"问{n - 1}"), a(f"答{n - 1}"),
                    u(f"问{n}"), a(f"答{n}", CC), now_turn("新问题")]
    assert await state_row(client) == {"summary_parts": ["最近的摘要"], "rotations": 1,
                                       "last_summary_error": None}


async def test_a_failed_summary_still_bounds_the_history(
        gateway: Any, upstream: Any) -> None:
    client = await gateway(persona=PERSONA, CACHE_SUMMARY_MODEL="test/summary", **PARTITION)
    await store_old_rounds(client)
    n = OLD_ROUNDS
    upstream.reply_error(500, "summary model down")
    sent = await say(client, upstream, "新问题", "新回答")
    assert sent == [system(PERSONA), u(f"问{n - 1}"), a(f"答{n - 1}"), u(f"问{n}"),
                    a(f"答{n}", CC), now_turn("新问题")]
    row = await state_row(client)
    assert row["rotations"] == 1 and row["summary_parts"] == []
    assert "500" in row["last_summary_error"]


async def test_two_instances_catching_up_together_jump_once(gateway: Any, upstream: Any
                                                             ) -> None:
    settings = {"persona": PERSONA, "CACHE_SUMMARY_MODEL": "test/summary", **PARTITION}
    first = await gateway(**settings)
    second = await gateway.start(gateway.build(**settings))
    await store_old_rounds(first)
    n = OLD_ROUNDS
    upstream.queue(Reply(body=completion_body("摘要"), delay=0.3))
    upstream.reply_text("好")
    upstream.reply_text("好")
    responses = await asyncio.gather(*(
        client.post("/v1/chat/completions", json={
            "model": CLAUDE, "messages": [{"role": "user", "content": text}]})
        for client, text in ((first, "甲"), (second, "乙"))))
    assert [r.status for r in responses] == [200, 200]
    await settle(first)
    await settle(second)
    assert len([r for r in upstream.requests if r.body.get("model") == "test/summary"]) == 1
    assert await state_row(first) == {"summary_parts": ["摘要"], "rotations": 1,
                                      "last_summary_error": None}
    chats = [normalised(r.body["messages"]) for r in upstream.requests
             if r.body.get("model") == CLAUDE]
    zone_a = [system(PERSONA, ["摘要"]), u(f"问{n - 1}"), a(f"答{n - 1}"), u(f"问{n}"),
              a(f"答{n}", CC)]
    # Whichever came second found the first one's saved state: the same context, no jump.
    assert sorted(chat[-1]["content"] for chat in chats) == [
        now_turn("乙")["content"], now_turn("甲")["content"]]
    assert [chat[:len(zone_a)] for chat in chats] == [zone_a, zone_a]
    # On a busy host the first turn may be stored before the second reads its history: then
    # the second carries that turn behind the same zone, and nothing else.
    between = sorted((chat[len(zone_a):-1] for chat in chats), key=len)
    assert between[0] == []
    assert between[1] == [] or [m["role"] for m in between[1]] == ["user", "assistant"]


async def test_a_tool_result_on_an_oversized_thread_continues_its_round(
        gateway: Any, upstream: Any) -> None:
    """The current tool round stays the current turn while the history behind it jumps."""
    client = await gateway(persona=PERSONA, **PARTITION)
    await store_old_rounds(client)
    call = {"id": "call_old", "type": "function",
            "function": {"name": "lookup", "arguments": "{}"}}
    async with cursor(services_of(client.server.app).database.pool) as cur:
        await execute(cur,
                      "INSERT INTO conversations (session_id, role, content, metadata, created_at)"
                      " VALUES ('default', 'user', '查一下', '{}', now() - interval '2 minutes'),"
                      " ('default', 'assistant', '', %s::jsonb, now() - interval '1 minute')",
                      ('{"tool_calls": [{"id": "call_old", "type": "function", "function":'
                       ' {"name": "lookup", "arguments": "{}"}}]}',))
    n = OLD_ROUNDS
    result = {"role": "tool", "tool_call_id": "call_old", "content": "结果"}
    sent = await say(client, upstream, "", "查到了", messages=[result])
    assert sent == [system(PERSONA), u(f"问{n - 1}"), a(f"答{n - 1}"), u(f"问{n}"),
                    a(f"答{n}", CC), now_turn("查一下"),
                    {"role": "assistant", "content": None, "tool_calls": [call]}, result]
    rows = await stored_messages(client, "default")
    assert [(r["role"], r["content"]) for r in rows[-4:]] == [
        ("user", "查一下"), ("assistant", ""), ("tool", "结果"), ("assistant", "查到了")]


async def test_the_read_stops_at_the_round_limit(gateway: Any, upstream: Any) -> None:
    client = await gateway(**PARTITION)
    await store_old_rounds(client, rounds=40)
    async with cursor(services_of(client.server.app).database.pool) as cur:
        rows, over = await recent_thread_messages(cur, "default", None, 8)
        assert over is True
        assert [r.messages[0]["content"] for r in group_rounds(rows)] == [
            f"问{n}" for n in range(33, 41)]
        rows, over = await recent_thread_messages(cur, "default", None, 40)
        assert over is False and len(rows) == 80
        start = rows[60]["id"]  # 问31
        rows, over = await recent_thread_messages(cur, "default", start, 10)
        assert over is False and rows[0]["content"] == "问31" and len(rows) == 20
        rows, over = await recent_thread_messages(cur, "default", start, 9)
        assert over is True and rows[0]["content"] == "问32"
