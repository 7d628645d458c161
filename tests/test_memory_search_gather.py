"""Gathering keyword candidates term by term on the GIN index: every row containing a gathered
term comes once, document frequencies stay exact, and the cap still bounds the rows."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import pytest

from pawwake.db import memory_search as search_db
from pawwake.db.pool import cursor
from pawwake.search.term_stats import TermStats
from pawwake.services import services_of
from tests.memory_fixtures import insert_memory

TEXTS = ("猫咪喜欢晒太阳和吃鱼", "周末带猫咪去看医生", "医生说要多晒太阳", "今天的鱼很新鲜",
         "和朋友去爬山", "猫咪 太阳 医生 鱼 都在一句里")
TERMS = ["猫咪", "太阳", "医生"]


@pytest.fixture
async def app(make_client: Any) -> Any:
    client = await make_client(JOB_WORKERS=0, MEMORY_VECTOR_ENABLED=False)
    return client.server.app


async def candidates(pool: Any, gather_cap: int | None, windowed: list[str] | None = None
                     ) -> list[dict[str, Any]]:
    now = datetime.now(UTC)
    async with cursor(pool) as cur:
        return await search_db.ranked_candidates(
            cur, collection=len(TEXTS), gather=TERMS, windowed=windowed or [], estimates={},
            window=1000, gather_cap=gather_cap, exclude=[], limit=100,
            rank_weights=(0.6, 0.2, 0.2), now=now, today=now.date())


async def test_rows_with_several_gathered_terms_come_once_with_exact_frequencies(app: Any
                                                                                ) -> None:
    pool = services_of(app).database.pool
    ids = [await insert_memory(pool, text, created_days_ago=n) for n, text in enumerate(TEXTS)]
    containing = {t: {i for i, text in zip(ids, TEXTS, strict=True) if t in text}
                  for t in TERMS}
    for cap in (None, 5000):  # small collections (no cap) and planned ones gather alike
        rows = await candidates(pool, cap)
        got = [row["id"] for row in rows]
        assert len(got) == len(set(got))
        assert set(got) == set().union(*containing.values())
        weights = rows[0]["term_weights"]
        for term in TERMS:
            expected = math.log((len(TEXTS) + 1) / (len(containing[term]) + 1)) + 1
            assert weights[term] == pytest.approx(expected)
        assert got[0] == ids[-1]  # the row with every term ranks first


async def test_the_cap_bounds_gathered_rows(app: Any) -> None:
    pool = services_of(app).database.pool
    for text in TEXTS:
        await insert_memory(pool, text)
    rows = await candidates(pool, 2)
    assert 0 < len(rows) <= 2
    assert len({row["id"] for row in rows}) == len(rows)


async def test_small_collections_weigh_by_the_count_of_the_statement_itself(app: Any) -> None:
    pool = services_of(app).database.pool
    stats = TermStats()
    await insert_memory(pool, TEXTS[0])
    assert (await stats.plan(pool, TERMS)).collection == 1  # cached from here on
    for text in TEXTS[1:]:
        await insert_memory(pool, text)
    plan = await stats.plan(pool, TERMS)
    assert plan.exact_size and plan.collection == 1
    now = datetime.now(UTC)
    async with cursor(pool) as cur:
        rows = await search_db.ranked_candidates(
            cur, collection=None, gather=plan.gather, windowed=[], estimates={}, window=1000,
            gather_cap=None, exclude=[], limit=100, rank_weights=(0.6, 0.2, 0.2), now=now,
            today=now.date())
    with_cat = sum("猫咪" in text for text in TEXTS)
    assert rows[0]["term_weights"]["猫咪"] == pytest.approx(
        math.log((len(TEXTS) + 1) / (with_cat + 1)) + 1)


async def test_expired_statistics_are_refreshed_without_making_the_search_wait(app: Any
                                                                               ) -> None:
    pool = services_of(app).database.pool
    stats = TermStats(ttl=0.0)
    await insert_memory(pool, TEXTS[0])
    assert (await stats.plan(pool, TERMS)).collection == 1
    await insert_memory(pool, TEXTS[1])
    assert (await stats.plan(pool, TERMS)).collection == 1  # answered from the cache
    assert stats._reloading is not None
    await stats._reloading
    assert stats._reloading.exception() is None
    assert (await stats.plan(pool, TERMS)).collection == 2


async def test_a_keyword_counts_once_however_many_of_its_translations_a_row_holds(
        app: Any) -> None:
    """The memory model writes each memory's words in the other language too ("最近": recent,
    soon, nearest). A row holding three translations of the question's common word must not
    outrank the one holding its rare word: with more such rows than the keyword pool takes,
    the dog's memory used to be left out of the pool altogether."""
    from pawwake.memory.model_terms import searchable_text
    from pawwake.memory.search import search_memories
    from pawwake.text import tokens

    pool = services_of(app).database.pool
    dog = await insert_memory(pool, "用户的狗叫豆豆，是一只柯基")
    async with cursor(pool) as cur:
        for n in range(520):  # the pool takes 100; 120 rows carry the three translations
            text = f"用户的同事{n}号最近在学吉他"
            written = ["recent", "soon", "nearest"] if n < 120 else []
            await cur.execute(
                "INSERT INTO memories (content, importance, search_terms) VALUES (%s, 5, %s)",
                (text, tokens.index_terms(searchable_text(text, written))))
    settings = services_of(app).config.current()
    outcome = await search_memories(services_of(app).memory_search, "豆豆最近好吗", limit=10,
                                    settings=settings, touch=False)
    assert [r.id for r in outcome.results][:1] == [dog]


async def test_each_row_brings_the_query_terms_it_holds_gathered_or_windowed(app: Any
                                                                            ) -> None:
    """A gathered row holding a windowed term too brings both; a row found only in the
    window brings its windowed term and comes once."""
    pool = services_of(app).database.pool
    ids = [await insert_memory(pool, text) for text in TEXTS]
    rows = await candidates(pool, 5000, windowed=["鱼"])
    got = {row["id"]: set(row["search_terms"]) for row in rows}
    assert len(got) == len(rows)
    for memory_id, text in zip(ids, TEXTS, strict=True):
        held = {t for t in [*TERMS, "鱼"] if t in text}
        assert got.get(memory_id, set()) == held
