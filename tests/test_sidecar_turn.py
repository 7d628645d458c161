"""POST /api/conversations/turn: validation, idempotency, rounds and extraction scheduling."""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any

import pytest

from pawwake.app import create_app
from pawwake.db.pool import cursor, fetch_all
from pawwake.services import services_of

KEY = "sidecar-gateway-key-0123456789"
HEADERS = {"X-Gateway-Key": KEY}


def turn(turn_id: str = "t-1", session_id: str = "cc-session", **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "turn_id": turn_id, "session_id": session_id, "source": "claude-code",
        "model": "claude-sonnet", "messages": [
            {"role": "user", "content": "帮我规划去京都的旅行"},
            {"role": "assistant", "content": "可以先去清水寺，再去伏见稻荷大社。"}],
        "extract_memories": True,
        "metadata": {"cwd": "/home/me/project"}}
    body.update(extra)
    return body


@pytest.fixture
async def client(make_client: Any) -> Any:
    return await make_client(GATEWAY_SECRET=KEY, JOB_WORKERS=0, MEMORY_ENABLED=True,
                             MEMORY_MODEL="test/memory", MEMORY_EXTRACT_INTERVAL=2,
                             CONVERSATION_RECALL_ENABLED=True)


async def rows(client: Any, sql: str, params: Any = None) -> list[dict[str, Any]]:
    async with cursor(services_of(client.server.app).database.pool) as cur:
        return await fetch_all(cur, sql, params)


async def extraction_jobs(client: Any) -> list[dict[str, Any]]:
    return await rows(client, "SELECT dedupe_key, payload FROM jobs"
                              " WHERE kind = 'memory_extract' ORDER BY id")


async def test_a_turn_is_stored_in_order_with_its_metadata(client: Any) -> None:
    resp = await client.post("/api/conversations/turn",
                             json=turn(occurred_at="2026-03-01T10:00:00+08:00"), headers=HEADERS)
    assert resp.status == 201
    body = await resp.json()
    assert body["status"] == "stored" and body["messages_stored"] == 2
    stored = await rows(client, "SELECT role, content, source, turn_id, metadata, created_at,"
                                " search_terms FROM conversations ORDER BY created_at, id")
    assert [(r["role"], r["source"]) for r in stored] == [("user", "claude-code"),
                                                           ("assistant", "claude-code")]
    assert stored[0]["turn_id"] == "t-1"
    assert stored[0]["metadata"]["turn"]["metadata"] == {"cwd": "/home/me/project"}
    assert stored[0]["created_at"].isoformat().startswith("2026-03-01T02:00:00")
    assert "京都" in stored[0]["search_terms"]


async def test_auth_is_required(client: Any) -> None:
    resp = await client.post("/api/conversations/turn", json=turn())
    assert resp.status == 401


@pytest.mark.parametrize(("change", "code"), [
    ({"surprise": 1}, "unknown_field"),
    ({"turn_id": ""}, "invalid_turn_id"),
    ({"session_id": 7}, "invalid_session_id"),
    ({"source": "x" * 201}, "invalid_source"),
    ({"messages": []}, "invalid_messages"),
    ({"messages": [{"role": "system", "content": "hi"}]}, "invalid_role"),
    ({"messages": [{"role": "user", "content": "hi", "extra": 1}]}, "unknown_field"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "invalid_content"),
    ({"messages": [{"role": "tool", "content": "x"}]}, "invalid_tool_call_id"),
    ({"occurred_at": "2026-03-01 10:00:00"}, "invalid_occurred_at"),
    ({"occurred_at": "2026-03-01T10:00:00"}, "invalid_occurred_at"),
    ({"extract_memories": "yes"}, "invalid_extract_memories"),
    ({"metadata": []}, "invalid_metadata"),
])
async def test_bad_input_is_refused(client: Any, change: dict[str, Any], code: str) -> None:
    resp = await client.post("/api/conversations/turn", json=turn(**change), headers=HEADERS)
    assert resp.status == 400
    assert (await resp.json())["error"]["code"] == code
    assert await rows(client, "SELECT id FROM conversations") == []


async def test_text_parts_are_accepted(client: Any) -> None:
    body = turn(messages=[{"role": "user", "content": [{"type": "text", "text": "第一段"},
                                                        {"type": "text", "text": "第二段"}]}])
    resp = await client.post("/api/conversations/turn", json=body, headers=HEADERS)
    assert resp.status == 201
    stored = await rows(client, "SELECT content FROM conversations")
    assert stored[0]["content"] == "第一段\n第二段"


async def test_a_resent_turn_is_stored_once(client: Any) -> None:
    first = await client.post("/api/conversations/turn", json=turn(), headers=HEADERS)
    again = await client.post("/api/conversations/turn", json=turn(), headers=HEADERS)
    assert (first.status, again.status) == (201, 200)
    assert (await again.json())["status"] == "duplicate"
    assert len(await rows(client, "SELECT id FROM conversations")) == 2
    # the same turn id in another session or from another source is another turn
    other = await client.post("/api/conversations/turn", json=turn(session_id="other"),
                              headers=HEADERS)
    codex = await client.post("/api/conversations/turn", json=turn(source="codex"),
                              headers=HEADERS)
    assert (other.status, codex.status) == (201, 201)


async def test_ten_concurrent_resends_store_and_extract_once(client: Any) -> None:
    await client.post("/api/conversations/turn", json=turn("t-0", messages=[
        {"role": "user", "content": "我养了一只猫"}, {"role": "assistant", "content": "真好"}]),
        headers=HEADERS)
    responses = await asyncio.gather(*(
        client.post("/api/conversations/turn", json=turn("t-1"), headers=HEADERS)
        for _ in range(10)))
    statuses = sorted(r.status for r in responses)
    assert statuses == [200] * 9 + [201]
    assert len(await rows(client, "SELECT id FROM conversations")) == 4
    jobs = await extraction_jobs(client)
    assert [j["payload"]["rounds"] for j in jobs] == [2]  # interval 2: once, at round 2
    vector_jobs = await rows(client, "SELECT id FROM jobs WHERE kind = 'conversation_embed'")
    assert len(vector_jobs) == 1


async def test_user_only_and_pending_tool_calls_do_not_extract(client: Any) -> None:
    await client.post("/api/conversations/turn", json=turn("t-0"), headers=HEADERS)
    user_only = turn("t-1", messages=[{"role": "user", "content": "再推荐几家餐厅"}])
    assert (await client.post("/api/conversations/turn", json=user_only,
                              headers=HEADERS)).status == 201
    pending = turn("t-2", messages=[{"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "search", "arguments": "{}"}}]}])
    assert (await client.post("/api/conversations/turn", json=pending,
                              headers=HEADERS)).status == 201
    assert await extraction_jobs(client) == []
    result = turn("t-3", messages=[
        {"role": "tool", "tool_call_id": "call_1", "content": "餐厅列表"},
        {"role": "assistant", "content": "推荐这三家：菊乃井、瓢亭、山玄茶。"}])
    assert (await client.post("/api/conversations/turn", json=result,
                              headers=HEADERS)).status == 201
    assert [j["payload"]["rounds"] for j in await extraction_jobs(client)] == [2]


async def test_extract_memories_false_skips_extraction(client: Any) -> None:
    await client.post("/api/conversations/turn", json=turn("t-0", extract_memories=False),
                      headers=HEADERS)
    await client.post("/api/conversations/turn", json=turn("t-1", extract_memories=False),
                      headers=HEADERS)
    assert await extraction_jobs(client) == []
    assert len(await rows(client, "SELECT id FROM conversations")) == 4


async def test_occurred_at_orders_a_late_turn_before_later_ones(client: Any) -> None:
    await client.post("/api/conversations/turn", json=turn(
        "late", occurred_at="2026-03-02T09:00:00Z", messages=[
            {"role": "user", "content": "第二天的问题"}]), headers=HEADERS)
    await client.post("/api/conversations/turn", json=turn(
        "early", occurred_at="2026-03-01T09:00:00Z", messages=[
            {"role": "user", "content": "第一天的问题"}]), headers=HEADERS)
    stored = await rows(client, "SELECT content FROM conversations ORDER BY created_at, id")
    assert [r["content"] for r in stored] == ["第一天的问题", "第二天的问题"]


async def test_restart_mid_way_loses_no_count(client: Any, make_settings: Any,
                                              aiohttp_client: Any) -> None:
    await client.post("/api/conversations/turn", json=turn("t-1"), headers=HEADERS)
    settings = make_settings(GATEWAY_SECRET=KEY, JOB_WORKERS=0, MEMORY_ENABLED=True,
                             MEMORY_MODEL="test/memory", MEMORY_EXTRACT_INTERVAL=2,
                             CONVERSATION_RECALL_ENABLED=True)
    second = await aiohttp_client(create_app(settings))
    resp = await second.post("/api/conversations/turn", json=turn("t-2"), headers=HEADERS)
    assert resp.status == 201
    dup = await second.post("/api/conversations/turn", json=turn("t-1"), headers=HEADERS)
    assert dup.status == 200
    assert [j["payload"]["rounds"] for j in await extraction_jobs(second)] == [2]


async def test_replace_reply_puts_the_final_reply_in_place_of_the_first(client: Any) -> None:
    """A continued turn: the same turn id with ``replace_reply`` changes only the stored reply
    (same rows, same user text); the same text again is a duplicate."""
    first = await client.post("/api/conversations/turn", json=turn(), headers=HEADERS)
    assert first.status == 201
    before = await rows(client, "SELECT id, role, content FROM conversations ORDER BY id")
    final = turn()
    final["messages"][-1]["content"] = "最终的回答：带伞。"
    final["replace_reply"] = True
    resp = await client.post("/api/conversations/turn", json=final, headers=HEADERS)
    assert resp.status == 200
    body = await resp.json()
    assert body["status"] == "replaced" and body["messages_replaced"] == 1
    after = await rows(client, "SELECT id, role, content FROM conversations ORDER BY id")
    assert [r["id"] for r in after] == [r["id"] for r in before]
    assert after[0]["content"] == before[0]["content"]
    assert after[-1]["content"] == "最终的回答：带伞。"
    again = await client.post("/api/conversations/turn", json=final, headers=HEADERS)
    assert (again.status, (await again.json())["status"]) == (200, "duplicate")
    # only the reply given: still the stored turn's reply that changes
    only_reply = {**final, "messages": [{"role": "assistant", "content": "再补一句。"}]}
    resp = await client.post("/api/conversations/turn", json=only_reply, headers=HEADERS)
    assert (await resp.json())["status"] == "replaced"
    after = await rows(client, "SELECT role, content FROM conversations ORDER BY id")
    assert [r["role"] for r in after] == ["user", "assistant"]
    assert after[-1]["content"] == "再补一句。"


async def test_replace_reply_of_an_unknown_turn_stores_it(client: Any) -> None:
    body = {**turn(), "replace_reply": True}
    resp = await client.post("/api/conversations/turn", json=body, headers=HEADERS)
    assert resp.status == 201
    assert len(await rows(client, "SELECT id FROM conversations")) == 2


async def test_replace_reply_without_a_final_reply_is_refused(client: Any) -> None:
    body = {**turn(messages=[{"role": "user", "content": "只有问题"}]), "replace_reply": True}
    resp = await client.post("/api/conversations/turn", json=body, headers=HEADERS)
    assert resp.status == 400
    assert (await resp.json())["error"]["code"] == "invalid_replace_reply"
    bad = {**turn(), "replace_reply": "yes"}
    resp = await client.post("/api/conversations/turn", json=bad, headers=HEADERS)
    assert (await resp.json())["error"]["code"] == "invalid_replace_reply"


async def test_a_turn_larger_than_one_insert_is_stored_whole_and_in_order(
        client: Any) -> None:
    """Huge turns are written in several bounded statements (each is built on the event
    loop); every message still lands, in order, in the one transaction."""
    from pawwake.db.conversations import INSERT_BATCH_CHARS

    size = INSERT_BATCH_CHARS // 2 + 1  # two messages never share a statement
    messages = [{"role": "user" if n % 2 == 0 else "assistant",
                 "content": f"第{n}段" + "长" * size} for n in range(5)]
    body = json.dumps(turn(messages=messages, extract_memories=False)).encode()
    resp = await client.post("/api/conversations/turn", data=io.BytesIO(body),
                             headers={**HEADERS, "Content-Type": "application/json"})
    assert resp.status == 201
    stored = await rows(client, "SELECT role, left(content, 4) AS head, length(content) AS n"
                                " FROM conversations ORDER BY created_at, id")
    assert [r["head"][:3] for r in stored] == [f"第{n}段" for n in range(5)]
    assert all(r["n"] == size + 3 for r in stored)


async def test_a_turn_body_over_its_limit_is_413_before_it_is_read(client: Any) -> None:
    from pawwake.routes.recall import MAX_TURN_BODY_BYTES

    messages = [{"role": "user", "content": "长" * 150_000} for _ in range(12)]
    body = json.dumps(turn(messages=messages), ensure_ascii=False).encode()
    assert len(body) > MAX_TURN_BODY_BYTES
    resp = await client.post("/api/conversations/turn", data=io.BytesIO(body),
                             headers={**HEADERS, "Content-Type": "application/json"})
    assert resp.status == 413
    assert (await resp.json())["error"]["code"] == "turn_too_large"
    assert await rows(client, "SELECT id FROM conversations") == []
