"""Why a memory was not injected: the best candidates left out, each with its reason (below
the floor with its relevance and the floor, seen within the TTL, over the limit, keywords only
under load), on the try-it panel, in the conversation view and on the memory's own page; the
memory's page counts the chats that really injected it; the request log counts reminders."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import pytest
from bs4 import BeautifulSoup

from pawwake.dashboard.i18n import LANGUAGE_COOKIE
from pawwake.db.pool import cursor, fetch_all
from pawwake.priority_worker import CHAT
from pawwake.services import services_of
from tests.conditions import until
from tests.dashboard_support import PASSWORD, SECRET, login, same_origin, soup
from tests.gateway_support import chat_body, settle
from tests.memory_support import create
from tests.test_memory_injection import MEMORY_ON, add_memory, chat_in_thread

DASHBOARD = {"DASHBOARD_PASSWORD": PASSWORD, "SESSION_SECRET": SECRET}
# The query's vector always waits (a loaded host must not turn the search keyword-only).
LOCAL = {"MEMORY_ENABLED": True, "EMBEDDING_PROVIDER": "local", "JOB_WORKERS": 0,
         "MEMORY_EXTRACT_INTERVAL": 0, "QUERY_EMBEDDING_TIMEOUT": 60.0,
         "QUERY_EMBEDDING_MAX_WAIT": 0.0}
DOG = "用户的狗叫豆豆，是一只柯基"
OTHERS = ("用户住在杭州", "用户每天早上跑步五公里", "用户喜欢听爵士乐")


async def created(client: Any, *texts: str) -> list[int]:
    """Memories made through the API, their vectors in (made by the writes themselves)."""
    ids = [(await create(client, text))["id"] for text in texts]
    await until(lambda: services_of(client.server.app).tasks.pending == 0)
    return ids


async def signed_in(gateway: Any, **overrides: Any) -> Any:
    client = await gateway(persona="你是小爪。", **DASHBOARD, **overrides)
    assert (await login(client)).status == 303
    return client


async def try_it(client: Any, message: str, session: str = "try-why") -> BeautifulSoup:
    """The try-it page without script: the whole reply and the panel in one answer."""
    response = await client.post("/dashboard/try", data={"session": session,
                                                         "message": message},
                                 headers=same_origin(client))
    assert response.status == 200, await response.text()
    await settle(client)
    return soup(await response.text()).select_one("#tryit-injected")


async def records(client: Any) -> list[dict[str, Any]]:
    async with cursor(services_of(client.server.app).database.pool) as cur:
        return await fetch_all(cur, "SELECT message_id, memory_ids, record FROM turn_injections"
                                    " ORDER BY message_id")


def near_misses(record: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [entry for entry in record if entry["kind"] == "near_miss"]


def upstream_text(upstream: Any, index: int = -1) -> str:
    return str(upstream.requests[index].body["messages"])


async def page(client: Any, path: str) -> BeautifulSoup:
    response = await client.get(path)
    assert response.status == 200
    return soup(await response.text())


async def test_a_memory_below_the_floor_is_named_with_its_relevance_and_the_floor(
        gateway: Any, upstream: Any) -> None:
    """The floor raised above any relevance: the dog memory matches but is not injected, and
    every view says so with the two numbers the decision compared."""
    client = await signed_in(gateway, **LOCAL, MEMORY_INJECT_MIN_RELEVANCE=1.0)
    [dog, *_] = await created(client, DOG, *OTHERS)
    panel = await try_it(client, "我的狗豆豆是什么品种？")
    assert DOG not in upstream_text(upstream)  # really not injected
    assert panel.select("[data-memory]") == []
    assert panel.select_one("[data-floor]")["data-floor"] == "1.0"
    miss = panel.select_one(f"[data-near-miss='{dog}']")
    assert miss is not None and miss["data-reason"] == "below_floor" and DOG in miss.text
    why = miss.select_one("[data-why]").get_text()
    assert "低于注入门槛 1.000" in why

    [row] = await records(client)
    assert row["memory_ids"] == []  # a near miss is not an injection
    [entry, *_] = near_misses(row["record"])
    assert (entry["id"], entry["reason"], entry["floor"]) == (dog, "below_floor", 1.0)
    assert 0 < entry["relevance"] < 1.0
    assert f"相关度 {entry['relevance']:.3f}" in why  # the number the floor compares
    assert "text" not in entry  # texts are not stored with the record

    view = await page(client, "/dashboard/conversations/view?session=try-why")
    stored = view.select_one(f"[data-turn-injected] [data-near-miss='{dog}']")
    assert stored is not None and DOG in stored.text
    assert "低于注入门槛 1.000" in stored.select_one("[data-why]").get_text()

    detail = await page(client, f"/dashboard/memories/{dog}")
    assert detail.select_one("[data-memory-usage]")["data-memory-usage"] == "0"
    assert detail.select_one("[data-memory-missed]")["data-memory-missed"] == "1"
    assert detail.select_one("[data-missed-turn]")["data-reason"] == "below_floor"

    response = await client.post("/api/memories/search", json={"q": "我的狗豆豆是什么品种？"})
    found = await response.json()
    assert found["floor"] == 1.0 and found["fallback"] is None
    assert found["results"][0]["id"] == dog and found["results"][0]["relevance"] < 1.0

    client.session.cookie_jar.update_cookies({LANGUAGE_COOKIE: "en"})
    panel = await try_it(client, "我的狗豆豆是什么品种？", session="try-why-en")
    assert "below the floor 1.000" in panel.select_one(
        f"[data-near-miss='{dog}'] [data-why]").get_text()


async def test_memories_over_the_limit_are_named(gateway: Any, upstream: Any) -> None:
    client = await gateway(**MEMORY_ON, MAX_MEMORIES_INJECT=1)
    first = await add_memory(client, "用户的猫叫小橘")
    second = await add_memory(client, "小橘最爱吃三文鱼")
    response = await client.post("/v1/chat/completions", json=chat_body("小橘今天怎么样"))
    assert response.status == 200
    await settle(client)
    [row] = await records(client)
    [injected] = row["memory_ids"]
    left_out = {first, second} - {injected}
    assert [(m["id"], m["reason"]) for m in near_misses(row["record"])] == [
        (left_out.pop(), "over_limit")]
    search = [e for e in row["record"] if e["kind"] == "memory_search"]
    assert search == [{"kind": "memory_search", "mode": "keyword", "floor": 0.5,
                       "fallback": "vectors_off"}]


async def test_a_memory_seen_within_the_ttl_is_named(gateway: Any, upstream: Any) -> None:
    client = await gateway(CACHE_PARTITION_ENABLED=True, MEMORY_SEEN_TTL_HOURS=6, **MEMORY_ON)
    cat = await add_memory(client, "用户的猫叫小橘")
    await chat_in_thread(client, "小橘今天很乖", "thread-a")
    await chat_in_thread(client, "小橘又睡着了", "thread-a")
    assert "用户的猫叫小橘" not in upstream_text(upstream)
    first, second = await records(client)
    assert first["memory_ids"] == [cat] and near_misses(first["record"]) == []
    assert second["memory_ids"] == []
    assert [(m["id"], m["reason"]) for m in near_misses(second["record"])] == [(cat, "seen")]


async def test_a_search_shed_under_load_says_so_on_the_panel(gateway: Any,
                                                             upstream: Any) -> None:
    client = await signed_in(gateway, **{**LOCAL, "QUERY_EMBEDDING_MAX_WAIT": 0.05})
    [cat] = await created(client, "用户的猫叫小橘，最爱吃三文鱼")
    batcher = services_of(client.server.app).embedder.batcher
    gate = threading.Event()
    blockers = [lane.submit(CHAT, gate.wait) for lane in batcher.lanes]
    stuck = [batcher.submit(f"stuck {n}") for n in range(3 * len(batcher.lanes))]
    batcher.ms_per_text = 1_000_000.0  # every lane far behind: the chat's query is shed
    try:
        panel = await try_it(client, "小橘爱吃什么")
    finally:
        for request in stuck:
            request.future.cancel()
        gate.set()
    await asyncio.gather(*(asyncio.wrap_future(blocker) for blocker in blockers))
    assert panel.select_one("[data-search-fallback]")["data-search-fallback"] == "busy"
    assert "嵌入模型繁忙" in panel.select_one("[data-search-fallback]").get_text()
    assert panel.select_one(f"[data-memory='{cat}']") is not None  # found by its keywords
    [row] = await records(client)
    [search] = [e for e in row["record"] if e["kind"] == "memory_search"]
    assert (search["mode"], search["fallback"]) == ("keyword", "busy")


async def test_a_memory_page_counts_the_chats_that_injected_it(gateway: Any,
                                                               upstream: Any) -> None:
    client = await signed_in(gateway, **LOCAL)
    [dog, *_] = await created(client, DOG, *OTHERS)
    questions = ("豆豆是柯基吗", "豆豆今天乖不乖", "我的柯基豆豆多大了")
    for question in questions:
        response = await client.post("/v1/chat/completions", json=chat_body(question))
        assert response.status == 200
        await settle(client)
        assert DOG in upstream_text(upstream), question  # each chat really injected it
    detail = await page(client, f"/dashboard/memories/{dog}")
    assert detail.select_one("[data-memory-usage]")["data-memory-usage"] == "3"
    assert len(detail.select("[data-usage-turn]")) == 3
    assert all(float(badge.text) > 0 for badge in detail.select("[data-usage-turn] "
                                                               "[data-relevance]"))
    assert detail.select_one("[data-memory-missed]")["data-memory-missed"] == "0"


async def test_the_request_log_counts_reminders_with_memories(
        gateway: Any, upstream: Any, caplog: pytest.LogCaptureFixture) -> None:
    client = await gateway(**MEMORY_ON)
    await add_memory(client, "用户的猫叫小橘")
    await add_memory(client, "提醒用户给妈妈打电话", remind_in_minutes=-1)
    caplog.set_level(logging.INFO, logger="pawwake.routes.chat")
    response = await client.post("/v1/chat/completions", json=chat_body("小橘今天怎么样"))
    assert response.status == 200
    await settle(client)
    sent = upstream_text(upstream)
    assert "用户的猫叫小橘" in sent and "提醒用户给妈妈打电话" in sent
    [line] = [r.getMessage() for r in caplog.records if r.name == "pawwake.routes.chat"]
    assert " memories=2 " in line


def test_the_most_relevant_are_injected_when_more_pass_the_floor_than_the_limit() -> None:
    """Among a thousand memories, dozens of other people's birthdays pass the floor for "When
    is my birthday?" and outscore the user's own, which holds every keyword and stands out
    most: the limit keeps the most relevant, not the first by score."""
    from pawwake.memory.near_misses import OVER_LIMIT, sort_out
    from pawwake.memory.search import SearchOutcome, SearchResult

    def result(memory_id: int, score: float, relevance: float) -> SearchResult:
        return SearchResult({"id": memory_id, "content": f"memory {memory_id}"}, score, {},
                            None, relevance)

    outcome = SearchOutcome([result(1, 0.9, 0.6), result(2, 0.8, 0.55), result(3, 0.2, 0.99),
                             result(4, 0.1, 0.3)], "hybrid", [], floor=0.5)
    recall = sort_out(outcome, limit=2)
    assert [r.id for r in recall.injected] == [3, 1]
    assert (recall.near_misses[0].result.id, recall.near_misses[0].reason) == (2, OVER_LIMIT)
