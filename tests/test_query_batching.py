"""Query embeddings: batched model calls, the query cache, and messages not worth embedding."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import numpy as np
import pytest

from pawwake.llm import embeddings
from pawwake.llm.embeddings import Embedder, Provenance
from pawwake.llm.embeddings import embedder as embedder_module
from pawwake.llm.embeddings import local as local_model
from pawwake.llm.embeddings.local_engine import load_e5
from pawwake.llm.embeddings.query_batch import QueryBatcher
from pawwake.memory.search import search_memories
from pawwake.priority_worker import CHAT, PriorityWorker
from pawwake.services import services_of
from pawwake.settings import Settings
from pawwake.text.query import nothing_to_search
from tests.conditions import until
from tests.embedding_server import fake_vector, serve_embeddings


class FakeModel:
    """Deterministic vectors; fails on any text containing "boom"; records every call."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.gate = threading.Event()
        self.holding = threading.Event()  # the lane is inside the "hold" call

    def embed(self, texts: list[str]) -> np.ndarray:
        if texts == ["hold"]:  # keeps the lane busy until the test opens the gate
            self.holding.set()
            self.gate.wait()
        self.calls.append(list(texts))
        if any("boom" in text for text in texts):
            raise ValueError("the model rejected a text")
        return np.asarray([fake_vector(text, 16) for text in texts], dtype=np.float32)


def fake_batcher(model: FakeModel, lanes: int = 1) -> QueryBatcher:
    return QueryBatcher([PriorityWorker(f"test-lane-{n}") for n in range(lanes)],
                        lambda _lane: model, lambda m, texts: m.embed(texts))


async def held(batcher: QueryBatcher, model: FakeModel, texts: list[str]) -> list[Any]:
    """Keep the lane busy with a first query, then queue ``texts``: while it runs they gather
    into the next batch. Returns their requests; open ``model.gate`` to go on."""
    first = batcher.submit("hold")
    await until(model.holding.is_set)
    requests = [batcher.submit(text) for text in texts]
    assert batcher.waiting == len(texts) and not any(r.started for r in requests)
    return [first, *requests]


async def test_concurrent_queries_share_a_call_and_each_gets_its_own_vector() -> None:
    """The real local model: rows of a batched call equal the unbatched vectors."""
    texts = ["小橘喜欢什么", "what does my cat like to eat", "我们上周去了哪里旅行",
             "remind me about the dentist", "周末想看什么电影", "ok so what about 咖啡"]
    reference = load_e5(1)
    alone = np.vstack([embeddings.normalise_rows(reference.query([t])) for t in texts])
    lanes = [PriorityWorker("test-e5-lane")]
    batcher = QueryBatcher(lanes, lambda _lane: load_e5(1), local_model._local_queries)
    try:
        gate = threading.Event()
        blocker = lanes[0].submit(CHAT, gate.wait)
        tasks = [asyncio.create_task(batcher.embed(text)) for text in texts]
        await until(lambda: batcher.running == 1 and batcher.waiting == len(texts) - 1)
        gate.set()
        await asyncio.wrap_future(blocker)
        results = await asyncio.gather(*tasks)
        more = await asyncio.gather(*(batcher.embed(t) for t in reversed(texts)))
    finally:
        lanes[0].close()
    # the first went at once to the free lane; the rest gathered while the lane was busy
    assert [timing.batch for _v, timing in results] == [1] + [len(texts) - 1] * (len(texts) - 1)
    for row, (vector, _timing) in zip(alone, results, strict=True):
        assert np.abs(vector - row).max() <= 1e-6
    for row, (vector, _timing) in zip(alone[::-1], more, strict=True):
        assert np.abs(vector - row).max() <= 1e-6


async def test_one_failing_member_does_not_fail_the_others() -> None:
    model = FakeModel()
    batcher = fake_batcher(model)
    try:
        _first, *requests = await held(batcher, model, ["first", "boom here", "third"])
        model.gate.set()
        outcomes = await asyncio.gather(*(r.future for r in requests), return_exceptions=True)
    finally:
        batcher.lanes[0].close()
    assert model.calls[1] == ["first", "boom here", "third"]  # one call for the batch
    assert isinstance(outcomes[1], ValueError)
    for text, outcome in ((requests[0].text, outcomes[0]), (requests[2].text, outcomes[2])):
        vector, _timing = outcome
        assert np.allclose(vector, fake_vector(text, 16), atol=1e-6)


async def test_a_cancelled_request_leaves_the_batch() -> None:
    model = FakeModel()
    batcher = fake_batcher(model)
    try:
        _first, *requests = await held(batcher, model, ["keep one", "gone", "keep two"])
        requests[1].future.cancel()
        model.gate.set()
        kept = await asyncio.gather(requests[0].future, requests[2].future)
    finally:
        batcher.lanes[0].close()
    assert model.calls == [["hold"], ["keep one", "keep two"]]
    assert [timing.batch for _v, timing in kept] == [2, 2]
    assert requests[1].future.cancelled()


async def test_a_batch_every_caller_left_is_not_computed() -> None:
    model = FakeModel()
    batcher = fake_batcher(model)
    try:
        gate = threading.Event()
        blocker = batcher.lanes[0].submit(CHAT, gate.wait)
        # The lane looks free to the batcher: this request is sent at once, behind the blocker.
        request = batcher.submit("nobody waits")
        await until(blocker.running)  # the lane is busy: the batch waits behind the blocker
        request.future.cancel()
        gate.set()
        await asyncio.wrap_future(blocker)
        after = await batcher.embed("next one")
    finally:
        batcher.lanes[0].close()
    assert model.calls == [["next one"]]
    assert after[1].batch == 1


async def test_the_query_cache_is_bounded_and_kept_per_provider_and_model(
        aiohttp_server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = await serve_embeddings(aiohttp_server)
    monkeypatch.setattr(embedder_module, "QUERY_CACHE_SIZE", 3)
    import aiohttp

    async with aiohttp.ClientSession() as http:
        embedder = Embedder(http)

        def api(model: str) -> Settings:
            return Settings.from_env({}, EMBEDDING_PROVIDER="api", EMBEDDING_API_KEY="k-123",
                                     EMBEDDING_BASE_URL=fake.base_url, EMBEDDING_MODEL=model,
                                     EMBEDDING_DIM=16, QUERY_EMBEDDING_TIMEOUT=60)

        try:
            first, prov_one = await embedder.embed_query(api("model-one"), "cat food")
            again, _ = await embedder.embed_query(api("model-one"), "cat food")
            assert len(fake.requests) == 1 and np.array_equal(first, again)  # cached
            _other, prov_two = await embedder.embed_query(api("model-two"), "cat food")
            assert len(fake.requests) == 2  # another model: not the same cache entry
            # the local model's first query (loading it) may take seconds on a loaded machine
            local, prov_local = await embedder.embed_query(
                Settings.from_env({}, QUERY_EMBEDDING_TIMEOUT=60), "cat food")
            assert prov_local.provider == "local" and local.shape == (embeddings.LOCAL_DIM,)
            assert {prov_one, prov_two, prov_local} == {
                Provenance("api", "model-one", 16), Provenance("api", "model-two", 16),
                Provenance("local", embeddings.LOCAL_MODEL, embeddings.LOCAL_DIM)}
            assert len(embedder._queries) == 3
            await embedder.embed_query(api("model-one"), "dog walk")
            assert len(embedder._queries) == 3  # bounded: the least recently used went
            assert (prov_one, "cat food") not in embedder._queries
            await embedder.embed_query(api("model-one"), "cat food")
            assert len(fake.requests) == 4  # asked again after eviction
        finally:
            await embedder.close()


@pytest.mark.parametrize("text", ["嗯", "嗯嗯嗯", "ok", "OK!", "👍", "😂😂😂", "...", "？！",
                                  "哈哈哈哈", "好的～", "谢谢！", "hahaha", "  "])
def test_messages_with_nothing_to_search(text: str) -> None:
    assert nothing_to_search(text)


@pytest.mark.parametrize("text", ["猫", "小橘喜欢什么", "ok so what about my cat", "我想你了",
                                  "2024", "Kafka"])
def test_messages_with_something_to_search(text: str) -> None:
    assert not nothing_to_search(text)


async def test_trivial_messages_skip_the_embedding(make_client: Any) -> None:
    # No deadline or shedding on the way: on a loaded machine the model's first query (loading
    # it) may take seconds, and a search past its deadline would be keyword-only.
    client = await make_client(JOB_WORKERS=0, MEMORY_ENABLED=True, EMBEDDING_PROVIDER="local",
                               QUERY_EMBEDDING_TIMEOUT=60, QUERY_EMBEDDING_MAX_WAIT=0)
    app = client.server.app
    embedder = services_of(app).embedder
    settings = services_of(app).config.current()
    for text in ("嗯", "ok", "👍👍", "。。。"):
        outcome = await search_memories(services_of(app).memory_search, text, settings=settings)
        assert outcome.mode == "keyword" and outcome.warning is None
    assert not embedder._queries and not embedder.local.batcher.lanes[0].pending
    assert "embed_compute" not in outcome.timings
    outcome = await search_memories(services_of(app).memory_search, "小橘喜欢什么", settings=settings)
    assert outcome.fallback == "no_vectors", outcome.warning  # its vector came; none stored
    assert len(embedder._queries) == 1  # a real question is embedded
    assert outcome.timings["embed_compute"] > 0 and outcome.timings["embed_batch"] == 1
    assert {"tokenise", "keyword_fetch", "embed_wait", "retrieve", "scoring"} <= set(
        outcome.timings)
