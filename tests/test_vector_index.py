"""The numpy vector index: loaded once, updated incrementally, same answers as pgvector."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from pawwake.db import memory_embeddings as vectors_db
from pawwake.db.pool import cursor, execute
from pawwake.llm.embeddings import Provenance
from pawwake.memory.embedding_jobs import request_embedding
from pawwake.memory.search import search_memories
from pawwake.search.vector_index import VectorIndex
from pawwake.search.vector_matrix import Matrix, in_plane, top_k, top_k_pair
from pawwake.services import services_of
from tests.memory_fixtures import insert_fixture, insert_memory

PROV = Provenance("api", "unit-test", 8)


def unit(seed: int, dim: int = 8) -> np.ndarray:
    vector = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return vector / np.linalg.norm(vector)


def test_top_k_orders_by_cosine_and_skips_dead_and_excluded_rows() -> None:
    matrix = Matrix(8)
    for memory_id in range(1, 21):
        matrix.append(memory_id, f"sha{memory_id}", unit(memory_id))
    query = unit(5)
    vectors, ids = matrix.snapshot()
    found = top_k(vectors, ids, query, 3)
    assert found[0] == (5, pytest.approx(1.0, abs=1e-5))
    scores = [s for _, s in found]
    assert scores == sorted(scores, reverse=True)
    expected = sorted(range(1, 21), key=lambda i: -float(unit(i) @ query))[:3]
    assert [i for i, _ in found] == expected
    matrix.remove([5])
    assert 5 not in [i for i, _ in top_k(*matrix.snapshot(), query, 3)]
    assert expected[1] not in [i for i, _ in top_k(*matrix.snapshot(), query, 3,
                                                   frozenset({expected[1]}))]
    assert len(top_k(*matrix.snapshot(), query, 100)) == 19


def test_rows_are_never_rewritten_under_a_snapshot() -> None:
    matrix = Matrix(8, capacity=4)
    for memory_id in range(1, 4):
        matrix.append(memory_id, "a", unit(memory_id))
    vectors, _ids = matrix.snapshot()
    before = vectors.copy()
    matrix.append(2, "b", unit(99))  # new content for memory 2: appended, old row marked dead
    for memory_id in range(10, 30):  # growth reallocates instead of writing in place
        matrix.append(memory_id, "a", unit(memory_id))
    assert np.array_equal(vectors, before)
    assert matrix.live == 23
    assert top_k(*matrix.snapshot(), unit(99), 1)[0][0] == 2
    matrix.append(2, "b", unit(99))  # same digest: nothing to do
    assert matrix.live == 23 and matrix.size == 24


def test_compaction_after_many_deletions_keeps_the_live_rows() -> None:
    matrix = Matrix(8)
    for memory_id in range(1, 3001):
        matrix.append(memory_id, "a", unit(memory_id))
    matrix.remove(range(1, 2001))
    assert matrix.size == 1000 and matrix.dead == 0  # compacted
    assert top_k(*matrix.snapshot(), unit(2500), 1)[0][0] == 2500
    assert set(matrix.rows) == set(range(2001, 3001))


def shifted(query: np.ndarray, direction: np.ndarray, strength: float = 1.5) -> np.ndarray:
    """The query with its share along ``direction`` taken out (as ``Reference.across``)."""
    moved = query - strength * float(query @ direction) * direction
    return (moved / np.linalg.norm(moved)).astype(np.float32)


def test_a_full_matrix_with_many_dead_rows_is_compacted_not_grown() -> None:
    """A bounded index lets its oldest rows go as new ones come: the arrays stay near the
    bound instead of growing by half each time they fill."""
    matrix = Matrix(8, capacity=1024)
    for i in range(1024):
        matrix.append(i, f"{i:064x}", unit(i))
    matrix.remove(range(200))  # an eighth and more let go: below the compaction of remove()
    assert len(matrix.ids) == 1024 and matrix.dead == 200
    for i in range(1024, 1224):
        matrix.append(i, f"{i:064x}", unit(i))
    assert len(matrix.ids) == 1030 and matrix.live == 1024 and matrix.compactions == 1
    vectors, ids = matrix.snapshot()
    assert sorted(ids.tolist()) == list(range(200, 1224))
    assert top_k(vectors, ids, unit(1100), 1)[0][0] == 1100


def test_a_look_from_the_shifted_query_needs_no_second_product() -> None:
    """Each row's product with the fixed direction is kept through appends, replacements,
    growth and compaction; the shifted query's nearest are those a scan of it finds."""
    matrix = Matrix(8, capacity=4)
    direction = unit(1000)
    for memory_id in range(1, 40):
        matrix.append(memory_id, "a", unit(memory_id))
    assert matrix.aim(direction, matrix.snapshot()[0] @ direction, matrix.compactions)
    assert not matrix.aim(direction, np.zeros(99, dtype=np.float32), matrix.compactions)
    for memory_id in range(40, 1600):  # grows after aiming
        matrix.append(memory_id, "a", unit(memory_id))
    matrix.append(7, "b", unit(2000))  # replaced: a new row
    matrix.remove(range(100, 1200))  # compacted
    assert matrix.dead == 0 and matrix.compactions == 1
    vectors, ids = matrix.snapshot()
    assert np.allclose(matrix.along[: len(ids)], vectors @ direction, atol=1e-6)
    for seed in (5, 7, 2000, 1500, 3):
        query = unit(seed)
        other = shifted(query, direction)
        mix = in_plane(query, direction, other)
        assert mix is not None
        near, near_other = top_k_pair(vectors, ids, matrix.along[: len(ids)], query, 10,
                                      mix, 20, frozenset({3}))
        assert near == top_k(vectors, ids, query, 10, frozenset({3}))
        expected = top_k(vectors, ids, other, 20, frozenset({3}))
        assert [i for i, _ in near_other] == [i for i, _ in expected]
        assert [c for _, c in near_other] == pytest.approx([c for _, c in expected], abs=1e-5)
    assert in_plane(unit(1), direction, unit(2)) is None  # not in their plane
    assert in_plane(direction, direction, unit(2)) is None  # no plane


async def store_rows(pool: Any, count: int, offset: int = 0) -> list[int]:
    ids = []
    for number in range(count):
        content = f"memory {offset + number}"
        memory_id = await insert_memory(pool, content)
        async with cursor(pool) as cur:
            await vectors_db.store_vectors(cur, PROV, [(memory_id, vectors_db.content_sha(content),
                                                         unit(offset + number))])
        ids.append(memory_id)
    return ids


async def test_loaded_once_then_updated_incrementally(make_client: Any) -> None:
    client = await make_client(JOB_WORKERS=0)
    pool = services_of(client.server.app).database.pool
    ids = await store_rows(pool, 30)
    index = VectorIndex(refresh_seconds=0.0, reconcile_seconds=0.0)
    assert (await index.search(pool, PROV, unit(3), 1))[0][0] == ids[3]
    assert index.loads == 1 and index.fetched == 30

    # Written by another process: found by the cheap check, and only that vector is fetched.
    new_ids = await store_rows(pool, 1, offset=100)
    assert (await index.search(pool, PROV, unit(100), 1))[0][0] == new_ids[0]
    assert index.loads == 1 and index.fetched == 31

    # Content changed elsewhere: the vector is replaced, not duplicated.
    async with cursor(pool) as cur:
        await execute(cur, "UPDATE memories SET content = 'memory changed' WHERE id = %s",
                      (ids[0],))
        await vectors_db.store_vectors(cur, PROV, [(ids[0], vectors_db.content_sha("memory changed"),
                                                     unit(555))])
    assert (await index.search(pool, PROV, unit(555), 1))[0][0] == ids[0]
    assert (await index.search(pool, PROV, unit(0), 1))[0][0] != ids[0]
    assert index.size == 31 and index.fetched == 32

    # Deleted elsewhere: gone after the next check.
    async with cursor(pool) as cur:
        await execute(cur, "DELETE FROM memories WHERE id = %s", (ids[5],))
    assert ids[5] not in [i for i, _ in await index.search(pool, PROV, unit(5), 31)]
    assert index.size == 30 and index.loads == 1

    # Stored by this process: added directly, never read back.
    own = await insert_memory(pool, "memory own")
    row = (own, vectors_db.content_sha("memory own"), unit(777))
    async with cursor(pool) as cur:
        await vectors_db.store_vectors(cur, PROV, [row])
    index.add(PROV, [row])
    assert (await index.search(pool, PROV, unit(777), 1))[0][0] == own
    assert index.size == 31 and index.fetched == 32 and index.loads == 1


async def test_a_bounded_index_holds_only_the_newest_rows(make_client: Any) -> None:
    """``most``: the newest rows by id are loaded, later ones added, the oldest let go at the
    reconcile, and an older one comes back when a newer one is deleted."""
    client = await make_client(JOB_WORKERS=0)
    pool = services_of(client.server.app).database.pool
    ids = await store_rows(pool, 30)
    index = VectorIndex(refresh_seconds=0.0, reconcile_seconds=0.0, most=10)

    async def held() -> list[int]:
        return sorted(i for i, _ in await index.search(pool, PROV, unit(0), 100))

    assert await held() == ids[20:]
    assert index.loads == 1 and index.fetched == 10
    new = await store_rows(pool, 2, offset=100)  # written elsewhere
    assert await held() == ids[22:] + new
    own = await insert_memory(pool, "memory own")  # stored by this process
    row = (own, vectors_db.content_sha("memory own"), unit(777))
    async with cursor(pool) as cur:
        await vectors_db.store_vectors(cur, PROV, [row])
    index.add(PROV, [row])
    assert await held() == [*ids[23:], *new, own]
    old = (ids[0], vectors_db.content_sha("memory 0"), unit(0))
    index.add(PROV, [old])  # below the held rows: not taken
    assert ids[0] not in await held()
    async with cursor(pool) as cur:
        await execute(cur, "DELETE FROM memories WHERE id = %s", (ids[25],))
    assert await held() == [ids[22], *ids[23:25], *ids[26:], *new, own]
    assert index.size == 10 and index.loads == 1
    index.most = 0
    assert await held() == [] and index.loads == 2
    index.most = None
    assert len(await held()) == 32 and index.loads == 3


async def test_a_vector_stored_while_the_index_loads_is_kept(make_client: Any) -> None:
    """The load may have read past a row before this process stored its vector: the vector
    is kept for the loaded arrays instead of waiting for the next refresh."""
    client = await make_client(JOB_WORKERS=0)
    pool = services_of(client.server.app).database.pool
    await store_rows(pool, 5)
    index = VectorIndex(refresh_seconds=3600.0, reconcile_seconds=3600.0)
    loading = asyncio.create_task(index.warm(pool, PROV))
    await asyncio.sleep(0)  # the load has started and waits for its first statement
    assert index.size == 0
    own = await insert_memory(pool, "memory stored during the load")
    row = (own, vectors_db.content_sha("memory stored during the load"), unit(888))
    index.add(PROV, [row])  # its vector, not yet in the table the load reads
    await loading
    assert (await index.search(pool, PROV, unit(888), 1))[0][0] == own
    assert index.size == 6 and index.loads == 1


async def test_a_pair_of_searches_costs_one_scan(make_client: Any) -> None:
    client = await make_client(JOB_WORKERS=0)
    pool = services_of(client.server.app).database.pool
    ids = await store_rows(pool, 30)
    index = VectorIndex(refresh_seconds=3600.0, reconcile_seconds=3600.0)
    direction = unit(1000)
    query = unit(4)
    near, near_other = await index.search_pair(pool, PROV, query, 5, shifted(query, direction),
                                               8, direction, exclude=[ids[4]])
    assert index.scans == 2  # the first one also multiplies the rows with the direction
    assert near == await index.search(pool, PROV, query, 5, [ids[4]])
    expected = await index.search(pool, PROV, shifted(query, direction), 8, [ids[4]])
    assert [i for i, _ in near_other] == [i for i, _ in expected]
    assert [c for _, c in near_other] == pytest.approx([c for _, c in expected], abs=1e-5)
    own = await insert_memory(pool, "memory own")
    index.add(PROV, [(own, vectors_db.content_sha("memory own"), unit(777))])
    scans = index.scans
    near, near_other = await index.search_pair(pool, PROV, unit(777), 1,
                                               shifted(unit(777), direction), 3, direction)
    assert near[0][0] == own and index.scans == scans + 1
    expected = await index.search(pool, PROV, shifted(unit(777), direction), 3)
    assert [i for i, _ in near_other] == [i for i, _ in expected]  # the kept products and a
    # fresh one differ in the last float bits (BLAS sums in its own order)
    assert [c for _, c in near_other] == pytest.approx([c for _, c in expected], abs=1e-5)
    scans = index.scans
    _, near_other = await index.search_pair(pool, PROV, unit(777), 5, unit(3), 1, direction)
    assert near_other[0][0] == ids[3] and index.scans == scans + 2  # not in the plane: two


async def test_a_chinese_query_scans_the_numpy_index_once(make_client: Any) -> None:
    client = await make_client(JOB_WORKERS=0, EMBEDDING_PROVIDER="local",
                               VECTOR_BACKEND="numpy")
    app = client.server.app
    await insert_fixture(services_of(app).database.pool)
    await request_embedding(services_of(app).memory_writes)
    await services_of(app).jobs.run_until_idle()
    index = services_of(app).vectors.index
    settings = services_of(app).config.current()
    await search_memories(services_of(app).memory_search, "小橘爱吃什么", limit=10,
                          settings=settings)
    scans = index.scans
    outcome = await search_memories(services_of(app).memory_search, "看牙医", limit=10,
                                    settings=settings)
    assert outcome.backend == "numpy" and outcome.mode == "hybrid"
    assert index.scans == scans + 1


async def test_a_quiet_table_costs_no_vector_reads(make_client: Any) -> None:
    client = await make_client(JOB_WORKERS=0)
    pool = services_of(client.server.app).database.pool
    await store_rows(pool, 10)
    index = VectorIndex(refresh_seconds=0.0, reconcile_seconds=0.0)
    for seed in range(20):
        await index.search(pool, PROV, unit(seed), 3)
    assert index.loads == 1 and index.fetched == 10


async def test_another_provenance_is_loaded_separately(make_client: Any) -> None:
    client = await make_client(JOB_WORKERS=0)
    pool = services_of(client.server.app).database.pool
    await store_rows(pool, 5)
    index = VectorIndex()
    other = Provenance("api", "another-model", 8)
    assert await index.search(pool, other, unit(1), 3) == []
    assert len(await index.search(pool, PROV, unit(1), 3)) == 3
    assert index.loads == 2


QUERIES = ("过年", "看牙医", "小橘爱吃什么", "running a marathon", "爸妈的健康", "Kyoto trip",
           "保险续费", "what do I drink in the afternoon")


async def test_numpy_and_pgvector_rank_the_same(make_client: Any) -> None:
    client = await make_client(JOB_WORKERS=0, EMBEDDING_PROVIDER="local")
    app = client.server.app
    database = services_of(app).database
    assert database.pgvector
    await insert_fixture(database.pool)
    await request_embedding(services_of(app).memory_writes)
    await services_of(app).jobs.run_until_idle()
    # A lower threshold and no floor put many semantic candidates through the comparison.
    current = services_of(app).config.current().with_values({"MEMORY_SEMANTIC_THRESHOLD": 0.8,
                                                      "MIN_SCORE_THRESHOLD": 0.0})
    pg_settings = current.with_values({"VECTOR_BACKEND": "pgvector"})
    np_settings = current.with_values({"VECTOR_BACKEND": "numpy"})
    store = services_of(app).vectors
    compared = 0
    for query in QUERIES:
        on_pg = await search_memories(services_of(app).memory_search, query, limit=10, settings=pg_settings)
        on_np = await search_memories(services_of(app).memory_search, query, limit=10, settings=np_settings)
        assert on_pg.mode == on_np.mode == "hybrid"
        assert (on_pg.backend, on_np.backend) == ("pgvector", "numpy")
        assert [r.id for r in on_pg.results] == [r.id for r in on_np.results], query
        for a, b in zip(on_pg.results, on_np.results, strict=True):
            assert a.score == pytest.approx(b.score, abs=1e-4)
            assert a.similarity == pytest.approx(b.similarity, abs=1e-4)
        compared += len(on_pg.results)
        vector, provenance = await services_of(app).embedder.embed_query(current, query)
        near_pg = await store.nearest(database, pg_settings, provenance, vector, 20)
        near_np = await store.nearest(database, np_settings, provenance, vector, 20)
        assert [i for i, _ in near_pg] == [i for i, _ in near_np], query
    assert compared >= 60
    assert store.index.loads == 1


async def test_the_knn_query_uses_the_hnsw_index(make_client: Any) -> None:
    client = await make_client(JOB_WORKERS=0, EMBEDDING_PROVIDER="local")
    app = client.server.app
    database = services_of(app).database
    await insert_fixture(database.pool, ["cat", "dental", "coffee"])
    await request_embedding(services_of(app).memory_writes)
    await services_of(app).jobs.run_until_idle()
    current = services_of(app).config.current()
    vector, provenance = await services_of(app).embedder.embed_query(current, "猫")
    async with cursor(database.pool) as cur:
        assert await vectors_db.hnsw_index_exists(cur, provenance)
    sql = vectors_db.knn_sql(provenance)
    explain_sql = sql.replace(" SELECT e.memory_id", " EXPLAIN SELECT e.memory_id")
    async with database.pool.acquire() as conn, conn.cursor() as cur:
        await cur.execute("SET enable_seqscan = off")  # three rows: force the planner's hand
        await cur.execute(explain_sql, vectors_db.knn_params(provenance, vector, 10, []))
        plan = "\n".join(row[0] for row in await cur.fetchall())
        await cur.execute("RESET enable_seqscan")
    assert vectors_db.hnsw_index_name(provenance) in plan, plan


async def test_the_numpy_index_is_loaded_at_start(make_client: Any) -> None:
    first = await make_client(JOB_WORKERS=0)
    pool = services_of(first.server.app).database.pool
    await store_rows(pool, 3)
    async with pool.acquire() as conn, conn.cursor() as cur:
        await vectors_db.record_provenance(cur, PROV)
    await first.close()
    client = await make_client(JOB_WORKERS=0, MEMORY_ENABLED=True, VECTOR_BACKEND="numpy",
                               EMBEDDING_PROVIDER="api", EMBEDDING_MODEL=PROV.model,
                               EMBEDDING_DIM=PROV.dim)
    index = services_of(client.server.app).vectors.index
    for _ in range(500):
        if index.loads:
            break
        await asyncio.sleep(0.01)
    assert index.loads == 1 and index.size == 3
