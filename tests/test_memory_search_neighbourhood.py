"""The neighbourhood statement: nearest memories, keyword rows' cosines and the neighbours'
rows in one round trip, the same as the three separate statements it replaces."""

from __future__ import annotations

from typing import Any

import pytest

from pawwake.db import memory_embeddings as vectors_db
from pawwake.db import memory_search as search_db
from pawwake.db.pool import cursor
from pawwake.memory.embedding_jobs import request_embedding
from pawwake.memory.search import search_memories
from pawwake.search import fusion
from pawwake.services import services_of
from tests.memory_fixtures import insert_fixture

LOCAL = {"EMBEDDING_PROVIDER": "local", "JOB_WORKERS": 0, "MEMORY_ENABLED": True}
QUERIES = ("过年", "看牙医", "我家猫叫什么名字", "coffee in the morning", "父亲的血压")


async def started(make_client: Any, **overrides: Any) -> tuple[Any, dict[str, int]]:
    client = await make_client(**{**LOCAL, **overrides})
    app = client.server.app
    ids = await insert_fixture(services_of(app).database.pool)
    await request_embedding(services_of(app).memory_writes)
    assert await services_of(app).jobs.run_until_idle() == 1
    return app, ids


async def test_one_statement_gives_what_the_three_gave(make_client: Any) -> None:
    app, ids = await started(make_client)
    services = services_of(app)
    database = services.database
    assert database.pgvector
    settings = services.config.current()
    all_ids = sorted(ids.values())
    checked_rows = checked_cosines = 0
    for number, query in enumerate(QUERIES):
        vector, provenance = await services.embedder.embed_query(settings, query)
        async with cursor(database.pool) as cur:
            plain = sorted(await vectors_db.knn(cur, provenance, vector, fusion.NEIGHBOURHOOD),
                           key=lambda item: -item[1])
        # Known (keyword) rows: some neighbours, some far away; one neighbour excluded.
        known = [plain[1][0], plain[4][0], *all_ids[number::7]]
        exclude = [plain[2][0]]
        async with cursor(database.pool) as cur:
            nearest = sorted(await vectors_db.knn(cur, provenance, vector,
                                                  fusion.NEIGHBOURHOOD, exclude),
                             key=lambda item: -item[1])
            cosines = await vectors_db.cosines_for(cur, provenance, vector, known)
            leading = [i for i, _ in nearest[:fusion.ADMIT_TOP_K] if i not in known]
            rows = {row["id"]: row for row in await search_db.fetch_rows(cur, leading, exclude)}
            found = await search_db.neighbourhood(
                cur, provenance, vector, k=fusion.NEIGHBOURHOOD, exclude=exclude, known=known,
                rows_within=fusion.ADMIT_TOP_K)
        assert [i for i, _ in found.nearest] == [i for i, _ in nearest], query
        assert [c for _, c in found.nearest] == pytest.approx([c for _, c in nearest], abs=1e-9)
        assert exclude[0] not in dict(found.nearest)
        assert found.cosines.keys() == cosines.keys() == set(known)
        for memory_id, cosine in cosines.items():
            assert found.cosines[memory_id] == pytest.approx(cosine, abs=1e-9)
        checked_cosines += len(cosines)
        assert leading and set(leading) <= set(found.rows)
        for memory_id in leading:
            assert found.rows[memory_id] == rows[memory_id]
        assert not set(found.rows) & set(known)
        checked_rows += len(leading)
    assert checked_rows >= 50 and checked_cosines >= 40


async def test_archived_memories_are_not_neighbours(make_client: Any) -> None:
    app, ids = await started(make_client)
    services = services_of(app)
    pool = services.database.pool
    settings = services.config.current()
    vector, provenance = await services.embedder.embed_query(settings, "过年")
    async with cursor(pool) as cur:
        before = await search_db.neighbourhood(cur, provenance, vector, k=10, exclude=[],
                                               known=[], rows_within=10)
        assert before.nearest[0][0] == ids["spring_festival"]
        await cur.execute("UPDATE memories SET is_active = false WHERE id = %s",
                          (ids["spring_festival"],))
        after = await search_db.neighbourhood(cur, provenance, vector, k=10, exclude=[],
                                              known=[], rows_within=10)
    assert ids["spring_festival"] not in dict(after.nearest)
    assert ids["spring_festival"] not in after.rows
    assert len(after.nearest) == 10 and set(after.rows) == set(dict(after.nearest))


@pytest.mark.parametrize("backend", ["pgvector", "numpy"])
async def test_semantic_hits_keep_their_rows_and_keyword_hits_their_cosine(
        make_client: Any, monkeypatch: pytest.MonkeyPatch, backend: str) -> None:
    """A memory found only by meaning needs its row from the neighbourhood; a memory found by
    its words needs its cosine with the query: without either, it drops or loses its
    semantic part."""
    app, ids = await started(make_client, VECTOR_BACKEND=backend)
    services = services_of(app)
    settings = services.config.current()
    semantic = await search_memories(services.memory_search, "过年", limit=5, settings=settings, touch=False)
    assert semantic.mode == "hybrid" and semantic.backend == backend
    top = semantic.results[0]
    assert top.id == ids["spring_festival"]
    assert top.parts["keyword"] == 0 and top.parts["semantic"] > 0.5
    assert "春节" in top.memory["content"] and top.memory["created_at"] is not None
    # A small neighbourhood leaves keyword hits outside it: their cosine comes only from
    # the keyword rows' part of the statement.
    monkeypatch.setattr(fusion, "NEIGHBOURHOOD", 3)
    monkeypatch.setattr(fusion, "ADMIT_TOP_K", 3)
    current = settings.with_values({"MIN_SCORE_THRESHOLD": 0.0})
    literal = await search_memories(services.memory_search, "小橘 海底捞 sourdough 降压药", limit=10,
                                    settings=current, touch=False)
    assert literal.mode == "hybrid"
    vector, provenance = await services.embedder.embed_query(current, "小橘 海底捞 sourdough 降压药")
    async with cursor(services.database.pool) as cur:
        cosines = await vectors_db.cosines_for(cur, provenance, vector, list(ids.values()))
    hits = [r for r in literal.results if r.parts["keyword"] > 0]
    assert {ids["cat"], ids["hotpot"], ids["recipe"], ids["dad_health"]} <= {r.id for r in hits}
    for hit in hits:
        assert hit.similarity == pytest.approx(cosines[hit.id], abs=1e-6)
    nearest = sorted(cosines, key=lambda i: -cosines[i])[:3]
    assert any(hit.id not in nearest for hit in hits)
