"""A chat never waits on background embeddings: its query goes first and has a deadline, after
which memory search runs on keywords (one 50k-character memory being embedded held a short
chat's first token for 45 s)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from pawwake.db.pool import cursor, fetch_all
from pawwake.llm.embeddings.local import LOCAL_CALL_CHARS, local_calls
from pawwake.llm.embeddings.provenance import (
    API_PASSAGE_HEAD,
    API_PASSAGE_TAIL,
    LOCAL_PASSAGE_HEAD,
    LOCAL_PASSAGE_TAIL,
    passage_text,
)
from pawwake.memory.embedding_jobs import EMBED_KIND, request_embedding
from pawwake.priority_worker import BACKGROUND, CHAT, PriorityWorker
from pawwake.services import services_of
from tests.embedding_server import FakeEmbeddings, serve_embeddings
from tests.gateway_support import GATEWAY_KEY, chat_body, settle
from tests.memory_fixtures import insert_memory

HEADERS = {"X-Gateway-Key": GATEWAY_KEY}
MEMORY = "我的猫叫小橘，它最喜欢晒太阳。"
DEADLINE_WORDS = "QUERY_EMBEDDING_TIMEOUT"


@pytest.fixture
async def fake(aiohttp_server: Any) -> FakeEmbeddings:
    return await serve_embeddings(aiohttp_server)


async def test_chat_work_goes_ahead_of_queued_background_work() -> None:
    worker = PriorityWorker("test-priority")
    gate = threading.Event()
    order: list[str] = []
    try:
        running = worker.submit(BACKGROUND, gate.wait)
        queued = [worker.submit(BACKGROUND, order.append, name) for name in ("b1", "b2")]
        chat = worker.submit(CHAT, order.append, "chat")
        gate.set()
        for future in [running, *queued, chat]:
            await asyncio.wrap_future(future)
    finally:
        worker.close()
    assert order == ["chat", "b1", "b2"]


def test_stored_texts_are_embedded_from_a_bounded_part() -> None:
    long = "头" * 10 + "中" * 50_000 + "尾" * 10
    local = passage_text(long, "local")
    assert len(local) == LOCAL_PASSAGE_HEAD + LOCAL_PASSAGE_TAIL + 1
    assert local.startswith("头" * 10) and local.endswith("尾" * 10)
    assert len(passage_text(long, "api")) == API_PASSAGE_HEAD + API_PASSAGE_TAIL + 1
    assert passage_text("短", "local") == "短"
    calls = local_calls(["a" * 1000, "b" * 20, "c" * 10, "d" * 1024])
    assert calls == [["a" * 1000, "b" * 20], ["c" * 10], ["d" * 1024]]
    assert all(sum(map(len, call)) <= LOCAL_CALL_CHARS for call in calls)
    assert local_calls(["", "x"]) == [["", "x"]]


async def chat_reaches_upstream(client: Any, upstream: Any, text: str) -> str:
    """Send a streaming chat and return the system text the upstream received."""
    async with asyncio.timeout(60):  # generous: without a deadline this waited for minutes
        resp = await client.post("/v1/chat/completions", headers=HEADERS,
                                 json=chat_body(text, stream=True))
        assert resp.status == 200
        await resp.read()
    sent = upstream.requests[-1].body["messages"]
    return "\n".join(m["content"] for m in sent if m["role"] == "system")


async def local_gateway(gateway: Any) -> Any:
    client = await gateway(MEMORY_ENABLED=True, MEMORY_EXTRACT_INTERVAL=0, JOB_WORKERS=0,
                           EMBEDDING_PROVIDER="local", QUERY_EMBEDDING_TIMEOUT=0.5,
                           GATEWAY_SECRET=GATEWAY_KEY)
    resp = await client.post("/api/memories", json={"content": MEMORY}, headers=HEADERS)
    assert resp.status == 201
    return client


async def search(client: Any, query: str) -> dict[str, Any]:
    resp = await client.get("/api/memories/search", params={"q": query}, headers=HEADERS)
    assert resp.status == 200
    return await resp.json()


async def test_chat_during_a_long_local_embedding_is_not_held(gateway: Any,
                                                              upstream: Any) -> None:
    client = await local_gateway(gateway)
    embedder = services_of(client.server.app).embedder
    # the model loaded first: a cold load from disk alone can outlast the 0.5 s deadline
    await embedder.local.query(embedder.local.submit_query("预热"))
    gate = threading.Event()
    busy = embedder.local.worker.submit(BACKGROUND, gate.wait)  # a long embedding holds the model
    try:
        system = await chat_reaches_upstream(client, upstream, "小橘今天乖不乖？")
        assert "小橘" in system
        body = await search(client, "小橘喜欢什么")
        assert [r["content"] for r in body["results"]] == [MEMORY]
        assert DEADLINE_WORDS not in (body["warning"] or "")  # its query did not wait
    finally:
        gate.set()
    await asyncio.wrap_future(busy)


async def test_a_late_query_vector_makes_the_search_keyword_only(
        gateway: Any, upstream: Any, caplog: pytest.LogCaptureFixture) -> None:
    client = await local_gateway(gateway)
    embedder = services_of(client.server.app).embedder
    await embedder.local.query(embedder.local.submit_query("预热"))  # loaded, as above
    gate = threading.Event()
    busy = embedder.local.batcher.lanes[0].submit(CHAT, gate.wait)  # the query lane is stuck
    try:
        system = await chat_reaches_upstream(client, upstream, "小橘今天乖不乖？")
        assert "小橘" in system  # memory search ran, by keywords
        body = await search(client, "小橘喜欢什么")
        assert body["mode"] == "keyword" and DEADLINE_WORDS in body["warning"]
        assert [r["content"] for r in body["results"]] == [MEMORY]
    finally:
        gate.set()
    await asyncio.wrap_future(busy)
    assert any("deadline" in r.getMessage() and r.levelname == "WARNING"
               for r in caplog.records)
    await settle(client)
    body = await search(client, "小橘喜欢什么")  # the lane is free again: no deadline missed
    assert DEADLINE_WORDS not in (body["warning"] or "")


async def test_chat_during_a_slow_api_embedding_backfill(
        gateway: Any, upstream: Any, fake: FakeEmbeddings) -> None:
    client = await gateway(MEMORY_ENABLED=True, MEMORY_EXTRACT_INTERVAL=0, JOB_WORKERS=0,
                           EMBEDDING_PROVIDER="api", EMBEDDING_API_KEY="sk-embed-0123456789",
                           EMBEDDING_BASE_URL=fake.base_url, EMBEDDING_MODEL="fake-embed-1",
                           EMBEDDING_DIM=32, QUERY_EMBEDDING_TIMEOUT=0.2,
                           GATEWAY_SECRET=GATEWAY_KEY)
    huge = MEMORY + "毛" * 19_000  # long, yet within the memory content limit
    services = services_of(client.server.app)
    for content in (MEMORY, huge):  # rows from before vectors were on: the backfill's work
        await insert_memory(services.database.pool, content)
    await request_embedding(services)
    fake.delay = 1.0  # every answer is slow, the backfill's and the chat's
    jobs = services.jobs
    backfill = asyncio.create_task(jobs.run_until_idle())
    try:
        system = await chat_reaches_upstream(client, upstream, "小橘今天乖不乖？")
        assert "小橘" in system
    finally:
        ran = await backfill
    assert ran >= 1
    assert max(len(text) for text in fake.inputs) <= API_PASSAGE_HEAD + API_PASSAGE_TAIL + 1
    kinds = {r["kind"] for r in await _jobs(client)}
    assert EMBED_KIND in kinds
    await settle(client)
    fake.delay = 0.0
    resp = await client.get("/api/memories/search", params={"q": "小橘今天乖不乖？"},
                            headers=HEADERS)
    body = await resp.json()
    assert body["mode"] == "hybrid", body["warning"]
    # The chat's late vector was kept: the same query was sent to the provider once.
    assert [r["input"] for r in fake.requests].count(["小橘今天乖不乖？"]) == 1


async def _jobs(client: Any) -> list[dict[str, Any]]:
    async with cursor(services_of(client.server.app).database.pool) as cur:
        return await fetch_all(cur,
                               "SELECT kind, status FROM jobs ORDER BY id")
