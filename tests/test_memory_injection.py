"""Memories and reminders recalled into chat requests, end to end through the gateway."""

from __future__ import annotations

import asyncio
from typing import Any

from pawwake.db.pool import cursor, fetch_all, fetch_one, transaction
from pawwake.services import services_of
from pawwake.text import tokens
from tests.fake_upstream import Reply, text_stream
from tests.gateway_support import chat_body, settle

MEMORY_ON = {"MEMORY_ENABLED": True, "MEMORY_VECTOR_ENABLED": False, "JOB_WORKERS": 0,
             "MEMORY_EXTRACT_INTERVAL": 0}


async def add_memory(client: Any, content: str, *, remind_in_minutes: float | None = None,
                     event_date: str | None = None) -> int:
    tokens.load()
    async with transaction(services_of(client.server.app).database.pool) as cur:
        await cur.execute(
            "INSERT INTO memories (content, importance, search_terms, event_date, remind_at)"
            " VALUES (%s, 8, %s, %s, CASE WHEN %s::float IS NULL THEN NULL"
            "  ELSE now() + %s::float * interval '1 minute' END) RETURNING id",
            (content, tokens.index_terms(content), event_date, remind_in_minutes,
             remind_in_minutes))
        return (await cur.fetchone())[0]


def sent_text(upstream: Any, index: int = -1) -> str:
    messages = upstream.requests[index].body["messages"]
    return "\n".join(m["content"] if isinstance(m["content"], str) else
                     "\n".join(p.get("text", "") for p in m["content"]) for m in messages)


async def test_plain_mode_appends_memories_to_the_system_prompt(gateway: Any, upstream: Any
                                                                ) -> None:
    client = await gateway(persona="你是小爪。", **MEMORY_ON)
    await add_memory(client, "用户的猫叫小橘", event_date="2026-02-17")
    await add_memory(client, "用户喜欢喝乌龙茶")
    response = await client.post("/v1/chat/completions", json=chat_body("小橘最近胃口不好怎么办"))
    assert response.status == 200
    system = upstream.requests[-1].body["messages"][0]
    assert system["role"] == "system"
    assert system["content"].startswith("你是小爪。")
    assert "<retrieved_memories>\n[2026-02-17] 用户的猫叫小橘" in system["content"]
    assert "乌龙茶" not in system["content"]  # unrelated: below the score floor
    assert "according to my records" in system["content"]  # the guidance, once
    user = upstream.requests[-1].body["messages"][-1]
    assert user["content"] == "小橘最近胃口不好怎么办"


async def chat_in_thread(client: Any, text: str, thread: str) -> None:
    """Partition mode: every client continues the active thread (PARTITION_SESSION_ID)."""
    await services_of(client.server.app).config.update({"PARTITION_SESSION_ID": thread})
    response = await client.post("/v1/chat/completions", json=chat_body(text))
    assert response.status == 200
    await response.read()
    await settle(client)


async def test_partition_mode_puts_memories_in_the_current_turn_and_respects_seen_ttl(
        gateway: Any, upstream: Any) -> None:
    client = await gateway(CACHE_PARTITION_ENABLED=True, MEMORY_SEEN_TTL_HOURS=6, **MEMORY_ON)
    cat = await add_memory(client, "用户的猫叫小橘")
    await chat_in_thread(client, "小橘今天很乖", "thread-a")
    current = upstream.requests[-1].body["messages"][-1]["content"]
    assert current.startswith("<retrieved_memories>") and current.endswith("小橘今天很乖")
    assert all(m["role"] != "system" or "retrieved_memories" not in str(m["content"])
               for m in upstream.requests[-1].body["messages"])

    # Within the TTL the same thread is not reminded again; another thread is.
    await chat_in_thread(client, "小橘又睡着了", "thread-a")
    assert "用户的猫叫小橘" not in current_turn_text(upstream)
    await chat_in_thread(client, "小橘又睡着了", "thread-b")
    assert "用户的猫叫小橘" in current_turn_text(upstream)

    # Once the mark is older than the TTL, the memory comes back.
    async with transaction(services_of(client.server.app).database.pool) as cur:
        await cur.execute("UPDATE memory_seen SET seen_at = now() - interval '7 hours'"
                          " WHERE session_id = 'thread-a' AND memory_id = %s", (cat,))
    await chat_in_thread(client, "小橘在玩球", "thread-a")
    assert "用户的猫叫小橘" in current_turn_text(upstream)


def current_turn_text(upstream: Any) -> str:
    content = upstream.requests[-1].body["messages"][-1]["content"]
    return content if isinstance(content, str) else str(content)


async def test_nothing_is_marked_seen_when_the_upstream_fails(gateway: Any, upstream: Any
                                                             ) -> None:
    client = await gateway(CACHE_PARTITION_ENABLED=True, **MEMORY_ON)
    await add_memory(client, "用户的猫叫小橘")
    upstream.reply_error(500, "provider down")
    response = await client.post("/v1/chat/completions", json=chat_body("小橘怎么样"))
    assert response.status == 500
    await settle(client)
    async with cursor(services_of(client.server.app).database.pool) as cur:
        assert await fetch_all(cur,
                               "SELECT * FROM memory_seen") == []
    await client.post("/v1/chat/completions", json=chat_body("小橘怎么样"))
    assert "用户的猫叫小橘" in current_turn_text(upstream)


async def test_a_due_reminder_goes_to_one_of_two_concurrent_requests(gateway: Any,
                                                                     upstream: Any) -> None:
    client = await gateway(**MEMORY_ON)
    reminder = await add_memory(client, "提醒用户给妈妈打电话", remind_in_minutes=-1)
    upstream.queue(Reply(chunks=text_stream("好的"), delay=0.05))
    upstream.queue(Reply(chunks=text_stream("好的"), delay=0.05))
    responses = await asyncio.gather(*(
        client.post("/v1/chat/completions", json=chat_body(f"早上好 {n}", stream=True))
        for n in range(2)))
    for response in responses:
        assert response.status == 200
        await response.read()
    await settle(client)
    carried = [r for r in upstream.requests if "提醒用户给妈妈打电话" in sent_text_of(r)]
    assert len(carried) == 1
    assert "[提醒 " in sent_text_of(carried[0])
    async with cursor(services_of(client.server.app).database.pool) as cur:
        row = await fetch_one(cur,
                              "SELECT reminder_delivered_at, reminder_claim_token FROM memories"
                              " WHERE id = %s", (reminder,))
    assert row["reminder_delivered_at"] is not None and row["reminder_claim_token"] is None
    await client.post("/v1/chat/completions", json=chat_body("还有什么事吗"))
    assert "提醒用户给妈妈打电话" not in sent_text(upstream)  # delivered once only


async def test_a_cancelled_stream_releases_the_reminder_claim(gateway: Any, upstream: Any
                                                              ) -> None:
    client = await gateway(**MEMORY_ON)
    reminder = await add_memory(client, "提醒用户交房租", remind_in_minutes=-5)
    chunks = text_stream("never finished", pieces=3)
    upstream.queue(Reply(chunks=chunks, gate=asyncio.Event(), gate_after=2))
    response = await client.post("/v1/chat/completions", json=chat_body("嗨", stream=True))
    head = b""
    while len(head) < len(chunks[0] + chunks[1]):
        head += await response.content.readany()
    response.close()  # the user pressed stop
    await asyncio.wait_for(upstream.disconnected.wait(), 10)
    await settle(client)
    async with cursor(services_of(client.server.app).database.pool) as cur:
        row = await fetch_one(cur,
                              "SELECT reminder_delivered_at, reminder_claimed_at FROM memories"
                              " WHERE id = %s", (reminder,))
    assert row == {"reminder_delivered_at": None, "reminder_claimed_at": None}
    await client.post("/v1/chat/completions", json=chat_body("在吗"))
    assert "提醒用户交房租" in sent_text(upstream)  # the next request gets it


async def test_memory_off_injects_nothing(gateway: Any, upstream: Any) -> None:
    client = await gateway(**{**MEMORY_ON, "MEMORY_ENABLED": False})
    await add_memory(client, "用户的猫叫小橘")
    await client.post("/v1/chat/completions", json=chat_body("小橘呢"))
    assert "retrieved_memories" not in sent_text(upstream)


def sent_text_of(recorded: Any) -> str:
    return "\n".join(m["content"] if isinstance(m["content"], str) else "" for m in
                     recorded.body["messages"])
