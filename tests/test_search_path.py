"""The memory search's path before the reply: what runs side by side, what one round trip
brings, and which lane a job's query uses."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import numpy as np
import pytest

from pawwake.memory.embedding_jobs import request_embedding
from pawwake.memory.extraction.job import similar_memory_ids
from pawwake.memory.search import search_memories
from pawwake.priority_worker import BACKGROUND, CHAT
from pawwake.services import services_of
from pawwake.text import offload
from tests.conditions import until
from tests.memory_fixtures import insert_fixture


async def memory_app(make_client: Any) -> Any:
    client = await make_client(JOB_WORKERS=0, MEMORY_ENABLED=True, EMBEDDING_PROVIDER="local")
    app = client.server.app
    await insert_fixture(services_of(app).database.pool)
    await request_embedding(services_of(app).memory_writes)
    await services_of(app).jobs.run_until_idle()
    return app


async def test_a_short_message_is_embedded_while_its_keywords_are_cut(make_client: Any
                                                                        ) -> None:
    app = await memory_app(make_client)
    settings = services_of(app).config.current()
    embedder = services_of(app).embedder
    await search_memories(services_of(app).memory_search, "warm up the tokenizer", settings=settings)
    gate = threading.Event()
    held = offload._worker.submit(CHAT, gate.wait)  # the tokenizer thread is busy
    try:
        search = asyncio.create_task(search_memories(services_of(app).memory_search, "小橘爱吃什么", settings=settings))
        provenance = embedder.configured_provenance(settings)
        await until(lambda: (provenance, "小橘爱吃什么") in embedder._queries)
        assert not search.done()  # its vector is there, its keywords are not
    finally:
        gate.set()
        await asyncio.wrap_future(held)
    outcome = await search
    assert outcome.mode == "hybrid" and outcome.results


async def test_a_long_message_waits_for_its_keywords_before_embedding(make_client: Any
                                                                       ) -> None:
    """It is embedded as its keywords plus its tail, so the vector cannot start earlier."""
    app = await memory_app(make_client)
    settings = services_of(app).config.current()
    embedder = services_of(app).embedder
    await search_memories(services_of(app).memory_search, "warm up the tokenizer", settings=settings)
    long_text = "我家的猫小橘最近胃口不太好，" * 10 + "它平时最爱吃什么？"
    gate = threading.Event()
    held = offload._worker.submit(CHAT, gate.wait)
    try:
        search = asyncio.create_task(search_memories(services_of(app).memory_search, long_text,
                                                     settings=settings))
        await asyncio.sleep(0.2)
        assert not embedder._pending and not search.done()
    finally:
        gate.set()
        await asyncio.wrap_future(held)
    outcome = await search
    assert outcome.mode == "hybrid"
    assert not any(text == long_text for _prov, text in embedder._queries)


async def test_a_search_cancelled_while_cutting_leaves_its_vector_for_a_retry(
        make_client: Any) -> None:
    """The early embedding goes on like any query whose caller left (a retry then finds it
    cached); the cancelled search itself ends at once."""
    app = await memory_app(make_client)
    settings = services_of(app).config.current()
    embedder = services_of(app).embedder
    await search_memories(services_of(app).memory_search, "warm up the tokenizer", settings=settings)
    gate = threading.Event()
    held = offload._worker.submit(CHAT, gate.wait)
    lane_gate = threading.Event()
    lane_held = embedder.local.batcher.lanes[0].submit(CHAT, lane_gate.wait)  # the model is busy
    try:
        search = asyncio.create_task(search_memories(services_of(app).memory_search, "看牙医的日子", settings=settings))
        await until(lambda: bool(embedder._pending))
        search.cancel()
        with pytest.raises(asyncio.CancelledError):
            await search
    finally:
        gate.set()
        lane_gate.set()
        await asyncio.wrap_future(held)
        await asyncio.wrap_future(lane_held)
    await until(lambda: not embedder._pending)
    retry = await search_memories(services_of(app).memory_search, "看牙医的日子", settings=settings)
    assert retry.timings["embed_cached"] == 1


async def test_a_jobs_search_embeds_on_the_background_lane(make_client: Any) -> None:
    app = await memory_app(make_client)
    settings = services_of(app).config.current()
    embedder = services_of(app).embedder
    chat_lane = embedder.local.batcher.lanes[0]
    gate = threading.Event()
    held = chat_lane.submit(CHAT, gate.wait)  # chats are busy: a job must not need this lane
    try:
        ids = await similar_memory_ids(services_of(app).memory_search, settings, "小橘最近吃得怎么样")
        assert ids  # hybrid search ran, its vector computed on the background lane
        await search_memories(services_of(app).memory_search, "周末去哪里爬山", settings=settings, touch=False,
                              priority=BACKGROUND)
        outcome = await search_memories(services_of(app).memory_search, "周末去哪里爬山", settings=settings, touch=False)
        assert outcome.timings["embed_cached"] == 1  # a chat reuses the job's vector
        assert not held.done()
    finally:
        gate.set()
        await asyncio.wrap_future(held)
    assert not embedder.local.batcher._models  # the chat lane never loaded a model


async def test_a_chat_query_does_not_wait_behind_the_background_lane(make_client: Any
                                                                      ) -> None:
    app = await memory_app(make_client)
    settings = services_of(app).config.current()
    embedder = services_of(app).embedder
    await embedder.embed_query(settings, "load the background model", priority=BACKGROUND)
    gate = threading.Event()
    held = embedder.local.worker.submit(BACKGROUND, gate.wait)  # a long background call
    try:
        job = asyncio.create_task(embedder.embed_query(settings, "我们上次去了哪里",
                                                       priority=BACKGROUND))
        await until(lambda: bool(embedder._pending))
        vector, _ = await embedder.embed_query(settings, "我们上次去了哪里")  # same text, chat
        assert not job.done()
    finally:
        gate.set()
        await asyncio.wrap_future(held)
    job_vector, _ = await job
    assert np.abs(job_vector - vector).max() <= 1e-5


async def test_one_request_and_its_retry_embed_the_message_once(gateway: Any,
                                                                 upstream: Any) -> None:
    """Memory and conversation recall both search for the current message; its retry too."""
    from tests.gateway_support import GATEWAY_KEY, chat_body, settle

    client = await gateway(GATEWAY_SECRET=GATEWAY_KEY, JOB_WORKERS=0, MEMORY_ENABLED=True,
                           EMBEDDING_PROVIDER="local", CONVERSATION_RECALL_ENABLED=True,
                           CACHE_PARTITION_ENABLED=True, PARTITION_SESSION_ID="thread")
    app = client.server.app
    await insert_fixture(services_of(app).database.pool)
    batcher = services_of(app).embedder.local.batcher
    texts: list[str] = []
    real = batcher._embed

    def counted(model: Any, batch: list[str]) -> Any:
        texts.extend(batch)
        return real(model, batch)

    batcher._embed = counted
    for _attempt in range(2):
        response = await client.post("/v1/chat/completions", json=chat_body("小橘爱吃什么"),
                                     headers={"X-Gateway-Key": GATEWAY_KEY})
        assert response.status == 200
        await response.read()
        await settle(client)
    assert texts.count("小橘爱吃什么") == 1
    assert len(upstream.requests) == 2
