"""The backend rule: with VECTOR_BACKEND=auto a vector table is searched in process while it
holds at most VECTOR_INDEX_MAX_ROWS vectors, on pgvector above; each table by its own
count, taken once and then again at most every SIZE_SECONDS."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from pawwake.db import memory_embeddings as vectors_db
from pawwake.db.memory_questions import QUESTION_VECTORS
from pawwake.db.message_vectors import MESSAGE_VECTORS
from pawwake.db.pool import cursor
from pawwake.llm.embeddings import Provenance
from pawwake.memory.embedding_jobs import request_embedding
from pawwake.memory.search import search_memories
from pawwake.search import vector_backend
from pawwake.search.vector_backend import VectorBackend
from pawwake.services import services_of
from tests.memory_fixtures import insert_fixture, insert_memory

PROV = Provenance("api", "unit-test", 8)


async def store_rows(pool: Any, count: int) -> None:
    rng = np.random.default_rng(count)
    for number in range(count):
        content = f"memory {number} of {count}"
        memory_id = await insert_memory(pool, content)
        vector = rng.standard_normal(PROV.dim).astype(np.float32)
        async with cursor(pool) as cur:
            await vectors_db.store_vectors(cur, PROV, [
                (memory_id, vectors_db.content_sha(content), vector / np.linalg.norm(vector))])


async def test_auto_searches_a_small_table_in_process_and_a_large_one_on_pgvector(
        make_client: Any) -> None:
    client = await make_client(JOB_WORKERS=0)
    services = services_of(client.server.app)
    database = services.database
    assert database.pgvector
    await store_rows(database.pool, 5)
    default = services.config.current()
    assert default.VECTOR_BACKEND == "auto" and default.VECTOR_INDEX_MAX_ROWS == 0
    backend = VectorBackend()
    assert await backend.choose(default, database, PROV) == "pgvector"  # off by default
    settings = default.with_values({"VECTOR_INDEX_MAX_ROWS": 5000})
    assert await backend.choose(settings, database, PROV) == "numpy"
    at_five = settings.with_values({"VECTOR_INDEX_MAX_ROWS": 5})
    at_four = settings.with_values({"VECTOR_INDEX_MAX_ROWS": 4})
    assert await backend.choose(at_five, database, PROV) == "numpy"
    assert await backend.choose(at_four, database, PROV) == "pgvector"
    # Each table by its own count: no message vectors yet. The written questions stay on
    # pgvector (the in-process question path does not give its results yet).
    assert await backend.choose(at_four, database, PROV, MESSAGE_VECTORS) == "numpy"
    assert await backend.choose(settings, database, PROV, QUESTION_VECTORS) == "pgvector"
    # The two forced choices do not look at the size.
    assert await backend.choose(settings.with_values({"VECTOR_BACKEND": "pgvector"}),
                                database, PROV) == "pgvector"
    assert await backend.choose(at_four.with_values({"VECTOR_BACKEND": "numpy"}),
                                database, PROV) == "numpy"
    # An HNSW index cannot take this dimension: in process whatever the size.
    wide = Provenance("api", "unit-test", vectors_db.HNSW_MAX_DIM + 1)
    assert await backend.choose(at_four.with_values({"VECTOR_INDEX_MAX_ROWS": 0}),
                                database, wide) == "numpy"


async def test_a_table_is_counted_once_then_again_only_after_a_while(
        make_client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    client = await make_client(JOB_WORKERS=0)
    services = services_of(client.server.app)
    database = services.database
    await store_rows(database.pool, 3)
    settings = services.config.current().with_values({"VECTOR_INDEX_MAX_ROWS": 3})
    backend = VectorBackend()
    # Searches arriving together share the first count.
    chosen = await asyncio.gather(*(backend.choose(settings, database, PROV) for _ in range(5)))
    assert chosen == ["numpy"] * 5 and backend.counted == 1
    await store_rows(database.pool, 1)
    for _ in range(5):
        assert await backend.choose(settings, database, PROV) == "numpy"
    assert backend.counted == 1
    monkeypatch.setattr(vector_backend, "SIZE_SECONDS", 0.0)
    assert await backend.choose(settings, database, PROV) == "pgvector"
    assert backend.counted == 2


async def test_a_small_store_searches_in_process_with_the_same_results_and_keeps_its_index(
        make_client: Any) -> None:
    client = await make_client(JOB_WORKERS=0, EMBEDDING_PROVIDER="local", MEMORY_ENABLED=True)
    services = services_of(client.server.app)
    database = services.database
    await insert_fixture(database.pool)
    await request_embedding(services.memory_writes)
    assert await services.jobs.run_until_idle() == 1
    settings = services.config.current().with_values({"VECTOR_INDEX_MAX_ROWS": 5000})
    large = settings.with_values({"VECTOR_INDEX_MAX_ROWS": 1})
    for query in ("我家猫叫什么名字", "coffee in the morning", "看牙医"):
        small = await search_memories(services.memory_search, query, limit=10,
                                      settings=settings)
        on_pg = await search_memories(services.memory_search, query, limit=10, settings=large)
        assert (small.backend, on_pg.backend) == ("numpy", "pgvector")
        assert [r.id for r in small.results] == [r.id for r in on_pg.results], query
        for a, b in zip(small.results, on_pg.results, strict=True):
            assert a.score == pytest.approx(b.score, abs=1e-4)
    # The HNSW index is built all the same: ready when the table outgrows the bound.
    _vector, provenance = await services.embedder.embed_query(settings, "猫")
    async with cursor(database.pool) as cur:
        assert await vectors_db.hnsw_index_exists(cur, provenance)
