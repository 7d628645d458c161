"""Memory retrieval on a fixture of Chinese and English memories, keyword-only and hybrid."""

from __future__ import annotations

from typing import Any

import pytest

from pawwake.db import memory_search as memory_search_db
from pawwake.db.pool import cursor, fetch_all, fetch_one
from pawwake.memory.embedding_jobs import request_embedding
from pawwake.memory.inject import recall_for_request
from pawwake.memory.search import search_memories
from pawwake.search import fusion, relevance
from pawwake.services import services_of
from tests.memory_fixtures import MEMORIES, UNRELATED_QUERIES, insert_fixture, insert_memory

LOCAL = {"EMBEDDING_PROVIDER": "local", "JOB_WORKERS": 0, "MEMORY_ENABLED": True}


async def start(make_client: Any, **overrides: Any) -> tuple[Any, Any, dict[str, int]]:
    client = await make_client(**{**LOCAL, **overrides})
    app = client.server.app
    ids = await insert_fixture(services_of(app).database.pool)
    return client, app, ids


async def backfill(app: Any) -> None:
    await request_embedding(services_of(app).memory_writes)
    assert await services_of(app).jobs.run_until_idle() == 1


def keys_of(result_ids: list[int], ids: dict[str, int]) -> list[str]:
    by_id = {v: k for k, v in ids.items()}
    return [by_id.get(i, f"#{i}") for i in result_ids]


async def search_keys(client: Any, ids: dict[str, int], q: str, limit: int = 5
                      ) -> tuple[list[str], dict[str, Any]]:
    resp = await client.post("/api/memories/search", json={"q": q, "limit": limit})
    assert resp.status == 200, await resp.text()
    body = await resp.json()
    return keys_of([r["id"] for r in body["results"]], ids), body


def test_the_fixture_is_big_and_bilingual() -> None:
    chinese = [c for _, c, *_ in MEMORIES if any("\u4e00" <= ch <= "\u9fff" for ch in c)]
    assert len(MEMORIES) >= 60
    assert 20 <= len(chinese) <= len(MEMORIES) - 20


@pytest.mark.parametrize(("query", "expected"), [
    ("小橘", "cat"),
    ("peanuts allergy", "peanut"),
    ("Kyoto cherry blossoms", "kyoto"),
    ("羊绒围巾", "mom_birthday"),
    ("降压药", "dad_health"),
    ("sourdough", "recipe"),
    ("海底捞", "hotpot"),
    ("Singapore visa", "visa"),
])
async def test_keyword_mode_finds_literal_matches(make_client: Any, query: str,
                                                  expected: str) -> None:
    client, _app, ids = await start(make_client, MEMORY_VECTOR_ENABLED=False)
    found, body = await search_keys(client, ids, query)
    assert body["mode"] == "keyword"
    assert "MEMORY_VECTOR_ENABLED" in body["warning"]
    assert found[0] == expected
    top = body["results"][0]
    assert top["score_parts"]["keyword"] > 0 and top["score_parts"]["semantic"] == 0
    assert top["similarity"] is None


async def test_keyword_mode_cannot_bridge_paraphrases(make_client: Any) -> None:
    """The semantic tests below are meaningful: the words do not overlap."""
    client, _app, ids = await start(make_client, MEMORY_VECTOR_ENABLED=False)
    for query in ("过年", "看牙医"):
        found, body = await search_keys(client, ids, query)
        assert body["mode"] == "keyword"
        assert "spring_festival" not in found and "dental" not in found


@pytest.mark.parametrize(("query", "expected"), [
    ("过年", "spring_festival"),
    ("看牙医", "dental"),
    ("我家猫叫什么名字", "cat"),
    ("父亲的血压", "dad_health"),
])
async def test_local_model_finds_paraphrases(make_client: Any, query: str,
                                             expected: str) -> None:
    client, app, ids = await start(make_client)
    await backfill(app)
    found, body = await search_keys(client, ids, query)
    assert body["mode"] == "hybrid" and body["warning"] is None
    assert found[0] == expected
    top = body["results"][0]
    assert top["score_parts"]["semantic"] == max(
        r["score_parts"]["semantic"] for r in body["results"])
    assert top["score_parts"]["semantic"] > 0.5  # it stands out of the query's neighbourhood
    assert top["similarity"] >= 0.78


UNRELATED = (*UNRELATED_QUERIES, "火星上的沙尘暴", "明朝的科举制度", "the GDP of Norway in 1970",
             "best way to clean a cast iron pan", "如何更换汽车轮胎")


async def test_unrelated_queries_inject_little_or_nothing(make_client: Any) -> None:
    _client, app, _ids = await start(make_client)
    await backfill(app)
    settings = services_of(app).config.current()
    counts = []
    for query in UNRELATED:
        injected, mode = await recall_for_request(services_of(app).memory_search, settings, "s", query,
                                                  partition=False,
                                                  touch=False)
        assert mode == "hybrid"
        counts.append(len(injected))
    assert max(counts) <= 1 and sum(counts) * 3 <= len(counts), counts  # mostly none at all
    # The check has teeth: without the injection floor the nearest neighbours would come in.
    unfloored = settings.with_values({"MEMORY_INJECT_MIN_RELEVANCE": 0.0})
    flooded = [len((await recall_for_request(services_of(app).memory_search, unfloored, "s", q, partition=False,
                                             touch=False))[0]) for q in UNRELATED]
    assert sum(flooded) >= 2 * len(UNRELATED)


async def test_excluded_ids_make_room_for_the_next_candidates(make_client: Any) -> None:
    _client, app, ids = await start(make_client, MEMORY_VECTOR_ENABLED=False)
    parents = {"spring_festival", "moving", "insurance"}
    first = await search_memories(services_of(app).memory_search, "爸妈", limit=1,
                                  settings=services_of(app).config.current())
    assert len(first.results) == 1
    first_key = keys_of([first.results[0].id], ids)[0]
    assert first_key in parents
    second = await search_memories(services_of(app).memory_search, "爸妈", limit=1,
                                   exclude_ids=[first.results[0].id],
                                   settings=services_of(app).config.current())
    assert len(second.results) == 1
    second_key = keys_of([second.results[0].id], ids)[0]
    assert second_key in parents and second_key != first_key
    everything = await search_memories(services_of(app).memory_search, "爸妈", limit=10,
                                       exclude_ids=[ids[k] for k in parents],
                                       settings=services_of(app).config.current())
    assert not {keys_of([r.id], ids)[0] for r in everything.results} & parents


async def test_archived_memories_are_never_returned(make_client: Any) -> None:
    _client, app, ids = await start(make_client)
    pool = services_of(app).database.pool
    archived = await insert_memory(pool, "小橘最喜欢的玩具是逗猫棒", importance=10,
                                   is_active=False)
    await backfill(app)
    for vectors_on in (True, False):
        outcome = await search_memories(services_of(app).memory_search, "小橘的玩具", limit=20,
            settings=services_of(app).config.current().with_values(
                {"MEMORY_VECTOR_ENABLED": vectors_on}))
        assert archived not in [r.id for r in outcome.results]
        assert ids["cat"] in [r.id for r in outcome.results]


async def test_last_accessed_is_set_for_returned_rows_only(make_client: Any) -> None:
    client, app, ids = await start(make_client, MEMORY_VECTOR_ENABLED=False)
    pool = services_of(app).database.pool
    found, _body = await search_keys(client, ids, "小橘", limit=1)
    async with cursor(pool) as cur:
        rows = await fetch_all(cur, "SELECT id FROM memories WHERE last_accessed IS NOT NULL")
    assert [r["id"] for r in rows] == [ids[found[0]]]


async def test_touching_returned_memories_rewrites_them_in_place(make_client: Any) -> None:
    """A touch (``last_accessed``) finds room on the row's own page, so the new version needs
    no new index entries: a page filled to the brim moved every touched row elsewhere."""
    _client, app, _ids = await start(make_client, MEMORY_VECTOR_ENABLED=False)
    pool = services_of(app).database.pool
    ids = [await insert_memory(pool, f"用户记下的第{n:04d}件事：周末去湖边散步，带上相机和热茶")
           for n in range(240)]
    touched = ids[5::20]  # one row a page or so, as a chat's results are spread

    async def blocks() -> dict[int, int]:
        async with cursor(pool) as cur:
            rows = await fetch_all(cur, "SELECT id, (ctid::text::point)[0]::int AS block"
                                        " FROM memories WHERE id = ANY(%s)", (touched,))
        return {row["id"]: row["block"] for row in rows}

    before = await blocks()
    assert len(set(before.values())) >= 6  # the rows fill several pages
    for memory_id in touched:  # one chat at a time
        async with cursor(pool) as cur:
            await memory_search_db.touch_accessed(cur, [memory_id], 600.0)
    after = await blocks()
    stayed = sum(after[i] == before[i] for i in touched)
    assert stayed >= len(touched) - 1, (before, after)


async def test_the_score_floor_applies_before_the_limit(make_client: Any) -> None:
    _client, app, _ids = await start(make_client, MEMORY_VECTOR_ENABLED=False)
    loose = await search_memories(services_of(app).memory_search, "爸妈 吉他 咖啡 marathon", limit=3,
                                  settings=services_of(app).config.current())
    assert len(loose.results) == 3
    strict_settings = services_of(app).config.current().with_values({"MIN_SCORE_THRESHOLD": 0.4})
    strict = await search_memories(services_of(app).memory_search, "爸妈 吉他 咖啡 marathon", limit=3,
                                   settings=strict_settings)
    assert all(r.score >= 0.4 for r in strict.results)
    assert len(strict.results) < 3
    everything = await search_memories(services_of(app).memory_search, "爸妈 吉他 咖啡 marathon", limit=50,
                                       settings=strict_settings)
    assert [r.id for r in everything.results] == [r.id for r in strict.results]


async def test_scores_follow_the_keyword_only_formula(make_client: Any) -> None:
    _client, app, _ids = await start(make_client, MEMORY_VECTOR_ENABLED=False)
    outcome = await search_memories(services_of(app).memory_search, "小橘", limit=1,
                                    settings=services_of(app).config.current())
    top = outcome.results[0]
    expected = (0.5 * top.parts["keyword"] + 0.3 * top.parts["importance"]
                + 0.2 * top.parts["recency"])
    assert top.score == pytest.approx(expected)
    assert top.parts["keyword"] == 1.0 and top.parts["importance"] == 0.8


async def test_recency_counts_from_the_event_date_when_set(make_client: Any) -> None:
    client = await make_client(**LOCAL, MEMORY_VECTOR_ENABLED=False)
    app = client.server.app
    pool = services_of(app).database.pool
    old_event = await insert_memory(pool, "去青岛看海", event_date="2020-07-01")
    fresh = await insert_memory(pool, "去青岛吃海鲜", created_days_ago=1)
    old_row = await insert_memory(pool, "去青岛出差", created_days_ago=90)
    outcome = await search_memories(services_of(app).memory_search, "青岛", limit=5,
                                    settings=services_of(app).config.current())
    order = [r.id for r in outcome.results]
    assert order == [fresh, old_row, old_event]
    recency = {r.id: r.parts["recency"] for r in outcome.results}
    assert recency[fresh] == pytest.approx(0.5, abs=0.01)
    assert recency[old_event] < 0.001


async def test_hybrid_scores_use_the_configured_weights(make_client: Any) -> None:
    _client, app, ids = await start(make_client, MEMORY_HW_KEYWORD=0.1, MEMORY_HW_SEMANTIC=0.6,
                                   MEMORY_HW_IMPORTANCE=0.2, MEMORY_HW_RECENCY=0.1)
    await backfill(app)
    outcome = await search_memories(services_of(app).memory_search, "小橘爱吃什么", limit=3,
                                    settings=services_of(app).config.current())
    assert outcome.mode == "hybrid"
    for r in outcome.results:
        assert r.score == pytest.approx(0.1 * r.parts["keyword"] + 0.6 * r.parts["semantic"]
                                        + 0.2 * r.parts["importance"]
                                        + 0.1 * r.parts["recency"])
    assert keys_of([outcome.results[0].id], ids) == ["cat"]


async def test_search_without_vectors_says_so(make_client: Any) -> None:
    client, _app, ids = await start(make_client)
    found, body = await search_keys(client, ids, "小橘")
    assert body["mode"] == "keyword"
    assert "backfill" in body["warning"]
    assert found[0] == "cat"


async def test_get_and_post_agree(make_client: Any) -> None:
    client, app, _ids = await start(make_client)
    await backfill(app)
    got = await client.get("/api/memories/search", params={"q": "过年", "limit": "3"})
    assert got.status == 200
    posted = await client.post("/api/memories/search", json={"q": "过年", "limit": 3})
    get_body, post_body = await got.json(), await posted.json()
    assert [r["id"] for r in get_body["results"]] == [r["id"] for r in post_body["results"]]
    assert get_body["mode"] == post_body["mode"] == "hybrid"
    assert len(get_body["results"]) <= 3
    first = get_body["results"][0]
    assert set(first) >= {"id", "content", "importance", "layer", "score", "score_parts",
                          "similarity", "event_date", "created_at", "title"}
    assert set(first["score_parts"]) == {"keyword", "semantic", "importance", "recency"}
    async with cursor(services_of(app).database.pool) as cur:
        stored = await fetch_one(cur, "SELECT content FROM memories WHERE id = %s",
                                 (first["id"],))
    assert first["content"] == stored["content"]


async def test_a_search_fuses_as_it_is_told_and_leaves_nothing_switched(make_client: Any) -> None:
    """The benchmark compares fusions by passing one down the search; no module-wide switch
    is left behind for the next search (the product's own)."""
    _client, app, _ids = await start(make_client, MEMORY_VECTOR_ENABLED=False)
    services = services_of(app)
    settings = services.config.current()

    async def scores(**fused: Any) -> list[tuple[int, float]]:
        outcome = await search_memories(services.memory_search, "Kyoto marathon sister manager",
                                        limit=5,
                                        settings=settings, touch=False, **fused)
        return [(r.id, round(r.score, 6)) for r in outcome.results]  # recency moves on

    product = await scores()
    ranked = await scores(fusing=fusion.Fusion("rrf"))
    assert product and [s for _, s in ranked] != [s for _, s in product]
    assert await scores() == product
    assert fusion.CALIBRATED == fusion.Fusion("sum", literal_first=True)
    assert not {"METHOD", "LITERAL_FIRST"} & set(vars(fusion))


async def test_a_search_judges_relevance_as_it_is_told_and_leaves_nothing_switched(
        make_client: Any) -> None:
    """The benchmark tries other relevance coefficients by passing them down the search, as
    it does fusions; the module's own stay in force for the next search."""
    _client, app, _ids = await start(make_client, MEMORY_VECTOR_ENABLED=False)
    services = services_of(app)
    settings = services.config.current()

    async def judged(**told: Any) -> list[tuple[int, float]]:
        outcome = await search_memories(services.memory_search, "Kyoto marathon sister manager",
                                        limit=5, settings=settings, touch=False, **told)
        return [(r.id, round(r.relevance, 6)) for r in outcome.results]

    product = await judged()
    stricter = await judged(judging=relevance.Relevance(keyword_only_offset=6.0))
    assert product and all(new < old for (_, new), (_, old) in zip(stricter, product,
                                                                    strict=True))
    assert await judged() == product
    assert relevance.CALIBRATED == relevance.Relevance()
    assert not {"STANDING", "KEYWORD", "CROSS_KEYWORD", "OFFSET"} & set(vars(relevance))
