"""Conversation recall on the numpy index: the same answers as pgvector, loaded once, and
trash, restore, edits and deletes of messages reflected at once."""

from __future__ import annotations

import asyncio
from typing import Any

import aiopg
import pytest

from pawwake.recall import vectors as recall_vectors
from pawwake.recall.search import search_fragments
from pawwake.services import services_of
from tests.conditions import until
from tests.test_conversation_recall import HEADERS, SESSIONS, SETTINGS, search, store

MORE_SESSIONS = {
    "dentist": [("牙齿有点疼，要不要去看牙医", "先约个口腔检查，可能是蛀牙。"),
                ("补牙之后能马上吃饭吗", "等两个小时再吃比较好。")],
    "marathon": [("I signed up for my first marathon in spring",
                  "Build up your long runs slowly, about ten percent a week."),
                 ("My knee hurts after running", "Rest a few days and check your shoes.")],
    "insurance": [("车险下个月到期，续保有什么要注意的", "比较几家报价，看看有没有无赔款优惠。")],
    "parents": [("爸妈最近血压有点高", "提醒他们少吃盐，定期量血压。"),
                ("给爸妈买什么体检套餐好", "选包含心血管和血糖检查的套餐。")],
    "coffee": [("下午总想喝咖啡，晚上睡不着", "试试把咖啡换成低因的，或者下午三点后不喝。")],
    "kyoto-food": [("京都有什么好吃的", "汤豆腐、抹茶甜点和锦市场的小吃。")],
    "python": [("How do I read a CSV file in Python", "Use the csv module or pandas.read_csv."),
               ("asyncio 的事件循环是什么", "它负责调度协程和回调。")],
}
QUERIES = ("去日本关西玩的行程", "看牙医", "running a marathon", "爸妈的健康", "Kyoto trip",
           "保险续费", "what do I drink in the afternoon", "猫不吃东西", "并发编程")


@pytest.fixture
async def client(make_client: Any) -> Any:
    # A low floor puts many semantic candidates through the comparison.
    client = await make_client(**SETTINGS, EMBEDDING_PROVIDER="local",
                               CONVERSATION_MIN_SCORE_THRESHOLD=0.78)
    everything = {**SESSIONS, **MORE_SESSIONS}
    for day, (session, pairs) in enumerate(everything.items(), start=1):
        await store(client, session, pairs, day)
    await services_of(client.server.app).jobs.run_until_idle()
    return client


async def test_numpy_and_pgvector_recall_the_same_fragments(client: Any) -> None:
    app = client.server.app
    database = services_of(app).database
    assert database.pgvector
    current = services_of(app).config.current()
    on_pg = current.with_values({"VECTOR_BACKEND": "pgvector"})
    on_np = current.with_values({"VECTOR_BACKEND": "numpy"})
    vectors = services_of(app).recall_vectors
    compared = 0
    for query in QUERIES:
        for context in (0, 1):
            pg = await search_fragments(services_of(app).recall, query, max_sessions=6, context=context,
                                        settings=on_pg)
            np_ = await search_fragments(services_of(app).recall, query, max_sessions=6, context=context,
                                         settings=on_np)
            assert pg.mode == np_.mode == "hybrid", (pg.warning, np_.warning)
            assert [f["fragment_id"] for f in pg.fragments] == [
                f["fragment_id"] for f in np_.fragments], query
            for a, b in zip(pg.fragments, np_.fragments, strict=True):
                assert a["messages"] == b["messages"]
                assert a["score"] == pytest.approx(b["score"], abs=1e-4)
                for part in ("keyword", "semantic", "recency"):
                    assert a["parts"][part] == pytest.approx(b["parts"][part], abs=1e-4)
            compared += len(pg.fragments)
        vector, provenance = await services_of(app).embedder.embed_query(current, query)
        near_pg = await vectors.nearest(database.pool, provenance, vector, 20, [],
                                        pgvector=True)
        near_np = await vectors.nearest(database.pool, provenance, vector, 20, [],
                                        pgvector=False)
        assert [r["id"] for r in near_pg] == [r["id"] for r in near_np], query
        for a, b in zip(near_pg, near_np, strict=True):
            assert a["cosine"] == pytest.approx(b["cosine"], abs=1e-5)
    assert compared >= 50
    index = vectors.index
    assert index.loads == 1 and index.size == 30  # every message, held once
    assert index.fetched <= 30  # searches never read the vectors again (those stored after
    # the index was warmed at start were added as they were stored)


async def numpy_search(client: Any, query: str, **body: Any) -> list[str]:
    found = await search(client, q=query, mode="hybrid", max_sessions=5, **body)
    assert found["mode"] == "hybrid", found.get("warning")
    return [f["session_id"] for f in found["fragments"]]


async def nearest_ids(app: Any, query: str) -> list[int]:
    """Every live message by cosine with ``query`` on the numpy index."""
    settings = await services_of(app).config.fresh()
    vector, provenance = await services_of(app).embedder.embed_query(settings, query)
    rows = await services_of(app).recall_vectors.nearest(services_of(app).database.pool,
                                                         provenance, vector,
                                                  100, [], pgvector=False)
    return [row["id"] for row in rows]


async def test_numpy_recall_follows_trash_restore_edit_and_delete(make_client: Any) -> None:
    client = await make_client(**SETTINGS, VECTOR_BACKEND="numpy",
                               CONVERSATION_MIN_SCORE_THRESHOLD=0.84)
    for day, (session, pairs) in enumerate(SESSIONS.items(), start=1):
        await store(client, session, pairs, day)
    app = client.server.app
    index = services_of(app).recall_vectors.index
    for _ in range(500):  # preloaded at start (empty yet): later vectors are added directly
        if index.loads:
            break
        await asyncio.sleep(0.01)
    await services_of(app).jobs.run_until_idle()
    query = "去日本关西玩的行程"  # semantic only: no keyword of it occurs anywhere
    assert await numpy_search(client, query) == ["trip"]

    resp = await client.delete("/api/conversations/trip", headers=HEADERS)
    assert resp.status == 200
    assert await numpy_search(client, query) == []
    resp = await client.post("/api/conversations/trip/restore", headers=HEADERS)
    assert resp.status == 200
    assert await numpy_search(client, query) == ["trip"]

    messages = (await (await client.get("/api/conversations/trip/messages",
                                        headers=HEADERS)).json())["messages"]
    first = messages[0]
    resp = await client.delete(f"/api/conversations/messages/{first['id']}", headers=HEADERS)
    assert resp.status == 200
    fragments = (await search(client, q=query, mode="hybrid"))["fragments"]
    assert all(m["content"] != first["content"] for f in fragments for m in f["messages"])
    resp = await client.post(f"/api/conversations/messages/{first['id']}/restore",
                             headers=HEADERS)
    assert resp.status == 200

    # An edit: the old vector stops counting at once; the job's new one is found.
    message_id = (await (await client.get("/api/conversations/cat/messages",
                                          headers=HEADERS)).json())["messages"][0]["id"]
    aurora = "北欧看北极光的旅行"
    assert message_id in await nearest_ids(app, "猫粮")
    resp = await client.put(f"/api/conversations/messages/{message_id}", headers=HEADERS,
                            json={"content": "明年想去冰岛看极光，需要准备什么"})
    assert resp.status == 200
    assert message_id not in await nearest_ids(app, "猫粮")
    assert message_id not in await nearest_ids(app, aurora)
    await services_of(app).jobs.run_until_idle()
    assert (await nearest_ids(app, aurora))[0] == message_id
    assert "cat" in await numpy_search(client, aurora)

    # Permanently deleted: gone, and the vectors leave the index at the next reconcile.
    assert (await client.delete("/api/conversations/trip", headers=HEADERS)).status == 200
    resp = await client.delete("/api/conversations/trip", params={"permanent": "true"},
                               headers=HEADERS)
    assert resp.status == 200
    assert "trip" not in await numpy_search(client, query)
    index.refresh_seconds = index.reconcile_seconds = 0.0
    await numpy_search(client, query)
    assert index.size == 8 - 4  # trip's four messages went with it
    assert index.loads == 1 and index.fetched == 0  # this process's own vectors, never read


async def test_an_out_of_date_background_serves_while_a_new_one_is_averaged_beside(
        client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pgvector background (the mean of thousands of vectors) is averaged again off the
    search's path: the search that finds it out of date uses the one it has."""
    app = client.server.app
    pool = services_of(app).database.pool
    vectors = services_of(app).recall_vectors
    provenance = services_of(app).embedder.configured_provenance(
        services_of(app).config.current())
    first = await vectors.background(pool, provenance, pgvector=True)
    assert first is not None and first.count == 30
    await store(client, "garden", [("阳台的番茄开花了", "记得每天浇水，晴天放到阳光下。")], 20)
    await services_of(app).jobs.run_until_idle()  # two more message vectors
    monkeypatch.setattr(recall_vectors, "BACKGROUND_TTL", 0.0)  # out of date from now on
    assert await vectors.background(pool, provenance, pgvector=True) is first
    await until(lambda: vectors._backgrounds[provenance][0] is not first)
    fresh = await vectors.background(pool, provenance, pgvector=True)
    assert fresh is not None and fresh.count == 32


async def test_nearest_with_facts_reads_what_nearest_then_facts_read(client: Any) -> None:
    """The one statement of a hybrid search's vector side gives the neighbours ``nearest``
    gives and the facts ``facts`` gives of them and of the best keyword candidates not among
    them, on both backends, sessions excluded or not."""
    app = client.server.app
    pool = services_of(app).database.pool
    vectors = services_of(app).recall_vectors
    current = services_of(app).config.current()
    every = [row["id"] for row in await nearest_rows(app, "anything", 100)]
    also = every[::-1][:12]  # "keyword candidates": the farthest first, some near ones too
    for query in ("去日本关西玩的行程", "running a marathon", "爸妈的健康"):
        vector, provenance = await services_of(app).embedder.embed_query(current, query)
        background = await vectors.background(pool, provenance, pgvector=True)
        assert background is not None
        against = [vector, background.vector]
        dots: dict[bool, dict[int, Any]] = {}
        for pgvector in (True, False):
            for excluded in ([], ["trip", "parents"]):
                near = await vectors.nearest(pool, provenance, vector, 8, excluded,
                                             pgvector=pgvector)
                ids = [r["id"] for r in near]
                looked_up = ids + [i for i in also if i not in ids][:5]
                facts = await vectors.facts(pool, provenance, looked_up, against,
                                            pgvector=pgvector, with_text=True, adjacent_best=6)
                together, both = await vectors.nearest_with_facts(
                    pool, provenance, vector, 8, excluded, pgvector=pgvector, also=also,
                    also_limit=5, vectors=against, with_text=True, adjacent_best=6)
                assert [r["id"] for r in together] == ids, (query, pgvector, excluded)
                for a, b in zip(together, near, strict=True):
                    assert a["session_id"] == b["session_id"]
                    assert a["cosine"] == pytest.approx(b["cosine"], abs=1e-6)
                assert both.keys() == facts.keys()
                for message_id, fact in facts.items():
                    other = both[message_id]
                    assert (other.prev_id, other.next_id, other.head, other.role) == (
                        fact.prev_id, fact.next_id, fact.head, fact.role), message_id
                    assert other.dots == pytest.approx(fact.dots, abs=1e-6)
                    dots.setdefault(pgvector, {})[message_id] = other.dots
        shared = dots[True].keys() & dots[False].keys()  # the numpy index's products agree
        assert len(shared) >= 8
        for message_id in shared:
            assert dots[False][message_id] == pytest.approx(dots[True][message_id], abs=1e-5)


async def nearest_rows(app: Any, query: str, k: int) -> list[dict[str, Any]]:
    settings = await services_of(app).config.fresh()
    vector, provenance = await services_of(app).embedder.embed_query(settings, query)
    return await services_of(app).recall_vectors.nearest(
        services_of(app).database.pool, provenance, vector, k, [], pgvector=True)


async def test_a_hybrid_search_takes_three_statements(client: Any,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Keywords (with a small collection's counts), the nearest messages with every
    candidate's facts, the fragments' windows: three round trips on either backend (five
    before: the counts, the keywords, the nearest, the facts, the windows)."""
    app = client.server.app
    current = services_of(app).config.current()
    statements: list[str] = []
    execute = aiopg.Cursor.execute

    async def counted(self: aiopg.Cursor, operation: str, *args: Any, **kwargs: Any) -> Any:
        statements.append(operation)
        return await execute(self, operation, *args, **kwargs)

    for backend in ("pgvector", "numpy"):
        settings = current.with_values({"VECTOR_BACKEND": backend})
        query = "京都的红叶和清水寺"  # keywords and meaning both
        await search_fragments(services_of(app).recall, query, settings=settings)  # warm
        await until(lambda: services_of(app).tasks.pending == 0)  # the index check
        with monkeypatch.context() as patched:
            # nothing out of date meanwhile: the background, the numpy index's newest row
            patched.setattr(recall_vectors, "BACKGROUND_TTL", 3600.0)
            patched.setattr(services_of(app).recall_vectors.index, "refresh_seconds", 3600.0)
            patched.setattr(aiopg.Cursor, "execute", counted)
            statements.clear()
            found = await search_fragments(services_of(app).recall, query, settings=settings)
        assert found.mode == "hybrid" and found.fragments
        assert len(statements) == 3, (backend, statements)
