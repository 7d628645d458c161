"""Keyword search on a collection large enough for planning: rare terms are gathered in full,
very frequent ones only among the newest rows, and IDF weights still follow the formula."""

from __future__ import annotations

import math
from typing import Any

import pytest

from pawwake.db.pool import cursor, fetch_all
from pawwake.memory.search import search_memories
from pawwake.search.term_stats import EXACT_BELOW, GATHER_BUDGET, RECENT_WINDOW, TermStats
from pawwake.services import services_of
from tests.memory_fixtures import insert_memory

COMMON_ROWS = 6000


async def bulk_common_rows(pool: Any) -> None:
    """Many memories sharing the word 工作, oldest first (row i is i minutes younger)."""
    async with cursor(pool) as cur:
        await cur.execute(
            "INSERT INTO memories (content, importance, created_at, search_terms)"
            " SELECT '工作记录 ' || i, 5, now() - make_interval(mins => %s - i),"
            "        ARRAY['工作', '记录', 'item' || i]"
            " FROM generate_series(1, %s) AS i", (COMMON_ROWS + 100, COMMON_ROWS))
        await cur.execute("ANALYZE memories")


@pytest.fixture
async def app(make_client: Any) -> Any:
    client = await make_client(JOB_WORKERS=0, MEMORY_VECTOR_ENABLED=False)
    return client.server.app


async def test_small_collections_gather_every_term(app: Any) -> None:
    pool = services_of(app).database.pool
    await insert_memory(pool, "工作之余给妈妈织了一条羊绒围巾")
    plan = await TermStats().plan(pool, ["羊绒", "工作"])
    assert plan.collection == 1 < EXACT_BELOW
    assert plan.gather == ["羊绒", "工作"] and plan.windowed == []


async def test_frequent_terms_are_windowed_and_rare_ones_gathered(app: Any) -> None:
    pool = services_of(app).database.pool
    scarf = await insert_memory(pool, "工作之余给妈妈织了一条羊绒围巾", importance=4,
                                created_days_ago=30)
    await bulk_common_rows(pool)
    plan = await TermStats().plan(pool, ["羊绒", "围巾", "工作"])
    assert plan.collection == COMMON_ROWS + 1
    assert sorted(plan.gather) == ["围巾", "羊绒"]
    assert plan.windowed == ["工作"]
    assert abs(plan.estimates["工作"] - COMMON_ROWS) < COMMON_ROWS * 0.1
    assert GATHER_BUDGET < COMMON_ROWS

    outcome = await search_memories(services_of(app).memory_search, "羊绒围巾 工作", limit=5,
                                    settings=services_of(app).config.current())
    assert outcome.results[0].id == scarf  # the only row with the rare, heavy terms
    top = outcome.results[0]
    rare = 2 * (math.log((plan.collection + 1) / 2) + 1)
    common = math.log((plan.collection + 1) / (plan.estimates["工作"] + 1)) + 1
    assert top.parts["keyword"] == pytest.approx(1.0)
    second = outcome.results[1]  # a common-only row: the small IDF share of 工作
    assert second.parts["keyword"] == pytest.approx(common / (rare + common), rel=0.05)


async def test_a_frequent_term_alone_returns_the_newest_matches(app: Any) -> None:
    pool = services_of(app).database.pool
    await bulk_common_rows(pool)
    outcome = await search_memories(services_of(app).memory_search, "工作", limit=10,
                                    settings=services_of(app).config.current())
    assert len(outcome.results) == 10
    async with cursor(pool) as cur:
        newest = await fetch_all(cur, "SELECT id FROM memories ORDER BY created_at DESC LIMIT %s",
                                 (RECENT_WINDOW,))
    window = {row["id"] for row in newest}
    assert {r.id for r in outcome.results} <= window
    assert [r.id for r in outcome.results] == [row["id"] for row in newest[:10]]
    assert all(r.parts["keyword"] == pytest.approx(1.0) for r in outcome.results)
