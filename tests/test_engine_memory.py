"""The local engine's memory: one instance for every lane, and what goes back after a burst."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from pawwake.llm.embeddings import Embedder, engine_memory
from pawwake.llm.embeddings.engine_memory import (
    IdleRelease,
    mapped_at,
    release_regions,
    sparse_regions,
)
from pawwake.llm.embeddings.local_engine import load_e5, model_file
from pawwake.priority_worker import BACKGROUND
from pawwake.settings import Settings
from tests.conditions import until

TEXTS = ["小橘喜欢什么", "what does my cat like to eat", "我们上周去了哪里旅行",
         "remind me about the dentist", "周末想看什么电影", "Kyoto in autumn, 红叶",
         "保险什么时候续费", "marathon training plan", "爸妈的体检报告", "下午喝什么茶"]



def mapping_rss_kb(path: str) -> int:
    """Resident kB of this process's mappings of ``path`` (from /proc/self/smaps)."""
    target = str(Path(path).resolve())
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if "-" in fields[0] and len(fields) >= 5 and ":" in fields[3]:  # a mapping's header
            inside = len(fields) == 6 and fields[5] == target
        elif inside and fields[0] == "Rss:":
            total += int(fields[1])
    return total


def test_the_sparse_parts_of_the_model_file_are_found() -> None:
    path = model_file()
    size = Path(path).stat().st_size
    (copied_at, copied), (table_at, table) = sparse_regions(path)
    assert copied_at == 0 and 0 < copied < table_at
    assert table_at + table < size  # the layers' weights come after the vocabulary table
    assert 40 << 20 < table < 60 << 20  # 250k rows of 384 4-bit weights
    assert sparse_regions(__file__) == []  # not a model file: nothing to release


def test_released_pages_leave_the_process_and_vectors_stay_the_same() -> None:
    model = load_e5(1)
    path = model_file()
    before = np.vstack([model.query([text]) for text in TEXTS])
    grown = mapping_rss_kb(path)
    assert release_regions(path, sparse_regions(path)) > 0
    dropped = mapping_rss_kb(path)
    assert dropped <= grown - 2048  # at least the tables copied at load (2 MB)
    after = np.vstack([model.query([text]) for text in TEXTS])
    assert np.array_equal(before, after)
    assert mapped_at(path)


async def test_release_runs_once_after_a_pause_in_the_work() -> None:
    ran: list[int] = []
    idle = IdleRelease(lambda: ran.append(1), lambda release: release(), idle_seconds=0.05)
    try:
        await asyncio.sleep(0.1)
        assert ran == []  # no work, nothing to give back
        idle.touch()
        idle.touch()
        await until(lambda: ran)
        await asyncio.sleep(0.1)
        assert ran == [1]  # once per burst
        idle.touch()
        await until(lambda: len(ran) == 2)
    finally:
        idle.close()


async def test_work_during_the_pause_postpones_the_release() -> None:
    ran: list[float] = []
    loop = asyncio.get_running_loop()
    idle = IdleRelease(lambda: ran.append(loop.time()), lambda release: release(),
                       idle_seconds=0.2)
    try:
        idle.touch()
        for _ in range(5):
            await asyncio.sleep(0.1)
            idle.touch()
            last = loop.time()
            assert ran == []
        await until(lambda: ran)
        assert ran[0] >= last + 0.2 - 0.02  # a full pause after the last work
    finally:
        idle.close()


async def test_the_embedder_uses_one_engine_and_gives_memory_back_when_idle(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine_memory, "IDLE_SECONDS", 0.05)
    embedder = Embedder(None)
    # the engine loads inside the first query's wait; what is tested is memory, not deadlines
    settings = Settings.from_env({}, EMBEDDING_PROVIDER="local", QUERY_EMBEDDING_TIMEOUT=60)
    try:
        query, _ = await embedder.embed_query(settings, TEXTS[0])
        passages, _ = await embedder.embed_passages(settings, TEXTS[1:4])
        job, _ = await embedder.embed_query(settings, TEXTS[4], priority=BACKGROUND)
        assert embedder.local.engine.loads == 1
        assert embedder.local.model is embedder.local.batcher._models[0]  # the same instance
        await until(lambda: embedder.local.idle_release.releases >= 1)
        await until(lambda: not embedder.local.worker.pending)
        embedder._queries.clear()
        again, _ = await embedder.embed_query(settings, TEXTS[0])
        assert np.array_equal(query, again)
    finally:
        await embedder.close()
    reference = load_e5(1)
    assert np.abs(passages - reference.passage(TEXTS[1:4])).max() <= 1e-6
    assert np.abs(job - reference.query([TEXTS[4]])[0]).max() <= 1e-6
