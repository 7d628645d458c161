"""A client that leaves before the reply finished: what the user typed is kept, flagged
incomplete, never learned from nor replayed, and completed by the retry; each turn is
written once (its key)."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from pawwake.conversations.turn_store import store_turn
from pawwake.db.extraction import session_history, session_skeleton
from pawwake.db.pool import cursor
from pawwake.llm.sse import CapturedReply, TokenUsage
from pawwake.services import services_of
from tests.fake_upstream import FakeUpstream, Reply, text_stream
from tests.gateway_support import GatewayStarter, settle
from tests.partition_support import CLAUDE, PARTITION
from tests.turn_support import read_until, turn_rows

SESSION = {"X-Session-Id": "s-incomplete"}


def ask(text: str, history: list[dict[str, Any]] | None = None, *, model: str = "test/model-a"
        ) -> dict[str, Any]:
    return {"model": model, "stream": True,
            "messages": [*(history or []), {"role": "user", "content": text}]}


async def leave_after(client: Any, body: dict[str, Any], marker: bytes) -> None:
    response = await client.post("/v1/chat/completions", json=body, headers=SESSION)
    await read_until(response, marker)
    response.close()


async def test_leaving_mid_stream_keeps_the_user_message_and_the_partial_reply(
        gateway: GatewayStarter, upstream: FakeUpstream) -> None:
    gate = asyncio.Event()
    upstream.queue(Reply(chunks=text_stream("first part, second part", pieces=2), gate=gate,
                         gate_after=2))
    client = await gateway()
    await leave_after(client, ask("我的猫叫团子"), b"first part")
    await asyncio.wait_for(upstream.disconnected.wait(), 10)
    gate.set()
    await settle(client)
    rows = await turn_rows(client.server.app)
    assert [(r["role"], r["content"], r["metadata"]) for r in rows] == [
        ("user", "我的猫叫团子", {"incomplete": True}),
        ("assistant", "first part, ", {"incomplete": True})]
    # The retry completes the turn: the partial reply is replaced, the user message kept once.
    upstream.reply_text("好的，团子。")
    response = await client.post("/v1/chat/completions", json=ask("我的猫叫团子"),
                                 headers=SESSION)
    await response.read()
    await settle(client)
    rows = await turn_rows(client.server.app)
    assert [(r["role"], r["content"], r["metadata"]) for r in rows] == [
        ("user", "我的猫叫团子", {}),
        ("assistant", "好的，团子。", {"finish_reason": "stop"})]


async def test_leaving_before_the_first_byte_keeps_the_user_message_alone(
        gateway: GatewayStarter, upstream: FakeUpstream) -> None:
    upstream.queue(Reply(chunks=text_stream("too late"), head_delay=5))
    client = await gateway()
    async with aiohttp.ClientSession() as session:
        url = str(client.make_url("/v1/chat/completions"))
        try:
            await session.post(url, json=ask("记住：周五交报告"), headers=SESSION,
                               timeout=aiohttp.ClientTimeout(total=0.3))
        except TimeoutError:
            pass
    await settle(client)
    rows = await turn_rows(client.server.app)
    assert [(r["role"], r["content"], r["metadata"]) for r in rows] == [
        ("user", "记住：周五交报告", {"incomplete": True})]
    assert rows[0]["turn_id"]


async def test_a_new_question_after_an_incomplete_turn_keeps_both_and_learns_only_the_whole(
        gateway: GatewayStarter, upstream: FakeUpstream) -> None:
    gate = asyncio.Event()
    upstream.queue(Reply(chunks=text_stream("half of it", pieces=2), gate=gate, gate_after=2))
    client = await gateway()
    await leave_after(client, ask("问题一"), b"half")
    await asyncio.wait_for(upstream.disconnected.wait(), 10)
    gate.set()
    await settle(client)
    upstream.reply_text("答二")
    response = await client.post("/v1/chat/completions", json=ask("问题二"), headers=SESSION)
    await response.read()
    await settle(client)
    rows = await turn_rows(client.server.app)
    assert [(r["role"], r["content"], bool(r["metadata"].get("incomplete"))) for r in rows] == [
        ("user", "问题一", True), ("assistant", "half ", True),
        ("user", "问题二", False), ("assistant", "答二", False)]
    async with cursor(services_of(client.server.app).database.pool) as cur:
        assert [r["role"] for r in await session_skeleton(cur, "s-incomplete")] == [
            "user", "assistant"]
        assert [r["content"] for r in await session_history(cur, "s-incomplete")] == [
            "问题二", "答二"]


async def test_partition_mode_does_not_replay_an_incomplete_turn(
        gateway: GatewayStarter, upstream: FakeUpstream) -> None:
    gate = asyncio.Event()
    upstream.queue(Reply(chunks=text_stream("partial", pieces=2), gate=gate, gate_after=2))
    client = await gateway(**PARTITION)
    await leave_after(client, ask("一", model=CLAUDE), b"part")
    await asyncio.wait_for(upstream.disconnected.wait(), 10)
    gate.set()
    await settle(client)
    upstream.reply_text("二的回答")
    response = await client.post("/v1/chat/completions", json=ask("二", model=CLAUDE),
                                 headers=SESSION)
    await response.read()
    await settle(client)
    sent = upstream.requests[-1].body["messages"]
    texts = [str(m.get("content")) for m in sent]
    assert not any("partial" in text or text.endswith("一") for text in texts)
    assert texts[-1].endswith("二")


class _Turn:
    def __init__(self) -> None:
        self.session_id = "s-key"
        self.model = "test/model-a"
        self.turn_messages = [{"role": "user", "content": "hello"}]
        self.turn_key = "k-0001"


async def test_a_turn_offered_twice_is_written_once(gateway: GatewayStarter) -> None:
    client = await gateway()
    app = client.server.app
    reply = CapturedReply(content="hi", finish_reason="stop", done=True,
                          usage=TokenUsage(prompt=3, completion=1, total=4))
    assert await store_turn(services_of(app).turn_store, _Turn(), reply) is True
    assert await store_turn(services_of(app).turn_store, _Turn(), reply) is False
    rows = await turn_rows(app, "s-key")
    assert [(r["role"], r["turn_id"]) for r in rows] == [("user", None),
                                                         ("assistant", "k-0001")]


async def test_the_conversation_page_marks_an_incomplete_message(make_client: Any) -> None:
    from bs4 import BeautifulSoup

    from pawwake.db.pool import execute
    from tests.dashboard_support import dashboard_client, login

    client = await dashboard_client(make_client, JOB_WORKERS=0)
    assert (await login(client)).status == 303
    resp = await client.post("/api/conversations/import", json=[{"session_id": "cut", "messages": [
        {"role": "user", "content": "没说完的问题", "created_at": "2026-01-01T10:00:00Z"}]}])
    assert resp.status == 201
    async with cursor(services_of(client.server.app).database.pool) as cur:
        await execute(cur,
                      "UPDATE conversations SET metadata = '{\"incomplete\": true}'")
    html = BeautifulSoup(await (await client.get(
        "/dashboard/conversations/view", params={"session": "cut"})).text(), "html.parser")
    assert html.select_one("[data-flag='incomplete']").get_text() == "未完成"
    status = BeautifulSoup(await (await client.get("/dashboard")).text(), "html.parser")
    assert status.select_one("[data-fact='turn-spool']") is None  # nothing waiting
