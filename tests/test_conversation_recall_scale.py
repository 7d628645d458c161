"""Conversation recall at scale: the HNSW index on message vectors, widening past filtered
neighbours, and cached/estimated IDF statistics."""

from __future__ import annotations

from typing import Any

import pytest

from pawwake.db import fragments as fragments_db
from pawwake.db import memory_embeddings as vectors_db
from pawwake.db import memory_search, message_vectors
from pawwake.db.pool import cursor, execute
from pawwake.search import term_stats
from pawwake.search.term_stats import CONVERSATIONS, TermStats
from pawwake.services import services_of
from tests.test_conversation_recall import HEADERS, recall_client, search, store

TABLE = "conversation_embeddings"


@pytest.fixture
async def client(make_client: Any) -> Any:
    return await recall_client(make_client)


async def embed_all(client: Any) -> tuple[Any, Any]:
    app = client.server.app
    await services_of(app).jobs.run_until_idle()
    current = await services_of(app).config.fresh()
    return app, await services_of(app).embedder.provenance(current)


async def test_the_embedding_job_builds_the_index_the_search_walks(client: Any) -> None:
    app, provenance = await embed_all(client)
    pool = services_of(app).database.pool
    async with cursor(pool) as cur:
        assert await vectors_db.hnsw_index_exists(cur, provenance, TABLE)
    vector, _ = await services_of(app).embedder.embed_query(await services_of(app).config.fresh(),
                                                            "京都")
    async with pool.acquire() as conn, conn.cursor() as cur:
        await cur.execute("SET enable_seqscan = off")  # eight rows: force the planner's hand
        await cur.execute("EXPLAIN " + message_vectors.nearest_sql(provenance),
                          message_vectors.nearest_params(provenance, vector, 5, []))
        plan = "\n".join(row[0] for row in await cur.fetchall())
        await cur.execute("RESET enable_seqscan")
    assert vectors_db.hnsw_index_name(provenance, TABLE) in plan, plan
    assert "Index Cond: (id = e.message_id)" in plan, plan  # looked up by key, not hashed
    assert "Hash" not in plan, plan
    found = await search(client, q="京都清水寺", mode="hybrid")
    assert found["mode"] == "hybrid"
    assert found["fragments"][0]["session_id"] == "trip"


async def test_nearest_widens_past_excluded_stale_and_deleted_messages(client: Any) -> None:
    await store(client, "crowd", [(f"京都清水寺旅行第{i}天", f"第{i}天去京都的寺庙")
                                  for i in range(40)], day=9)
    app, provenance = await embed_all(client)
    pool = services_of(app).database.pool
    async with cursor(pool) as cur:
        await execute(cur, "UPDATE conversations SET deleted_at = now() WHERE session_id = 'cat'"
                           " AND role = 'user'")
        await execute(cur, "UPDATE conversations SET content = content || '（已编辑）'"
                           " WHERE session_id = 'code' AND role = 'assistant'")  # stale vector
    vector, _ = await services_of(app).embedder.embed_query(await services_of(app).config.fresh(),
                                                            "京都旅行")
    vectors = services_of(app).recall_vectors
    rows = await vectors.nearest(pool, provenance, vector, 5, ["crowd"], pgvector=True)
    exact = await vectors.nearest(pool, provenance, vector, 5, ["crowd"], pgvector=False)
    assert len(rows) == 5  # the 80 nearer "crowd" messages did not crowd the others out
    assert {r["session_id"] for r in rows} <= {"trip", "cat", "code"}
    assert [r["id"] for r in rows] == [r["id"] for r in exact]
    assert [r["cosine"] for r in rows] == sorted((r["cosine"] for r in rows), reverse=True)
    for pgvector in (True, False):
        everything = await vectors.nearest(pool, provenance, vector, 50, ["crowd"],
                                           pgvector=pgvector)
        assert len(everything) == 6  # 8 minus the deleted and the stale message


async def test_frequent_terms_are_estimated_and_rare_ones_counted(
        client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    await store(client, "many", [(f"京都第{i}次", f"好的{i}") for i in range(30)], day=9)
    pool = services_of(client.server.app).database.pool
    async with cursor(pool) as cur:
        await execute(cur, "ANALYZE conversations")
        exact_count, exact = await fragments_db.term_frequencies(cur, ["京都", "兽医"])
    assert exact["京都"] == 32 and exact["兽医"] == 1
    monkeypatch.setattr(term_stats, "EXACT_BELOW", 10)
    stats = TermStats(CONVERSATIONS, ttl=3600)
    plan = await stats.plan(pool, ["京都", "兽医", "火星"])
    assert plan.collection == exact_count == 68
    async with cursor(pool) as cur:
        listed = await memory_search.frequent_terms(cur, "conversations")
    assert "京都" in listed and "火星" not in listed
    found = stats.estimated(["京都", "兽医", "火星"])
    assert "火星" not in found  # not listed by the statistics: left to be counted exactly
    assert abs(found["京都"] - exact["京都"]) <= 3  # listed: estimated from its share
    assert set(found) <= set(listed)  # only what the statistics list is estimated
    await store(client, "later", [("京都再见", "再见")], day=10)
    assert (await stats.counts(pool)).size == 68  # the size is cached
    monkeypatch.setattr(term_stats, "EXACT_BELOW", 1000)
    assert (await stats.counts(pool)).size == 70  # small: always exact
    status = await (await client.get("/api/admin/conversation-embedding-status",
                                     headers=HEADERS)).json()
    assert status["keyword_index"]["total"] == 70


async def test_a_frequent_term_is_matched_among_the_newest_messages_only(
        client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    await store(client, "many", [(f"京都第{i}次", f"好的{i}") for i in range(30)], day=9)
    pool = services_of(client.server.app).database.pool
    async with cursor(pool) as cur:
        await execute(cur, "ANALYZE conversations")
    monkeypatch.setattr(term_stats, "EXACT_BELOW", 10)
    monkeypatch.setattr(term_stats, "GATHER_BUDGET", 5)
    monkeypatch.setattr(term_stats, "RECENT_WINDOW", 10)
    terms = ["京都", "清水"]
    plan = await TermStats(CONVERSATIONS).plan(pool, terms)
    assert plan.windowed == ["京都"]  # 清水 (two messages) is gathered in full
    options = {"windowed": plan.windowed, "window": plan.window, "gather_cap": plan.gather_cap}
    async with cursor(pool) as cur:
        rows = await fragments_db.keyword_matches(cur, terms, [], 100, **options)
    by_session = {r["session_id"] for r in rows}
    assert by_session == {"trip", "many"}
    trip = [r for r in rows if r["session_id"] == "trip"]
    assert len(trip) == 2 and all("清水" in r["search_terms"] for r in trip)  # no other 京都
    assert len(rows) == 2 + 5  # the 10 newest messages hold 5 user turns with 京都
    async with cursor(pool) as cur:
        full = await fragments_db.keyword_matches(cur, terms, [], 100)
    assert len(full) == 33
