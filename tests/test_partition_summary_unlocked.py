"""The partition summary call runs outside any database transaction or lock: while the
summary model is slow, the thread's advisory lock is free, no pooled connection idles in a
transaction, and the rest of the gateway keeps its connections."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from pawwake.db.pool import cursor, execute, fetch_one
from pawwake.services import services_of
from tests.fake_anthropic import FakeAnthropic
from tests.fake_upstream import Reply, completion_body
from tests.gateway_support import GATEWAY_KEY, settle
from tests.messages_support import anthropic_upstream, start_gateway  # noqa: F401
from tests.partition_support import CLAUDE, PARTITION, say, state_row, system, u

PERSONA = "你是小爪。"
SUMMARY = "test/summary"


async def _rotated_once(client: Any, pending: asyncio.Task[Any], parts: list[str]) -> None:
    """The held request answers, and its rotation saved the summary ``parts``."""
    response = await pending
    assert response.status == 200, await response.text()
    await settle(client)
    row = await state_row(client)
    assert row["rotations"] == 1 and row["summary_parts"] == parts


async def _summary_requested(upstream: Any) -> None:
    for _ in range(3000):
        if any(r.body.get("model") == SUMMARY for r in upstream.requests):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the summary model was never asked")


async def _held_elsewhere(client: Any) -> dict[str, Any] | None:
    async with cursor(services_of(client.server.app).database.pool) as cur:
        return await fetch_one(
            cur,
            "SELECT (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory') AS locks,"
            " (SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND state LIKE 'idle in transaction%%') AS idle_in_transaction")


async def test_a_slow_summary_holds_no_lock_and_no_transaction(gateway: Any, upstream: Any
                                                               ) -> None:
    client = await gateway(persona=PERSONA, CACHE_SUMMARY_MODEL=SUMMARY, **PARTITION)
    for n in range(1, 5):
        await say(client, upstream, f"问{n}", f"答{n}")
    held = asyncio.Event()
    upstream.queue(Reply(body=completion_body("摘要一"), gate=held))
    upstream.reply_text("好")
    pending = asyncio.create_task(client.post("/v1/chat/completions", json={
        "model": CLAUDE, "messages": [{"role": "user", "content": "问5"}]}))
    try:
        await _summary_requested(upstream)
        assert await _held_elsewhere(client) == {"locks": 0, "idle_in_transaction": 0}
        # Another request needing the database completes while the summary is still held.
        other = await client.get("/api/partition/threads")
        assert other.status == 200, await other.text()
        assert not pending.done()
    finally:
        held.set()
    await _rotated_once(client, pending, ["摘要一"])
    sent = [r.body["messages"] for r in upstream.requests if r.body.get("model") == CLAUDE]
    assert sent[-1][0] == system(PERSONA, ["摘要一"])
    assert sent[-1][1] == u("问3")


async def test_a_slow_messages_summary_holds_no_lock_either(
        gateway: Any, upstream: Any, anthropic_upstream: FakeAnthropic) -> None:  # noqa: F811
    """Messages partition mode rotates the same way (the summary goes to the chat upstream)."""
    client = await start_gateway(gateway, anthropic_upstream, persona=PERSONA,
                                 CACHE_SUMMARY_MODEL=SUMMARY, CACHE_PARTITION_ENABLED=True,
                                 CACHE_PARTITION_X=2, JOB_WORKERS=0)

    def ask(text: str) -> Any:
        return client.post("/v1/messages", json={
            "model": "claude-test-1", "max_tokens": 10,
            "messages": [{"role": "user", "content": text}]},
            headers={"x-api-key": GATEWAY_KEY})

    for n in range(1, 5):
        anthropic_upstream.reply_text(f"答{n}")
        response = await ask(f"问{n}")
        assert response.status == 200, await response.text()
        await settle(client)
    held = asyncio.Event()
    upstream.queue(Reply(body=completion_body("摘要一"), gate=held))
    anthropic_upstream.reply_text("好")
    pending = asyncio.create_task(ask("问5"))
    try:
        await _summary_requested(upstream)
        assert await _held_elsewhere(client) == {"locks": 0, "idle_in_transaction": 0}
        assert not pending.done()
    finally:
        held.set()
    await _rotated_once(client, pending, ["摘要一"])
    system_sent = anthropic_upstream.requests[-1].body["system"]
    assert system_sent[-1]["text"].endswith("摘要一")


async def test_a_summary_edited_while_the_model_works_is_kept(gateway: Any, upstream: Any
                                                             ) -> None:
    """The rotation's save is a compare-and-set: an edit made meanwhile wins, and the
    rotation is made again on the edited state instead of overwriting it."""
    client = await gateway(persona=PERSONA, CACHE_SUMMARY_MODEL=SUMMARY, **PARTITION)
    for n in range(1, 5):
        await say(client, upstream, f"问{n}", f"答{n}")
    held = asyncio.Event()
    upstream.queue(Reply(body=completion_body("过时的摘要"), gate=held))
    upstream.queue(Reply(body=completion_body("摘要一")))
    upstream.reply_text("好")
    pending = asyncio.create_task(client.post("/v1/chat/completions", json={
        "model": CLAUDE, "messages": [{"role": "user", "content": "问5"}]}))
    try:
        await _summary_requested(upstream)
        edited = await client.put("/api/partition/summary",
                                  json={"thread_id": "default", "summary": "用户写的摘要"})
        assert edited.status == 200, await edited.text()
    finally:
        held.set()
    await _rotated_once(client, pending, ["用户写的摘要", "摘要一"])
    assert len([r for r in upstream.requests if r.body.get("model") == SUMMARY]) == 2


async def test_a_lease_left_by_a_dead_request_ends(gateway: Any, upstream: Any) -> None:
    """A request that died while summarising leaves its lease; once it runs out, the next
    request rotates (a live lease makes others wait for its holder's save instead)."""
    client = await gateway(persona=PERSONA, CACHE_SUMMARY_MODEL=SUMMARY, **PARTITION)
    for n in range(1, 5):
        await say(client, upstream, f"问{n}", f"答{n}")
    async with cursor(services_of(client.server.app).database.pool) as cur:
        await execute(cur,
                      "INSERT INTO partition_state (thread_id, version, rotating_until)"
                      " VALUES ('default', 3, now() - interval '1 second')")
    await say(client, upstream, "问5", "好", summary="摘要一")
    row = await state_row(client)
    assert row["rotations"] == 1 and row["summary_parts"] == ["摘要一"]


async def test_the_lease_keeper_ends_with_its_rotation_even_when_a_cancel_is_lost(
        gateway: Any, upstream: Any, monkeypatch: Any) -> None:
    """The keeper renews the lease while the summary model works. A renewal whose answer
    arrives as it is cancelled loses the cancel (aiopg's wait on 3.11); the keeper must still
    end with its rotation, not renew on for the life of the process."""
    from pawwake.partition import thread_rotation

    real_renew = thread_rotation.renew_rotation
    renewed, lost = asyncio.Event(), []

    async def renew_losing_one_cancel(cur: Any, thread: str, version: int, seconds: float
                                      ) -> None:
        await real_renew(cur, thread, version, seconds)
        renewed.set()
        if not lost:
            lost.append(True)
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(1.0)  # the answer's iteration: a cancel here is dropped

    monkeypatch.setattr(thread_rotation, "renew_rotation", renew_losing_one_cancel)
    monkeypatch.setattr(thread_rotation, "LEASE_SECONDS", 0.3)
    client = await gateway(persona=PERSONA, CACHE_SUMMARY_MODEL=SUMMARY, **PARTITION)
    for n in range(1, 5):
        await say(client, upstream, f"问{n}", f"答{n}")
    upstream.queue(Reply(body=completion_body("摘要一"), gate=renewed))
    upstream.reply_text("好")
    response = await client.post("/v1/chat/completions", json={
        "model": CLAUDE, "messages": [{"role": "user", "content": "问5"}]})
    assert response.status == 200, await response.text()
    await settle(client)
    await asyncio.sleep(0.3)
    keepers = [t for t in asyncio.all_tasks()
               if getattr(t.get_coro(), "__name__", "") == "_keep_lease" and not t.done()]
    assert keepers == []
