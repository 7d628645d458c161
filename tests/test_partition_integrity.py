"""Partition state under concurrency and database outages, and client independence."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlparse

from tests.fake_upstream import Reply, completion_body
from tests.gateway_support import settle, stored_messages
from tests.partition_support import CC, CLAUDE, PARTITION, a, now_turn, say, state_row, system, u

PERSONA = "你是小爪。"


async def test_two_instances_at_a_rotation_boundary_rotate_once(gateway: Any, upstream: Any
                                                                ) -> None:
    settings = {"persona": PERSONA, "CACHE_SUMMARY_MODEL": "test/summary", **PARTITION}
    first = await gateway(**settings)
    second = await gateway.start(gateway.build(**settings))
    for n in range(1, 5):
        await say(first, upstream, f"问{n}", f"答{n}")
    upstream.queue(Reply(body=completion_body("摘要一"), delay=0.3))
    upstream.reply_text("好")
    upstream.reply_text("好")
    responses = await asyncio.gather(*(
        client.post("/v1/chat/completions", json={
            "model": CLAUDE, "messages": [{"role": "user", "content": text}]})
        for client, text in ((first, "问5a"), (second, "问5b"))))
    assert [r.status for r in responses] == [200, 200]
    await settle(first)
    await settle(second)
    summaries = [r for r in upstream.requests if r.body.get("model") == "test/summary"]
    assert len(summaries) == 1
    row = await state_row(first)
    assert row["rotations"] == 1 and row["summary_parts"] == ["摘要一"]
    texts = [m["content"] for m in await stored_messages(first, "default")]
    assert "问5a" in texts and "问5b" in texts


async def test_database_outage_is_a_503_and_the_thread_continues(
        gateway: Any, upstream: Any, postgres: Any, database_url: str) -> None:
    client = await gateway(persona=PERSONA, **PARTITION)
    await say(client, upstream, "问1", "答1")
    name = urlparse(database_url).path.lstrip("/")
    postgres.admin(f"ALTER DATABASE {name} ALLOW_CONNECTIONS false")
    postgres.admin("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                   f" WHERE datname = '{name}'")
    before = len(upstream.requests)
    try:
        for _ in range(2):
            response = await client.post("/v1/chat/completions", json={
                "model": CLAUDE, "messages": [{"role": "user", "content": "问2"}]})
            assert response.status == 503
            body = await response.json()
            assert body["error"]["code"] == "partition_database_unavailable"
        assert len(upstream.requests) == before  # nothing built from partial history
    finally:
        postgres.admin(f"ALTER DATABASE {name} ALLOW_CONNECTIONS true")
    await settle(client)
    assert await say(client, upstream, "问2", "答2") == [system(PERSONA), u("问1"), a("答1"),
                                                         now_turn("问2")]


async def test_full_history_and_latest_only_clients_get_the_same_context(
        gateway: Any, upstream: Any) -> None:
    client = await gateway(persona=PERSONA, **PARTITION)
    await say(client, upstream, "问1", "答1")
    await say(client, upstream, "问2", "答2")
    # A client resending its own (different) history and system prompt.
    full = [{"role": "system", "content": "client system prompt"},
            {"role": "user", "content": "问1"}, {"role": "assistant", "content": "答1"},
            {"role": "user", "content": "问2"}, {"role": "assistant", "content": "答2"},
            {"role": "user", "content": "问3"}]
    expected = [system(PERSONA), u("问1"), a("答1"), u("问2"), a("答2", CC), now_turn("问3")]
    assert await say(client, upstream, "", "答3", messages=full) == expected
    # The user repeats themselves from a client that sends only the latest message.
    sent = await say(client, upstream, "问3", "答3")
    assert sent == [*expected[:-1], u("问3"), a("答3", CC), now_turn("问3")]
    texts = [(m["role"], m["content"]) for m in await stored_messages(client, "default")]
    assert texts[-4:] == [("user", "问3"), ("assistant", "答3"), ("user", "问3"),
                          ("assistant", "答3")]


async def test_without_a_database_partition_mode_is_plain_forwarding(gateway: Any,
                                                                     upstream: Any) -> None:
    client = await gateway(DATABASE_ENABLED=False, **PARTITION)
    messages = [{"role": "user", "content": "问1"}, {"role": "assistant", "content": "答1"},
                {"role": "user", "content": "问2"}]
    upstream.reply_text("答2")
    response = await client.post("/v1/chat/completions",
                                 json={"model": CLAUDE, "messages": messages})
    assert response.status == 200
    assert upstream.requests[-1].body["messages"] == messages
