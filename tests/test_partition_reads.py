"""Long threads on the per-request paths: tool turns compare against the session tail only, the
thread status counts instead of reading, and recall judges "slid out of the live zones" in the
thread's (created_at, id) order, also for imported rows whose ids do not follow their dates."""

from __future__ import annotations

import json
from typing import Any

from pawwake.db.partition_state import thread_messages
from pawwake.db.pool import cursor, execute, fetch_all, fetch_one
from pawwake.partition.layout import zone_split
from pawwake.services import services_of
from pawwake.text.rounds import group_rounds
from tests.fake_upstream import Reply, completion_body
from tests.gateway_support import GATEWAY_KEY, chat_body, settle, stored_messages
from tests.partition_support import PARTITION

AGENT = "agent-thread"
HEADERS = {"X-Session-Id": AGENT}
OLD_ROUNDS = 400  # question, tool call, tool result, answer: 1600 stored messages
LOOP_STEPS = 600  # tool steps of one user message: longer than any tail read with a limit


def call(call_id: str, name: str = "lookup") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def calling(call_id: str) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [call(call_id)]}


def result(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def reply_with_call(upstream: Any, call_id: str) -> None:
    upstream.queue(Reply(body=completion_body("", tool_calls=[call(call_id)],
                                              finish_reason="tool_calls")))


async def post(client: Any, messages: list[dict[str, Any]],
               headers: dict[str, str] | None = None) -> dict[str, Any]:
    response = await client.post("/v1/chat/completions", headers=headers or HEADERS, json={
        "model": "test/model-a", "stream": False, "messages": messages})
    assert response.status == 200, await response.text()
    body = await response.json()
    await settle(client)
    return body


async def store_agent_history(client: Any) -> list[dict[str, Any]]:
    """A long stored thread as a client holds it: OLD_ROUNDS finished tool rounds, then one
    user message followed by LOOP_STEPS tool steps (call, result, no answer yet)."""
    history: list[dict[str, Any]] = []
    for n in range(OLD_ROUNDS):
        history += [{"role": "user", "content": f"问{n}"}, calling(f"call_old_{n}"),
                    result(f"call_old_{n}", f"旧结果{n}"), {"role": "assistant",
                                                           "content": f"答{n}"}]
    history.append({"role": "user", "content": "把所有文件都检查一遍"})
    for n in range(LOOP_STEPS):
        history += [calling(f"call_loop_{n}"), result(f"call_loop_{n}", f"文件{n}正常")]
    rows = []
    for message in history:
        metadata: dict[str, Any] = {}
        if message.get("tool_calls"):
            metadata["tool_calls"] = message["tool_calls"]
        if message["role"] == "tool":
            metadata["tool_call_id"] = message["tool_call_id"]
        rows.append((message["role"], message["content"] or "", json.dumps(metadata)))
    async with cursor(services_of(client.server.app).database.pool) as cur:
        await execute(
            cur,
            "INSERT INTO conversations (session_id, role, content, metadata, created_at)"
            " SELECT %s, r.role, r.content, r.metadata::jsonb,"
            " now() - interval '1 day' + r.n * interval '1 second'"
            " FROM unnest(%s::text[], %s::text[], %s::text[]) WITH ORDINALITY"
            " AS r(role, content, metadata, n)",
            (AGENT, [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]))
    return history


async def test_a_client_resending_its_whole_tool_history_stores_only_what_is_new(
        gateway: Any, upstream: Any) -> None:
    client = await gateway()
    history = await store_agent_history(client)
    stored = len(history)
    # The loop goes on: the client sends everything it has plus the last step's result.
    reply_with_call(upstream, "call_next")
    history.append(calling("call_loop_last"))
    history.append(result("call_loop_last", "最后一个文件正常"))
    body = await post(client, history)
    assert body["choices"][0]["message"]["tool_calls"][0]["id"] == "call_next"
    # Every earlier call and result was already stored: only the new call (which the gateway
    # never saw: it was not its reply), its result and the reply are new.
    rows = await stored_messages(client, AGENT)
    assert len(rows) == stored + 3
    assert [(r["role"], r["content"]) for r in rows[-3:]] == [
        ("assistant", ""), ("tool", "最后一个文件正常"), ("assistant", "")]
    assert rows[-1]["metadata"]["tool_calls"] == [call("call_next")]

    # The next request re-sends all of that again, the stored reply included.
    upstream.reply_text("全部检查完了")
    history += [calling("call_next"), result("call_next", "没有问题")]
    await post(client, history)
    rows = await stored_messages(client, AGENT)
    assert len(rows) == stored + 5
    assert [(r["role"], r["content"]) for r in rows[-2:]] == [
        ("tool", "没有问题"), ("assistant", "全部检查完了")]

    # A retry of the same request is a re-roll: the answer is replaced, nothing repeated.
    upstream.reply_text("检查完毕，一切正常")
    await post(client, history)
    rows = await stored_messages(client, AGENT)
    assert len(rows) == stored + 5
    assert rows[-1]["content"] == "检查完毕，一切正常"
    async with cursor(services_of(client.server.app).database.pool) as cur:
        counts = await fetch_all(
            cur,
            "SELECT metadata->>'tool_call_id' AS id, count(*) AS n FROM conversations"
            " WHERE session_id = %s AND role = 'tool' GROUP BY 1 HAVING count(*) > 1", (AGENT,))
    assert counts == []


async def test_call_ids_a_provider_reuses_in_every_reply_do_not_hide_a_new_result(
        gateway: Any, upstream: Any) -> None:
    """Some providers number tool calls per reply (``call_0`` each time): an earlier
    round's ``call_0`` is not this round's."""
    client = await gateway()
    history: list[dict[str, Any]] = []
    for question, answer, answer_text in (("现在几点", "十二点", "现在十二点。"),
                                          ("今天天气怎么样", "晴", "今天晴。")):
        history.append({"role": "user", "content": question})
        reply_with_call(upstream, "call_0")
        await post(client, history)
        history += [calling("call_0"), result("call_0", answer)]
        upstream.reply_text(answer_text)
        await post(client, history)
        history.append({"role": "assistant", "content": answer_text})
    rows = await stored_messages(client, AGENT)
    assert [(r["role"], r["content"]) for r in rows] == [
        ("user", "现在几点"), ("assistant", ""), ("tool", "十二点"), ("assistant", "现在十二点。"),
        ("user", "今天天气怎么样"), ("assistant", ""), ("tool", "晴"), ("assistant", "今天晴。")]
    assert [r["metadata"].get("tool_call_id") for r in rows if r["role"] == "tool"] == [
        "call_0", "call_0"]


async def insert_rows(client: Any, thread: str, rows: list[tuple[str, str, str]],
                      **extra: Any) -> list[int]:
    """(role, content, created_at offset) rows in the given order (so ids follow this order,
    not the dates); returns their ids."""
    ids = []
    for role, content, offset in rows:
        async with cursor(services_of(client.server.app).database.pool) as cur:
            row = await fetch_one(
                cur,
                "INSERT INTO conversations (session_id, role, content, metadata, created_at,"
                " deleted_at, source) VALUES (%s, %s, %s, %s::jsonb, now() + %s::interval,"
                " CASE WHEN %s THEN now() END, 'import') RETURNING id",
                (thread, role, content, json.dumps(extra.get("metadata", {})), offset,
                 extra.get("trashed", False)))
        assert row is not None
        ids.append(row["id"])
    return ids


async def set_zone_start(client: Any, thread: str, message_id: int) -> None:
    async with cursor(services_of(client.server.app).database.pool) as cur:
        await execute(cur,
                      "INSERT INTO partition_state (thread_id, zone_start_message_id, rotations)"
                      " VALUES (%s, %s, 1) ON CONFLICT (thread_id) DO UPDATE"
                      " SET zone_start_message_id = EXCLUDED.zone_start_message_id",
                      (thread, message_id))


async def status_by_reading(client: Any, thread: str, x: int) -> tuple[int, int, int, int]:
    """The numbers as grouping every stored message gives them: what the page must show."""
    async with cursor(services_of(client.server.app).database.pool) as cur:
        state = await fetch_one(cur, "SELECT zone_start_message_id FROM partition_state"
                                     " WHERE thread_id = %s", (thread,))
        since = state["zone_start_message_id"] if state else None
        live = group_rounds(await thread_messages(cur, thread, since))
        stored = group_rounds(await thread_messages(cur, thread, None))
    zone_a, zone_b = zone_split(live, x)
    return len(stored), len(live), len(zone_a), len(zone_b)


async def status_numbers(client: Any) -> tuple[int, int, int, int]:
    response = await client.get("/api/partition/status")
    assert response.status == 200, await response.text()
    body = await response.json()
    return (body["rounds_stored"], body["rounds_live"], body["zone_a_rounds"],
            body["zone_b_rounds"])


async def test_status_counts_match_a_full_read_on_an_imported_thread(
        gateway: Any, upstream: Any) -> None:
    client = await gateway(**PARTITION)
    assert await status_numbers(client) == (0, 0, 0, 0)
    # Imported newest first: ids run against the dates.
    await insert_rows(client, "default", [("user", "问5", "-50 minutes"),
                                          ("assistant", "答5", "-49 minutes"),
                                          ("user", "问6", "-40 minutes"),
                                          ("assistant", "答6", "-39 minutes")])
    older = await insert_rows(client, "default", [
        ("assistant", "开场白", "-3 hours"),  # before any user message: no round
        ("system", "设定", "-170 minutes"),
        ("user", "问1", "-160 minutes"), ("assistant", "答1", "-159 minutes"),
        ("user", "问2", "-150 minutes"), ("assistant", "答2", "-149 minutes"),
        ("tool", "孤立的结果", "-148 minutes"),  # answers no call: dropped
        ("user", "问3", "-140 minutes"), ("assistant", "答3", "-139 minutes"),
        ("user", "问4", "-130 minutes"), ("assistant", "答4", "-129 minutes")])
    await insert_rows(client, "default", [("user", "删掉的问题", "-135 minutes")],
                      trashed=True)
    assert await status_numbers(client) == (6, 6, 2, 4) == await status_by_reading(
        client, "default", 2)
    await set_zone_start(client, "default", older[7])  # 问3: later ids (问5, 问6) are older
    assert await status_numbers(client) == (6, 4, 2, 2) == await status_by_reading(
        client, "default", 2)
    response = await client.get("/api/partition/status")
    assert (await response.json())["rounds_until_rotation"] == 0
    await set_zone_start(client, "default", older[-1] + 10_000)  # a vanished start row
    assert await status_numbers(client) == (6, 6, 2, 4) == await status_by_reading(
        client, "default", 2)


RECALL_ON = {"GATEWAY_SECRET": GATEWAY_KEY, "JOB_WORKERS": 0, "MEMORY_ENABLED": False,
             "CONVERSATION_RECALL_ENABLED": True, "CACHE_PARTITION_ENABLED": True,
             "CACHE_PARTITION_X": 2, "CACHE_SUMMARY_MODEL": "", "MAX_CONVERSATIONS_INJECT": 3,
             "CONVERSATION_SEEN_TTL_HOURS": 6, "PARTITION_SESSION_ID": "now"}


async def test_recall_of_the_current_thread_follows_dates_not_ids(
        gateway: Any, upstream: Any) -> None:
    client = await gateway(**RECALL_ON)
    # Inserted first, so their ids are the lowest, but dated after the zone start: live.
    await insert_rows(client, "now", [("user", "冰岛极光的行程定在二月", "-20 minutes"),
                                      ("assistant", "好的，二月去冰岛看极光。", "-19 minutes")])
    zone = await insert_rows(client, "now", [("user", "今天午饭吃了面条", "-60 minutes"),
                                             ("assistant", "面条不错。", "-59 minutes")])
    # Imported last (highest ids) but a year old: slid out of the zones long ago.
    await insert_rows(client, "now", [("user", "京都清水寺那天怎么安排", "-400 days"),
                                      ("assistant", "早上七点到清水寺。", "-400 days 1 minute"),
                                      ("user", "随便聊聊", "-399 days"),
                                      ("assistant", "好呀。", "-399 days 1 minute")])
    await set_zone_start(client, "now", zone[0])
    response = await client.post("/v1/chat/completions", headers={"X-Gateway-Key": GATEWAY_KEY},
                                 json=chat_body("京都清水寺和冰岛极光的计划还记得吗"))
    assert response.status == 200, await response.text()
    await response.read()
    await settle(client)
    sent = upstream.requests[-1].body["messages"]
    # The live zones are in the context as history (no rotation: two live rounds, X = 2).
    assert [m["content"] for m in sent[:-1]] == [
        "今天午饭吃了面条", "面条不错。", "冰岛极光的行程定在二月", "好的，二月去冰岛看极光。"]
    turn = sent[-1]["content"]
    block = turn[turn.index("<retrieved_conversations>"):turn.index(
        "</retrieved_conversations>")]
    assert "用户: 京都清水寺那天怎么安排" in block
    assert "冰岛" not in block and "面条" not in block  # live zone messages are not recalled
