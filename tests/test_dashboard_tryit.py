"""The try-it page and the injected record: a chat sent from the dashboard goes through the
gateway's own pipeline and streams back with what was injected; every stored reply keeps its
record, shown in the conversation view and on the memory's own page."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from bs4 import BeautifulSoup

from pawwake.app_faces import database_of
from pawwake.conversations import manage as service
from pawwake.db.pool import cursor, fetch_all
from pawwake.services import services_of
from tests.dashboard_support import PASSWORD, SECRET, login, same_origin
from tests.fake_upstream import Reply, text_stream
from tests.gateway_support import chat_body, settle, stored_messages
from tests.partition_support import PARTITION, say
from tests.test_memory_injection import MEMORY_ON, add_memory
from tests.turn_support import read_until, turn_rows

DASHBOARD = {"DASHBOARD_PASSWORD": PASSWORD, "SESSION_SECRET": SECRET}


def events_of(data: bytes) -> list[tuple[str, Any]]:
    found = []
    for block in data.decode().split("\n\n"):
        name, payload = "message", ""
        for line in block.splitlines():
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                payload += line[5:].strip()
        if payload:
            found.append((name, json.loads(payload)))
    return found


async def started(gateway: Any, **overrides: Any) -> Any:
    client = await gateway(persona="你是小爪。", **DASHBOARD, **MEMORY_ON, **overrides)
    assert (await login(client)).status == 303
    return client


async def injections(client: Any) -> list[dict[str, Any]]:
    async with cursor(services_of(client.server.app).database.pool) as cur:
        return await fetch_all(cur,
                               "SELECT t.message_id, c.session_id, t.memory_ids, t.record"
                               " FROM turn_injections t JOIN conversations c"
                               " ON c.id = t.message_id ORDER BY t.message_id")


async def test_try_it_streams_the_reply_and_what_was_injected(gateway: Any, upstream: Any
                                                             ) -> None:
    client = await started(gateway)
    memory = await add_memory(client, "用户的猫叫小橘", event_date="2026-02-17")
    upstream.reply_text("小橘可能是换季了。", pieces=4)
    response = await client.post(
        "/dashboard/try", data={"session": "try-1", "model": "test/model-b",
                                "message": "小橘最近胃口不好怎么办"},
        headers=same_origin(client, Accept="text/event-stream"))
    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/event-stream")
    events = events_of(await response.read())
    names = [name for name, _ in events]
    assert names[0] == "injected" and names[-1] == "done"
    panel = BeautifulSoup(events[0][1]["html"], "html.parser")
    item = panel.select_one(f"[data-memory='{memory}']")
    assert item is not None and "用户的猫叫小橘" in item.text
    assert float(item.select_one("[data-relevance]").text) > 0  # what the floor compares
    assert panel.select_one("[data-injection-kind=persona]") is not None
    assert "".join(data["text"] for name, data in events if name == "delta") == "小橘可能是换季了。"
    assert events[-1][1]["text"] == "小橘可能是换季了。"

    # The request went through the gateway's pipeline: the chosen model, the memory, our key.
    sent = upstream.requests[-1]
    assert sent.body["model"] == "test/model-b"
    assert "用户的猫叫小橘" in sent.body["messages"][0]["content"]
    assert sent.headers["Authorization"] == "Bearer sk-upstream-test-key-0123456789"

    # ... and the turn was stored with its record like any other chat.
    await settle(client)
    assert [m["content"] for m in await stored_messages(client, "try-1")] == [
        "小橘最近胃口不好怎么办", "小橘可能是换季了。"]
    [row] = await injections(client)
    assert row["memory_ids"] == [memory]
    kinds = [entry["kind"] for entry in row["record"]]
    assert kinds == ["persona", "memory_search", "memory"]
    assert all("text" not in entry for entry in row["record"])


async def test_try_it_without_script_renders_the_reply(gateway: Any, upstream: Any) -> None:
    client = await started(gateway)
    memory = await add_memory(client, "用户的猫叫小橘")
    upstream.reply_text("好的。")
    response = await client.post("/dashboard/try",
                                 data={"session": "try-2", "message": "小橘今天怎么样"},
                                 headers=same_origin(client))
    assert response.status == 200
    page = BeautifulSoup(await response.text(), "html.parser")
    assert page.select_one("[data-tryit-reply=done]").text.strip().endswith("好的。")
    assert page.select_one(f"#tryit-injected [data-memory='{memory}']") is not None


async def test_try_it_refusals_and_upstream_errors(gateway: Any, upstream: Any) -> None:
    client = await started(gateway)
    response = await client.post("/dashboard/try", data={"message": "  "},
                                 headers=same_origin(client, Accept="text/event-stream"))
    assert response.status == 400
    assert events_of(await response.read())[0][0] == "failed"

    upstream.reply_error(429, "slow down, key sk-upstream-test-key-0123456789")
    response = await client.post("/dashboard/try", data={"message": "你好"},
                                 headers=same_origin(client, Accept="text/event-stream"))
    events = events_of(await response.read())
    assert events[-1][0] == "failed"
    assert "429" in events[-1][1]["message"]
    assert "sk-upstream-test-key" not in events[-1][1]["message"]

    # A cross-site post is refused before anything is sent upstream.
    before = len(upstream.requests)
    response = await client.post("/dashboard/try", data={"message": "你好"},
                                 headers={"Origin": "https://evil.example"})
    assert response.status == 403
    assert len(upstream.requests) == before


async def test_a_chat_keeps_its_injected_record_for_the_conversation_and_the_memory(
        gateway: Any, upstream: Any) -> None:
    client = await started(gateway)
    memory = await add_memory(client, "用户的猫叫小橘")
    response = await client.post("/v1/chat/completions", json=chat_body("小橘最近胃口不好怎么办"),
                                 headers={"X-Session-Id": "chat-1"})
    assert response.status == 200
    await response.read()
    await settle(client)
    [row] = await injections(client)
    [reply] = [m for m in await stored_messages(client, "chat-1") if m["role"] == "assistant"]
    assert row["message_id"] == reply["id"]
    [entry] = [e for e in row["record"] if e["kind"] == "memory"]
    assert entry["id"] == memory and 0 < entry["score"] <= 1

    page = BeautifulSoup(await (await client.get("/dashboard/conversations/view?session=chat-1")
                                ).text(), "html.parser")
    block = page.select_one(f"#m{reply['id']} [data-turn-injected]")
    assert block is not None
    link = block.select_one(f"[data-injected-memory='{memory}'] a")
    assert link["href"] == f"/dashboard/memories/{memory}"
    assert "用户的猫叫小橘" in block.text

    page = BeautifulSoup(await (await client.get(f"/dashboard/memories/{memory}")).text(),
                         "html.parser")
    assert page.select_one("[data-memory-usage]")["data-memory-usage"] == "1"
    turn = page.select_one(f"[data-usage-turn='{reply['id']}'] a")
    assert turn["href"] == f"/dashboard/conversations/view?session=chat-1#m{reply['id']}"
    assert (await client.get("/dashboard/memories/999999")).status == 404


async def test_try_it_in_partition_mode_shows_the_layout_and_its_breakpoints(
        gateway: Any, upstream: Any) -> None:
    client = await gateway(persona="你是小爪。", **DASHBOARD, **PARTITION)
    assert (await login(client)).status == 303
    for n in range(1, 4):
        await say(client, upstream, f"问{n}", f"答{n}")
    upstream.reply_text("答4")
    response = await client.post(
        "/dashboard/try", data={"message": "问4"},
        headers=same_origin(client, Accept="text/event-stream"))
    events = events_of(await response.read())
    assert events[-1] == ("done", {"text": "答4"})
    panel = BeautifulSoup(events[0][1]["html"], "html.parser")
    layout = panel.select_one("[data-injection-kind=partition]")
    assert "default" in layout.get_text()
    assert layout.select_one("[data-zones]").get_text(strip=True) == "A 区 2 轮，B 区 1 轮"
    # Persona, end of zone A, end of zone B: three breakpoints, as sent upstream.
    sent = upstream.requests[-1].body["messages"]
    marked = sum(1 for m in sent if isinstance(m["content"], list)
                 for part in m["content"] if "cache_control" in part)
    assert marked == 3
    assert layout.select_one("[data-breakpoints]")["data-breakpoints"] == "3"

    await settle(client)
    row = (await injections(client))[-1]
    assert row["session_id"] == "default"
    [partition] = [e for e in row["record"] if e["kind"] == "partition"]
    assert (partition["zone_a_rounds"], partition["zone_b_rounds"]) == (2, 1)


async def test_the_record_follows_a_reply_into_a_merged_session(gateway: Any,
                                                               upstream: Any) -> None:
    client = await started(gateway)
    memory = await add_memory(client, "用户的猫叫小橘")
    for session in ("left", "right"):
        response = await client.post("/v1/chat/completions",
                                     json=chat_body("小橘最近胃口不好怎么办"),
                                     headers={"X-Session-Id": session})
        await response.read()
    await settle(client)
    await service.merge_sessions(database_of(client.server.app), ["left"], "right")
    page = BeautifulSoup(await (await client.get("/dashboard/conversations/view?session=right")
                                ).text(), "html.parser")
    assert len(page.select(f"[data-injected-memory='{memory}']")) == 2
    memory_page = BeautifulSoup(await (await client.get(f"/dashboard/memories/{memory}")
                                       ).text(), "html.parser")
    assert memory_page.select_one("[data-memory-usage]")["data-memory-usage"] == "2"
    assert all("session=right" in a["href"] for a in memory_page.select("[data-usage-turn] a"))


async def test_leaving_the_page_mid_reply_keeps_the_turn_incomplete_and_frees_reminders(
        gateway: Any, upstream: Any) -> None:
    client = await started(gateway)
    reminder = await add_memory(client, "提醒用户给小橘买猫粮", remind_in_minutes=-1)
    gate = asyncio.Event()
    upstream.queue(Reply(chunks=text_stream("first part, second part", pieces=2), gate=gate,
                         gate_after=2))
    response = await client.post(
        "/dashboard/try", data={"session": "try-left", "message": "小橘今天吃什么"},
        headers=same_origin(client, Accept="text/event-stream"))
    seen = await read_until(response, b"first part")
    assert b"event: injected" in seen and f"data-reminder=\\\"{reminder}\\\"".encode() in seen
    response.close()
    await asyncio.wait_for(upstream.disconnected.wait(), 10)
    gate.set()
    await settle(client)
    rows = await turn_rows(client.server.app, "try-left")
    assert [(r["role"], r["metadata"].get("incomplete")) for r in rows] == [
        ("user", True), ("assistant", True)]
    # The reminder was not delivered: its claim is released for the next chat.
    async with cursor(services_of(client.server.app).database.pool) as cur:
        [claim] = await fetch_all(cur,
                                  "SELECT reminder_delivered_at, reminder_claim_token"
                                  " FROM memories WHERE id = %s", (reminder,))
    assert claim["reminder_delivered_at"] is None and claim["reminder_claim_token"] is None
