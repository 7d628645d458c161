"""Query embeddings under load: a query that would wait too long behind others is not queued
(its search runs on keywords at once), an idle lane never sheds, and the model's lanes run
below the event loop's scheduling priority."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from pawwake.llm.embeddings import Embedder, QueryEmbeddingShed, local_engine
from pawwake.llm.embeddings.local_engine import BACKGROUND_LANE_NICE, QUERY_LANE_NICE, query_lanes
from pawwake.memory.search import search_memories
from pawwake.priority_worker import CHAT, PriorityWorker
from pawwake.services import services_of
from pawwake.settings import Settings
from tests.memory_fixtures import insert_memory
from tests.test_query_batching import FakeModel, fake_batcher, held

MEMORY = "小橘是一只橘猫，最喜欢吃三文鱼罐头"


def local(**overrides: Any) -> Settings:
    return Settings.from_env({}, EMBEDDING_PROVIDER="local", **overrides)


def fake_embedder(model: FakeModel, lanes: int = 1) -> Embedder:
    """A real ``Embedder`` whose query lanes run ``model`` (deterministic, gated)."""
    embedder = Embedder(None)
    for lane in embedder.local.batcher.lanes:
        lane.close()
    embedder.local.batcher = fake_batcher(model, lanes)
    return embedder


async def test_predicted_wait_counts_queued_and_running_texts() -> None:
    model = FakeModel()
    batcher = fake_batcher(model)
    try:
        assert batcher.predicted_wait_ms() == 0.0  # nothing timed yet
        await batcher.embed("warm up")
        assert batcher.ms_per_text is not None
        per_text = batcher.ms_per_text = 100_000.0
        assert batcher.predicted_wait_ms() == 0.0  # the lane is idle
        await held(batcher, model, ["a", "b", "c"])
        assert (batcher.running, batcher.waiting) == (1, 3)
        # three texts queued, and what is left of the one running
        assert 3 * per_text < batcher.predicted_wait_ms() <= 4 * per_text
    finally:
        model.gate.set()
        batcher.lanes[0].close()


async def test_an_idle_lane_never_sheds_however_slow_the_host() -> None:
    """A free instance at a tenth of a CPU still gets its vectors, one query at a time."""
    model = FakeModel()
    model.gate.set()
    embedder = fake_embedder(model)
    settings = local(QUERY_EMBEDDING_MAX_WAIT=0.001)
    try:
        for number in range(3):
            embedder.local.batcher.ms_per_text = 10_000.0  # ten seconds a text
            timings: dict[str, float] = {}
            await embedder.embed_query(settings, f"question {number}", timings=timings)
            assert "embed_shed" not in timings and timings["embed_batch"] == 1
        assert embedder.shed == 0
    finally:
        await embedder.close()


async def test_a_free_lane_takes_the_query_while_another_is_busy() -> None:
    model = FakeModel()
    embedder = fake_embedder(model, lanes=2)
    batcher = embedder.local.batcher
    settings = local(QUERY_EMBEDDING_MAX_WAIT=0.001)
    try:
        await batcher.embed("warm up")
        batcher.ms_per_text = 10_000.0
        hold = batcher.submit("hold")  # one lane is busy for a long while
        await asyncio.sleep(0.01)
        vector, _ = await embedder.embed_query(settings, "the other lane is free")
        assert vector.shape == (16,) and embedder.shed == 0
        batcher.ms_per_text = 10_000.0
        other = batcher.submit("hold")  # now both lanes are busy: ten seconds ahead
        await asyncio.sleep(0.01)
        # one text ahead per lane: waited for whatever the budget
        vectors = asyncio.create_task(embedder.embed_query(settings, "waits for a lane"))
        await asyncio.sleep(0.01)
        assert embedder.shed == 0 and batcher.waiting == 1
        more = [batcher.submit(f"queued {n}") for n in range(4)]
        await asyncio.sleep(0.01)
        with pytest.raises(QueryEmbeddingShed):  # three texts ahead per lane
            await embedder.embed_query(settings, "no lane left")
        model.gate.set()
        await asyncio.gather(hold.future, other.future, vectors, *(r.future for r in more))
    finally:
        model.gate.set()
        await embedder.close()


async def test_a_slow_lane_takes_a_second_chat_but_not_a_third() -> None:
    """Past the budget, a query waits behind at most one text per lane: on a slow or busy
    host the second chat still gets its vector, the third searches by keywords at once."""
    model = FakeModel()
    embedder = fake_embedder(model)
    batcher = embedder.local.batcher
    settings = local(QUERY_EMBEDDING_MAX_WAIT=0.001)
    try:
        await batcher.embed("warm up")
        batcher.ms_per_text = 10_000.0  # ten seconds a text, far over the budget
        hold = batcher.submit("hold")  # the first chat's query runs
        await asyncio.sleep(0.01)
        second = asyncio.create_task(embedder.embed_query(settings, "the second chat"))
        await asyncio.sleep(0.01)
        assert embedder.shed == 0 and batcher.waiting == 1
        with pytest.raises(QueryEmbeddingShed):  # two texts ahead on the only lane
            await embedder.embed_query(settings, "the third chat")
        assert embedder.shed == 1 and batcher.waiting == 1
        model.gate.set()
        await asyncio.gather(hold.future, second)
    finally:
        model.gate.set()
        await embedder.close()


async def test_a_busy_lane_sheds_only_past_the_limit_and_leaves_nothing_behind() -> None:
    model = FakeModel()
    embedder = fake_embedder(model)
    batcher = embedder.local.batcher
    settings = local(QUERY_EMBEDDING_MAX_WAIT=45)
    try:
        await batcher.embed("warm up")
        batcher.ms_per_text = 10_000.0  # ten seconds a text
        hold = batcher.submit("hold")  # the lane is busy: up to 10 s ahead
        await asyncio.sleep(0.01)
        queued = [asyncio.create_task(embedder.embed_query(settings, f"queued {n}"))
                  for n in range(4)]
        await asyncio.sleep(0.01)
        assert batcher.waiting == 4 and embedder.shed == 0  # up to 10..40 s: under 45 s
        assert 40_000 < batcher.predicted_wait_ms() <= 50_000
        assert not any(task.done() for task in queued)
        timings: dict[str, float] = {}
        with pytest.raises(QueryEmbeddingShed, match="QUERY_EMBEDDING_MAX_WAIT"):
            await embedder.embed_query(settings, "one too many", timings=timings)
        assert timings["embed_shed"] == 1 and "embed_compute" not in timings
        assert embedder.shed == 1
        # nothing of it stayed: not queued, not pending, not cached
        assert batcher.waiting == 4 and batcher.running == 1
        assert all(key[0][1] != "one too many" for key in embedder._pending)
        assert all(key[1] != "one too many" for key in embedder._running)
        never = local(QUERY_EMBEDDING_MAX_WAIT=0)  # 0: always queue
        queued.append(asyncio.create_task(embedder.embed_query(never, "always queued")))
        await asyncio.sleep(0.01)
        assert batcher.waiting == 5 and embedder.shed == 1
        model.gate.set()
        await hold.future
        await asyncio.gather(*queued)
    finally:
        model.gate.set()
        await embedder.close()
    assert not any("one too many" in call for call in model.calls)
    assert (batcher.waiting, batcher.running) == (0, 0)
    assert all(key[1] != "one too many" for key in embedder._queries)


async def test_a_query_already_cached_or_in_flight_is_not_shed() -> None:
    model = FakeModel()
    embedder = fake_embedder(model)
    batcher = embedder.local.batcher
    settings = local(QUERY_EMBEDDING_MAX_WAIT=0.001)
    try:
        model.gate.set()
        await embedder.embed_query(settings, "asked before")
        model.gate.clear()
        batcher.ms_per_text = 100_000.0
        hold = batcher.submit("hold")
        await asyncio.sleep(0.01)
        first = asyncio.create_task(embedder.embed_query(
            local(QUERY_EMBEDDING_MAX_WAIT=0), "retried"))  # queued whatever the wait
        await asyncio.sleep(0.01)
        retry = asyncio.create_task(embedder.embed_query(settings, "retried"))  # joins
        await embedder.embed_query(settings, "asked before")  # the cache answers
        await asyncio.sleep(0.01)
        assert not retry.done() and embedder.shed == 0
        model.gate.set()
        await hold.future
        assert (await first)[0].tobytes() == (await retry)[0].tobytes()
    finally:
        model.gate.set()
        await embedder.close()


async def test_a_shed_search_returns_keyword_results_with_the_warning(
        make_client: Any) -> None:
    client = await make_client(JOB_WORKERS=0, MEMORY_ENABLED=True, EMBEDDING_PROVIDER="local",
                               QUERY_EMBEDDING_MAX_WAIT=0.05)
    app = client.server.app
    services = services_of(app)
    memory_id = await insert_memory(services.database.pool, MEMORY)
    embedder = services.embedder
    batcher = embedder.local.batcher
    settings = services.config.current()
    gate = threading.Event()
    blockers = [lane.submit(CHAT, gate.wait) for lane in batcher.lanes]
    # every lane holds a query (stuck behind the blocker) and the model is slow lately
    # (three texts ahead per lane: more than a query always waits behind)
    stuck = [batcher.submit(f"stuck {n}") for n in range(3 * len(batcher.lanes))]
    batcher.ms_per_text = 1_000_000.0
    try:
        outcome = await search_memories(services.memory_search, "小橘喜欢吃什么", settings=settings)
        assert outcome.mode == "keyword"
        assert outcome.warning is not None and "busy" in outcome.warning
        assert "QUERY_EMBEDDING_MAX_WAIT" in outcome.warning
        assert [r.id for r in outcome.results] == [memory_id]
        assert outcome.timings["embed_shed"] == 1
        # nothing of the shed query stayed in the batcher
        assert batcher.waiting + batcher.running == len(stuck)
    finally:
        for request in stuck:
            request.future.cancel()
        gate.set()
    await asyncio.gather(*(asyncio.wrap_future(b) for b in blockers))
    for _ in range(100):  # the cancelled batches hand their lanes back
        if batcher.running == 0:
            break
        await asyncio.sleep(0.01)
    outcome = await search_memories(services.memory_search, "小橘喜欢吃什么", settings=settings)
    assert outcome.mode == "hybrid" or "busy" not in (outcome.warning or "")
    assert "embed_shed" not in outcome.timings


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread niceness")
async def test_lanes_run_below_the_event_loop_priority() -> None:
    base = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    embedder = Embedder(None)
    try:
        for lane in embedder.local.batcher.lanes:
            await lane.run(CHAT, lambda: None)
            assert lane.native_id is not None and lane.native_id != threading.get_native_id()
            assert os.getpriority(os.PRIO_PROCESS, lane.native_id) == min(
                19, base + QUERY_LANE_NICE)
        await embedder.local.worker.run(CHAT, lambda: None)
        assert embedder.local.worker.native_id is not None
        assert os.getpriority(os.PRIO_PROCESS, embedder.local.worker.native_id) == min(
            19, base + BACKGROUND_LANE_NICE)
        assert BACKGROUND_LANE_NICE > QUERY_LANE_NICE > 0
        # the event loop's own thread keeps its priority
        assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == base
    finally:
        await embedder.close()
    plain = PriorityWorker("test-plain")
    try:
        await plain.run(CHAT, lambda: None)
        assert plain.native_id is not None
        assert os.getpriority(os.PRIO_PROCESS, plain.native_id) == base
    finally:
        plain.close()


@pytest.mark.parametrize(("cpu_max", "expected"), [
    ("10000 100000", 1),  # a tenth of a CPU: still one lane
    ("150000 100000", 1),
    ("200000 100000", 2),
    ("800000 100000", 4),  # at most four
])
def test_one_query_lane_per_granted_cpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        cpu_max: str, expected: int) -> None:
    monkeypatch.setattr(local_engine.os, "sched_getaffinity", lambda _pid: set(range(8)))
    path = tmp_path / "cpu.max"
    path.write_text(cpu_max + "\n")
    assert query_lanes(str(path)) == (expected, 1)
