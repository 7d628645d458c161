"""Races between a turn in flight and an edit of where it belongs: renaming the partition
thread while replies stream must not leave their turns under the old id (a ghost thread),
and a conversation deleted for good while its extraction waited on the memory model must not
become a memory."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from pawwake.conversations.extraction_schedule import EXTRACT_KIND, schedule_extraction
from pawwake.db import jobs as jobs_db
from pawwake.db.conversations import NewMessage, insert_messages
from pawwake.db.pool import cursor, fetch_all, transaction
from pawwake.services import services_of
from tests.conditions import until
from tests.fake_upstream import Reply, completion_body, text_stream
from tests.gateway_support import settle
from tests.partition_support import PARTITION, say


async def rows(app: Any, sql: str, params: Any = None) -> list[dict[str, Any]]:
    async with cursor(services_of(app).database.pool) as cur:
        return await fetch_all(cur, sql, params)


async def test_renaming_the_thread_while_four_streams_run_keeps_their_turns_in_it(
        gateway: Any, upstream: Any) -> None:
    client = await gateway(**PARTITION)
    app = client.server.app
    await say(client, upstream, "先聊一句", "好的")  # the thread has a history
    release = asyncio.Event()
    for number in range(4):
        upstream.queue(Reply(chunks=text_stream(f"回答{number}", pieces=2), gate=release,
                             gate_after=2))
    streams = [await client.post("/v1/chat/completions", json={
        "model": "anthropic/claude-test", "stream": True,
        "messages": [{"role": "user", "content": f"问题{number}"}]}) for number in range(4)]
    for response in streams:
        assert response.status == 200
        await response.content.readany()  # each reply has begun
    renamed = await client.put("/api/partition/thread/rename",
                               json={"old_id": "default", "new_id": "家"})
    assert renamed.status == 200, await renamed.text()
    release.set()
    for response in streams:
        await response.read()
    await settle(client)
    stored = await rows(app, "SELECT session_id, role, content FROM conversations ORDER BY id")
    assert {r["session_id"] for r in stored} == {"家"}, stored  # no ghost "default"
    assert sorted(r["content"] for r in stored if r["role"] == "assistant") == sorted(
        ["好的", *(f"回答{n}" for n in range(4))])
    threads = await (await client.get("/api/partition/threads")).json()
    assert [t["thread_id"] for t in threads["threads"]] == ["家"], threads
    # A thread named like the old one later is a thread of its own: nothing is redirected.
    await client.post("/api/partition/switch", json={"thread_id": "default"})
    upstream.reply_text("新线程的回答")
    response = await client.post("/v1/chat/completions", json={
        "model": "anthropic/claude-test", "messages": [{"role": "user", "content": "新问题"}]})
    assert response.status == 200
    await settle(client)
    fresh = await rows(app, "SELECT content FROM conversations WHERE session_id = 'default'"
                            " ORDER BY id")
    assert [r["content"] for r in fresh] == ["新问题", "新线程的回答"]


async def test_a_conversation_purged_while_its_extraction_waits_is_not_learned(
        make_client: Any, upstream: Any) -> None:
    client = await make_client(JOB_WORKERS=0, MEMORY_ENABLED=True, MEMORY_MODEL="test/memory",
                               MEMORY_EXTRACT_INTERVAL=1)
    app = client.server.app
    services = services_of(app)
    settings = await services.config.fresh()
    async with transaction(services.database.pool) as cur:
        await insert_messages(cur, "to-forget", [NewMessage("user", "我的银行卡密码是 1234"),
                                                 NewMessage("assistant", "请不要告诉别人")])
        job_id = await schedule_extraction(cur, settings, "to-forget")
    assert job_id is not None
    answer = asyncio.Event()
    upstream.queue(Reply(body=completion_body(json.dumps({"memories": [
        {"content": "用户的银行卡密码是 1234", "importance": 9, "action": "new"}]})),
        gate=answer))
    running = asyncio.create_task(services.jobs.run_until_idle())
    await until(lambda: [r for r in upstream.requests  # the model is thinking
                         if r.body.get("model") == "test/memory"])
    trashed = await client.delete("/api/conversations/to-forget")
    assert trashed.status == 200, await trashed.text()
    purged = await client.delete("/api/conversations/to-forget?permanent=true")
    assert purged.status == 200, await purged.text()
    answer.set()
    await asyncio.wait_for(running, 30)
    assert await rows(app, "SELECT content, source_session FROM memories") == []
    async with cursor(services.database.pool) as cur:
        job = await jobs_db.get_job(cur, job_id)
    assert job["kind"] == EXTRACT_KIND and job["status"] == "done"
    assert job["result"].get("skipped"), job["result"]
