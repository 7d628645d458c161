"""The questions the memory model writes for a memory, one vector each: stored beside the
memory (kept in step by the database whichever code writes them), embedded by the memory
embedding job under the memories' provenance, and the nearest found on both vector backends.
The model is the deterministic fake (``tests/memory_model_fake.py``); it also answers with
nothing usable."""

from __future__ import annotations

from typing import Any

import pytest
from bs4 import BeautifulSoup

from pawwake.db import memory_questions as questions_db
from pawwake.db.memory_questions import QuestionMatches, Split
from pawwake.db.migrate import migrate
from pawwake.db.pool import cursor, fetch_all, transaction
from pawwake.memory.embedding_jobs import request_embedding
from pawwake.memory.search import questions, search_memories
from pawwake.search.background import reference_for
from pawwake.services import services_of
from tests.dashboard_support import PASSWORD, SECRET, login
from tests.embedding_server import FakeEmbeddings, serve_embeddings
from tests.memory_model_fake import describe, describing_responder
from tests.memory_support import create, pool, sql

DESCRIBED = {"JOB_WORKERS": 0, "MEMORY_ENABLED": True, "MEMORY_DESCRIBE": True,
             "MEMORY_EXTRACT_INTERVAL": 0}
EIGHT = ("用户的狗叫豆豆，是一只柯基", "The user is allergic to peanuts", "用户喜欢听爵士乐",
         "The user's sister Sarah lives in Toronto", "用户每天早上跑步五公里",
         "The user's birthday is on 12 July", "用户在一家游戏公司做后端开发",
         "The user is afraid of flying")


async def question_rows(client: Any) -> list[dict[str, Any]]:
    async with cursor(pool(client)) as cur:
        return await fetch_all(
            cur, "SELECT q.id, q.memory_id, q.content, e.model, e.dim FROM memory_questions q"
                 " LEFT JOIN memory_question_embeddings e ON e.question_id = q.id"
                 " ORDER BY q.id")


async def embed_now(client: Any) -> None:
    """What a writer of questions does (the describe job, extraction, imports)."""
    services = services_of(client.server.app)
    await request_embedding(services.memory_writes)
    await services.jobs.run_until_idle()


async def nearest(client: Any, text: str, backend: str, known: list[int] | None = None,
                  **values: Any) -> Any:
    services = services_of(client.server.app)
    settings = services.config.current().with_values({"VECTOR_BACKEND": backend, **values})
    provenance = await services.embedder.provenance(settings)
    query, _ = await services.embedder.embed_query(settings, text)
    return await services.vectors.questions.nearest(services.database, settings, provenance,
                                                    query, known=known or [], exclude=[])


async def test_written_questions_are_embedded_once_and_found_on_both_backends(
        make_client: Any, upstream: Any) -> None:
    upstream.responder = describing_responder
    client = await make_client(**DESCRIBED)
    ids = {text: (await create(client, text))["id"] for text in EIGHT}
    await services_of(client.server.app).jobs.run_until_idle()
    stored = await question_rows(client)
    assert {(r["memory_id"], r["content"]) for r in stored} == {
        (ids[text], question) for text in EIGHT for question in describe(text).questions}
    assert all(r["model"] is not None for r in stored)  # every question has its vector
    assert len({r["model"] for r in stored}) == 1
    for backend in ("pgvector", "numpy"):
        found = await nearest(client, "我能吃花生酱吗？", backend)
        assert found.nearest[0][0] == ids["The user is allergic to peanuts"], backend
        found = await nearest(client, "What breed is my dog?", backend,
                              known=[ids["用户喜欢听爵士乐"]])
        assert found.nearest[0][0] == ids["用户的狗叫豆豆，是一只柯基"], backend
        assert found.nearest[0][1] > 0.95  # the very question the model wrote
        assert ids["用户喜欢听爵士乐"] in found.best  # a known memory's best question
    # Idempotent: another run embeds nothing.
    await embed_now(client)
    async with cursor(pool(client)) as cur:
        [job] = await fetch_all(cur, "SELECT result FROM jobs WHERE kind = 'memory_embed'"
                                     " ORDER BY id DESC LIMIT 1")
    assert job["result"]["embedded"] == 0 and job["result"]["questions"]["embedded"] == 0


async def test_the_numpy_index_holds_the_newest_questions_within_its_bound(
        make_client: Any, upstream: Any) -> None:
    """``NUMPY_QUESTION_ROWS``: the numpy index holds only the newest questions (the older
    memories' questions are left to pgvector and to their keywords); 0 holds none and
    scans nothing."""
    upstream.responder = describing_responder
    client = await make_client(**DESCRIBED)
    for text in EIGHT:
        await create(client, text)
    await services_of(client.server.app).jobs.run_until_idle()
    stored = sorted(await question_rows(client), key=lambda r: r["id"])
    bound = len(stored) // 2
    held = {r["memory_id"] for r in stored[-bound:]}
    old = next(r for r in stored if r["memory_id"] not in held)
    new = stored[-1]
    index = services_of(client.server.app).vectors.questions.index
    found = await nearest(client, old["content"], "numpy", known=[old["memory_id"]],
                          NUMPY_QUESTION_ROWS=bound)
    assert old["memory_id"] not in found.best  # its questions are older than the bound's
    found = await nearest(client, new["content"], "numpy", NUMPY_QUESTION_ROWS=bound)
    assert found.nearest[0][0] == new["memory_id"] and index.size == bound
    found = await nearest(client, old["content"], "pgvector", NUMPY_QUESTION_ROWS=bound)
    assert found.nearest[0][0] == old["memory_id"]  # pgvector holds them all
    scans = index.scans
    found = await nearest(client, new["content"], "numpy", known=[new["memory_id"]],
                          NUMPY_QUESTION_ROWS=0)
    assert (found.nearest, found.best, index.scans) == ([], {}, scans)
    found = await nearest(client, old["content"], "numpy")  # the default holds them all
    assert found.nearest[0][0] == old["memory_id"] and index.size == len(stored)


async def test_an_answer_with_no_questions_leaves_nothing_to_embed(make_client: Any,
                                                                  upstream: Any) -> None:
    client = await make_client(**DESCRIBED)
    memory = await create(client, "The user is allergic to peanuts")
    upstream.reply_text('[{"keywords": ["peanut"], "questions": "not a list"}]')
    await services_of(client.server.app).jobs.run_until_idle()
    assert await question_rows(client) == []
    found = await nearest(client, "Can I eat a peanut butter sandwich?", "pgvector",
                          known=[memory["id"]])
    assert (found.nearest, found.best) == ([], {})
    found = await nearest(client, "Can I eat a peanut butter sandwich?", "numpy",
                          known=[memory["id"]])
    assert (found.nearest, found.best) == ([], {})


async def test_edits_archives_and_deletes_keep_the_questions_in_step(
        make_client: Any, upstream: Any) -> None:
    upstream.responder = describing_responder
    client = await make_client(**{**DESCRIBED, "MEMORY_DESCRIBE": False})
    jazz = (await create(client, "用户喜欢听爵士乐"))["id"]
    dog = (await create(client, "用户的狗叫豆豆，是一只柯基"))["id"]
    await sql(client, "UPDATE memories SET model_questions = %s WHERE id = %s",
              (["我喜欢什么音乐？", "What music do I like?"], jazz))
    await sql(client, "UPDATE memories SET model_questions = %s WHERE id = %s",
              (["What breed is my dog?"], dog))
    await embed_now(client)
    before = {r["content"]: r for r in await question_rows(client)}
    assert set(before) == {"我喜欢什么音乐？", "What music do I like?", "What breed is my dog?"}
    assert all(r["model"] for r in before.values())

    # A changed list: the question kept keeps its row and vector, the one gone goes.
    await sql(client, "UPDATE memories SET model_questions = %s WHERE id = %s",
              (["What music do I like?", "我喜欢听什么歌？"], jazz))
    after = {r["content"]: r for r in await question_rows(client) if r["memory_id"] == jazz}
    assert set(after) == {"What music do I like?", "我喜欢听什么歌？"}
    assert after["What music do I like?"] == before["What music do I like?"]
    assert after["我喜欢听什么歌？"]["model"] is None  # the job owes it a vector

    # Archived: kept (a restore brings it back), but pgvector's search leaves it out.
    assert (await client.delete(f"/api/memories/{dog}")).status == 200
    assert any(r["memory_id"] == dog for r in await question_rows(client))
    found = await nearest(client, "What breed is my dog?", "pgvector")
    assert dog not in found.best

    # New text: the model's questions described the old one and go with it.
    response = await client.put(f"/api/memories/{jazz}", json={"content": "用户喜欢听摇滚乐"})
    assert response.status == 200, await response.text()
    assert not any(r["memory_id"] == jazz for r in await question_rows(client))

    # Deleted for good: its questions and their vectors too.
    assert (await client.delete(f"/api/memories/{dog}?soft=false")).status == 200
    assert await question_rows(client) == []
    async with cursor(pool(client)) as cur:
        assert await fetch_all(cur, "SELECT * FROM memory_question_embeddings") == []


async def cues_on_page(client: Any, memory_id: int) -> tuple[str, list[str], list[str]]:
    page = BeautifulSoup(await (await client.get(f"/dashboard/memories/{memory_id}")).text(),
                         "html.parser")
    card = page.select_one("[data-memory-cues]")
    assert card is not None
    return (str(card["data-memory-cues"]),
            [node.text for node in card.select("[data-cue-keyword]")],
            [node.text for node in card.select("[data-cue-question]")])


async def test_a_memory_page_shows_what_the_model_wrote_to_find_it(make_client: Any,
                                                                  upstream: Any) -> None:
    upstream.responder = describing_responder
    client = await make_client(**DESCRIBED, DASHBOARD_PASSWORD=PASSWORD, SESSION_SECRET=SECRET)
    assert (await login(client)).status == 303
    peanuts = (await create(client, "The user is allergic to peanuts"))["id"]
    assert (await cues_on_page(client, peanuts))[0] == "pending"  # the job has not run yet
    await services_of(client.server.app).jobs.run_until_idle()
    written = describe("The user is allergic to peanuts")
    state, keywords, asked = await cues_on_page(client, peanuts)
    assert (state, asked) == ("written", list(written.questions)) and asked
    assert keywords == list(written.keywords)

    upstream.reply_text('[{"keywords": [], "questions": []}]')  # described, nothing usable
    sky = (await create(client, "用户喜欢看星星"))["id"]
    await services_of(client.server.app).jobs.run_until_idle()
    assert await cues_on_page(client, sky) == ("none", [], [])


async def test_the_migration_gives_an_existing_database_its_questions(make_client: Any
                                                                     ) -> None:
    client = await make_client()
    # The database as it was before: no question tables, memories with written questions.
    await sql(client, "DROP TABLE memory_question_embeddings, memory_questions;"
                      " DROP FUNCTION pawwake_internal.memory_questions_follow() CASCADE;"
                      " DELETE FROM schema_migrations WHERE name = '0026_memory_questions.sql'")
    memory = (await create(client, "用户喜欢听爵士乐"))["id"]
    await sql(client, "UPDATE memories SET model_questions = %s WHERE id = %s",
              (["我喜欢什么音乐？", "What music do I like?", "What music do I like?"], memory))
    async with transaction(pool(client)) as cur:
        await migrate(cur)
    assert sorted(r["content"] for r in await question_rows(client)) == [
        "What music do I like?", "我喜欢什么音乐？"]
    await sql(client, "UPDATE memories SET model_questions = '{}' WHERE id = %s", (memory,))
    assert await question_rows(client) == []  # and the trigger follows from now on


@pytest.fixture
async def fake(aiohttp_server: Any) -> FakeEmbeddings:
    return await serve_embeddings(aiohttp_server)


async def test_a_rebuild_for_another_model_embeds_the_questions_again(
        make_client: Any, fake: FakeEmbeddings) -> None:
    client = await make_client(JOB_WORKERS=0, EMBEDDING_API_KEY="sk-embed-0123456789",
                               EMBEDDING_BASE_URL=fake.base_url, EMBEDDING_MODEL="fake-a",
                               EMBEDDING_DIM=16)
    memory = (await create(client, "用户喜欢听爵士乐"))["id"]
    await sql(client, "UPDATE memories SET model_questions = %s WHERE id = %s",
              (["What music do I like?"], memory))
    app = client.server.app
    await embed_now(client)
    assert [r["model"] for r in await question_rows(client)] == ["fake-a"]
    await services_of(app).config.update({"EMBEDDING_MODEL": "fake-b"})
    confirmed = await client.post("/api/admin/backfill-memory-embeddings",
                                  json={"confirm_rebuild": True})
    assert confirmed.status == 202
    await services_of(app).jobs.run_until_idle()
    assert [r["model"] for r in await question_rows(client)] == ["fake-b"]


@pytest.mark.parametrize("backend", ["pgvector", "numpy"])
async def test_a_search_weighs_the_best_written_question(make_client: Any, upstream: Any,
                                                         backend: str) -> None:
    upstream.responder = describing_responder
    client = await make_client(**DESCRIBED, VECTOR_BACKEND=backend)
    ids = {text: (await create(client, text))["id"] for text in EIGHT}
    undescribed = (await create(client, "用户的猫叫咪咪"))["id"]
    await services_of(client.server.app).jobs.run_until_idle()
    await sql(client, "UPDATE memories SET model_questions = '{}' WHERE id = %s",
              (undescribed,))
    services = services_of(client.server.app)
    settings = services.config.current()
    outcome = await search_memories(services.memory_search, "Can I eat a peanut butter sandwich?",
                                    settings=settings, touch=False)
    by_id = {r.id: r for r in outcome.results}
    peanuts = by_id[ids["The user is allergic to peanuts"]]
    assert peanuts.evidence is not None and peanuts.evidence.question is not None
    assert peanuts.evidence.question > questions.ADMIT_STANDING
    assert peanuts.relevance >= outcome.floor
    outcome = await search_memories(services.memory_search, "我的猫叫什么名字？",
                                    settings=settings, touch=False)
    cat = {r.id: r for r in outcome.results}[undescribed]
    assert cat.evidence is not None and cat.evidence.question is None  # no question: as before


def test_a_memory_is_admitted_by_a_question_that_stands_out() -> None:
    matches = QuestionMatches(nearest=[(7, 0.9), (3, 0.88), (5, 0.8)])
    stands = {7: 5.0, 3: questions.ADMIT_STANDING, 5: 1.0}
    assert questions.admitted(matches, stands, present={7}) == [3]


@pytest.mark.parametrize("backend", ["pgvector", "numpy"])
async def test_a_question_stands_in_its_own_language(make_client: Any, upstream: Any,
                                                     backend: str) -> None:
    """A Chinese question about an English memory: the English question the model wrote
    counts against the English background (4.0 deviations for the local model), not only
    the Chinese one against the Chinese background (2.5: every Chinese text is near a
    Chinese query)."""
    upstream.responder = describing_responder
    client = await make_client(**DESCRIBED, VECTOR_BACKEND=backend)
    ids = {text: (await create(client, text))["id"] for text in EIGHT}
    await services_of(client.server.app).jobs.run_until_idle()
    services = services_of(client.server.app)
    settings = services.config.current()
    peanuts = ids["The user is allergic to peanuts"]
    provenance = await services.embedder.provenance(settings)
    reference = await reference_for(services.references, services.embedder, settings,
                                    provenance)
    query, _ = await services.embedder.embed_query(settings, "我能吃花生酱吗？")
    found = await services.vectors.questions.nearest(
        services.database, settings, provenance, query, known=[peanuts], exclude=[],
        split=Split(reference.direction, reference.midpoint))
    sides = found.sides[peanuts]
    assert set(sides) == {"zh", "en"}  # "我对什么过敏…" and "What am I allergic to…"
    assert sides["zh"] > sides["en"] and max(sides.values()) == found.best[peanuts]
    background = reference.background(query)
    assert background.standing(sides["en"], "en") > background.standing(sides["zh"], "zh")
    outcome = await search_memories(services.memory_search, "我能吃花生酱吗？",
                                    settings=settings, touch=False)
    result = {r.id: r for r in outcome.results}[peanuts]
    assert result.evidence is not None and result.evidence.question is not None
    assert result.evidence.question > questions.ADMIT_STANDING  # 2.5 by the Chinese side


async def test_read_question_vectors_give_the_statements_cosines(make_client: Any,
                                                                 upstream: Any) -> None:
    """The keyword candidates' question vectors, read before the query's vector exists,
    give each memory the best question cosines (overall and per language side) that the
    nearest questions' statement gives the memories it is asked about."""
    upstream.responder = describing_responder
    client = await make_client(**DESCRIBED, VECTOR_BACKEND="pgvector")
    ids = [(await create(client, text))["id"] for text in EIGHT]
    await services_of(client.server.app).jobs.run_until_idle()
    services = services_of(client.server.app)
    settings = services.config.current()
    provenance = await services.embedder.provenance(settings)
    reference = await reference_for(services.references, services.embedder, settings,
                                    provenance)
    split = Split(reference.direction, reference.midpoint)
    query, _ = await services.embedder.embed_query(settings, "我能吃花生酱吗？")
    asked = await services.vectors.questions.nearest(
        services.database, settings, provenance, query, known=ids, exclude=[], split=split,
        k=1)
    found = await services.vectors.questions.nearest(
        services.database, settings, provenance, query, known=ids, exclude=[], split=split,
        k=1, cosines_of=[])
    assert set(found.best) < set(ids)  # only the nearest question's memory
    async with cursor(pool(client)) as cur:
        read = questions.ReadQuestions.of(ids, await questions_db.question_vectors_of(
            cur, provenance, ids))
    read.count_into(found, query, split)
    assert set(found.best) == set(asked.best) == set(ids)
    for memory_id in ids:
        assert found.best[memory_id] == pytest.approx(asked.best[memory_id], abs=1e-5)
        assert set(found.sides[memory_id]) == set(asked.sides[memory_id])
        for side, cosine in asked.sides[memory_id].items():
            assert found.sides[memory_id][side] == pytest.approx(cosine, abs=1e-5)
