"""Memory search's statements are planned once per direct connection (``db/prepared.py``):
the same results as unprepared, a generic plan reused, the partial HNSW index still taken, and
nothing a search would not have survived unprepared (a lost name, a refused statement, the
statement's own failure); behind a pooler (no ``DATABASE_DIRECT``) nothing is prepared."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime
from typing import Any

import aiopg
import psycopg2
import pytest

from pawwake.db import memory_questions as questions_db
from pawwake.db import memory_search as search_db
from pawwake.db import prepared
from pawwake.db import reminders as reminders_db
from pawwake.db.pool import create_pool, cursor
from pawwake.memory.search import search_memories
from pawwake.search import fusion
from pawwake.services import services_of
from pawwake.text import tokens
from tests.test_memory_search_neighbourhood import QUERIES, started


@pytest.fixture
async def direct_pool(database_url: str) -> AsyncIterator[aiopg.Pool]:
    """One connection that may prepare: every statement below meets the same session."""
    pool = await create_pool(database_url, maxsize=1, on_connect=prepared.allow)
    yield pool
    pool.close()
    await pool.wait_closed()


async def statements_prepared(pool: aiopg.Pool) -> dict[str, tuple[str, int, int]]:
    async with cursor(pool) as cur:
        await cur.execute("SELECT name, statement, generic_plans, custom_plans"
                          " FROM pg_prepared_statements")
        return {name: (text, generic, custom) for name, text, generic, custom
                in await cur.fetchall()}


async def searched(pool: aiopg.Pool, provenance: Any, vector: Any, known: list[int]
                   ) -> tuple[Any, Any]:
    async with cursor(pool) as cur:
        hood = await search_db.neighbourhood(
            cur, provenance, vector, k=fusion.NEIGHBOURHOOD, exclude=known[:1], known=known,
            rows_within=fusion.ADMIT_TOP_K)
        asked = await questions_db.nearest_questions(
            cur, provenance, vector, k=fusion.NEIGHBOURHOOD, exclude=known[:1], known=known,
            rows_within=fusion.ADMIT_TOP_K)
    return hood, asked


async def test_prepared_searches_match_unprepared_ones_and_reuse_one_plan(
        make_client: Any, direct_pool: aiopg.Pool) -> None:
    app, ids = await started(make_client)
    services = services_of(app)
    settings = services.config.current()
    known = sorted(ids.values())[::5]
    for round_ in range(2):
        for query in QUERIES:
            vector, provenance = await services.embedder.embed_query(settings, query)
            hood, asked = await searched(direct_pool, provenance, vector, known)
            plain_hood, plain_asked = await searched(services.database.pool, provenance,
                                                     vector, known)
            assert hood.nearest == plain_hood.nearest and hood.nearest, query
            assert hood.rows == plain_hood.rows and hood.cosines == plain_hood.cosines
            assert (asked.nearest, asked.best) == (plain_asked.nearest, plain_asked.best)
        if round_ == 0:
            first = await statements_prepared(direct_pool)
    again = await statements_prepared(direct_pool)
    assert len(first) == 2 and set(again) == set(first)  # prepared once, then only executed
    for text, generic, custom in again.values():
        assert (generic, custom) == (2 * len(QUERIES), 0)
        # Written in, not parameters: the provenance picks its partial index, and a generic
        # plan that does not know a LIMIT guesses a tenth of the table and joins every memory.
        assert f"provider = '{provenance.provider}'" in text
        assert f"LIMIT {fusion.NEIGHBOURHOOD})" in text
    # The generic plan (the same whatever the values: NULLs will do) still takes the
    # provenance's partial HNSW index.
    async with cursor(direct_pool) as cur:
        await cur.execute("SELECT name, cardinality(parameter_types) FROM pg_prepared_statements"
                          " WHERE statement LIKE '%%JOIN memories m ON m.id = e.memory_id%%'")
        [(name, count)] = await cur.fetchall()
        await cur.execute("SET plan_cache_mode = force_generic_plan;"
                          f" EXPLAIN EXECUTE {name}({', '.join(['NULL'] * count)})")
        plan = "\n".join(row[0] for row in await cur.fetchall())
    assert "memory_embeddings_hnsw_" in plan, plan


async def test_a_search_outlives_a_lost_name(make_client: Any, direct_pool: aiopg.Pool
                                             ) -> None:
    app, ids = await started(make_client)
    services = services_of(app)
    vector, provenance = await services.embedder.embed_query(services.config.current(),
                                                             QUERIES[1])
    known = sorted(ids.values())[:3]
    before, _ = await searched(direct_pool, provenance, vector, known)
    async with cursor(direct_pool) as cur:
        await cur.execute("DEALLOCATE ALL")  # what a server-side reset would do
    after, _ = await searched(direct_pool, provenance, vector, known)
    assert after.nearest == before.nearest and after.nearest
    assert len(await statements_prepared(direct_pool)) == 2


async def test_a_statement_postgres_will_not_prepare_runs_as_it_is(direct_pool: aiopg.Pool
                                                                  ) -> None:
    # Two untyped parameters: "operator is not unique: unknown + unknown" when prepared,
    # while the same text with the values written in is plain arithmetic.
    sql = "SELECT %(a)s + %(b)s"
    for a in (1, 2):
        async with cursor(direct_pool) as cur:
            await prepared.execute(cur, sql, {"a": a, "b": 40})
            assert await cur.fetchone() == (a + 40,)
    assert await statements_prepared(direct_pool) == {}


async def test_the_statements_own_failure_leaves_it_prepared(direct_pool: aiopg.Pool) -> None:
    sql = "SELECT 100 / %(n)s::int, '100%%'"
    async with cursor(direct_pool) as cur:
        with pytest.raises(psycopg2.errors.DivisionByZero):
            await prepared.execute(cur, sql, {"n": 0})
    for n in (4, 5):
        async with cursor(direct_pool) as cur:
            await prepared.execute(cur, sql, {"n": n})
            assert await cur.fetchone() == (100 // n, "100%")
    [(_, generic, _)] = (await statements_prepared(direct_pool)).values()
    assert generic == 3  # the failing run and both after it, on the one plan


@pytest.mark.parametrize("direct", [True, False])
async def test_only_a_direct_database_prepares(make_client: Any, direct: bool) -> None:
    app, _ = await started(make_client, DATABASE_DIRECT=direct, DATABASE_POOL_SIZE=2)
    services = services_of(app)
    for query in QUERIES:
        await search_memories(services.memory_search, query, limit=5,
                              settings=services.config.current())
    pool = services.database.pool
    held = [await pool.acquire() for _ in range(pool.size)]  # every connection of the pool
    try:
        names: set[str] = set()
        for conn in held:
            cur = await conn.cursor()
            await cur.execute("SELECT name FROM pg_prepared_statements")
            names |= {name for (name,) in await cur.fetchall()}
            cur.close()
    finally:
        await asyncio.gather(*(pool.release(conn) for conn in held))
    assert len(names) >= 3 if direct else not names  # keyword statement, neighbourhood, questions


async def test_the_reminder_claim_is_prepared_and_claims_as_before(direct_pool: aiopg.Pool
                                                                   ) -> None:
    async with cursor(direct_pool) as cur:
        await cur.execute(
            "INSERT INTO memories (content, importance, layer, is_active, search_terms,"
            " remind_at) VALUES ('call the dentist', 5, 1, true, '{dentist}',"
            " now() - interval '1 minute'), ('later', 5, 1, true, '{later}',"
            " now() + interval '1 day')")
    async with cursor(direct_pool) as cur:
        first = await reminders_db.claim_due(cur, "token-a", 5)
        second = await reminders_db.claim_due(cur, "token-b", 5)
    assert [r["content"] for r in first] == ["call the dentist"] and second == []
    [(text, generic, custom)] = (await statements_prepared(direct_pool)).values()
    assert "reminder_claim_token" in text and (generic, custom) == (2, 0)


async def test_the_keyword_statement_ranks_as_it_did_unprepared(
        make_client: Any, direct_pool: aiopg.Pool) -> None:
    app, _ = await started(make_client)
    plain_pool = services_of(app).database.pool
    now, today = datetime.now(UTC), date.today()
    shapes = []
    for query in (*QUERIES, "猫 咖啡 marathon 外婆", "The user is allergic to peanuts"):
        terms = tokens.query_keywords(query)
        shapes.append({"collection": None, "gather": terms, "windowed": [], "gather_cap": None})
        # A large collection's shape: frequent terms only among the newest rows.
        shapes.append({"collection": 10_000, "gather": terms[1:], "windowed": terms[:1],
                       "gather_cap": 5000})
    total = 0
    for shape in shapes * 2:
        found = []
        for pool in (direct_pool, plain_pool):
            async with cursor(pool) as cur:
                found.append(await search_db.ranked_candidates(
                    cur, **shape, estimates={}, window=1000, exclude=[], limit=20,
                    rank_weights=(0.25, 0.05, 0.05), now=now, today=today))
        assert [row["id"] for row in found[0]] == [row["id"] for row in found[1]], shape
        assert found[0] == found[1] or all(
            {**a, "search_terms": sorted(a["search_terms"])}
            == {**b, "search_terms": sorted(b["search_terms"])}
            for a, b in zip(*found, strict=True))
        total += len(found[0])
    assert total >= 2 * len(shapes)
    # The store's size weighs the terms but stays a parameter: a growing store is not a new
    # statement each time.
    before = len(await statements_prepared(direct_pool))
    for size in (10_001, 10_002):
        async with cursor(direct_pool) as cur:
            await search_db.ranked_candidates(
                cur, **{**shapes[1], "collection": size}, estimates={}, window=1000,
                exclude=[], limit=20, rank_weights=(0.25, 0.05, 0.05), now=now, today=today)
    assert len(await statements_prepared(direct_pool)) == before
    prepared_now = await statements_prepared(direct_pool)
    assert 2 <= len(prepared_now) <= 3 and all(custom == 0 for _, _, custom
                                               in prepared_now.values())
