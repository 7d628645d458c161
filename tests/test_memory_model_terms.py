"""The memory model's keywords and questions (both languages): written when it extracts or
scores a memory, cut into the index terms, and what reaches the model afterwards. The fake
model answers deterministically; it also answers with nothing usable."""

from __future__ import annotations

from typing import Any

from pawwake.db.pool import cursor, fetch_all, fetch_one
from pawwake.memory.model_terms import ModelTerms, searchable_text
from pawwake.services import services_of
from tests.gateway_support import chat_body
from tests.test_extraction import model_says, store_round

MEMORY_ON = {"JOB_WORKERS": 0, "MEMORY_ENABLED": True, "MEMORY_MODEL": "test/memory",
             "MEMORY_EXTRACT_INTERVAL": 1, "MEMORY_VECTOR_ENABLED": False}
JAZZ = {"content": "用户喜欢听爵士乐", "importance": 6, "action": "new", "candidate_id": None,
        "remind_at": None, "source_refs": [1]}


async def stored(app: Any) -> list[dict[str, Any]]:
    async with cursor(services_of(app).database.pool) as cur:
        return await fetch_all(cur, "SELECT content, model_keywords, model_questions,"
                                    " search_terms FROM memories ORDER BY id")


async def learn(client: Any, upstream: Any, item: dict[str, Any]) -> dict[str, Any]:
    app = client.server.app
    assert await store_round(app, "我最近一直在听爵士乐", "爵士乐很适合放松！") is not None
    model_says(upstream, [item])
    await services_of(app).jobs.run_until_idle()
    [row] = await stored(app)
    return row


async def injected_for(client: Any, upstream: Any, text: str) -> str:
    response = await client.post("/v1/chat/completions", json=chat_body(text))
    assert response.status == 200
    await response.read()
    return "\n".join(str(m["content"]) for m in upstream.requests[-1].body["messages"])


async def test_extraction_keeps_the_models_keywords_and_questions(make_client: Any,
                                                                  upstream: Any) -> None:
    client = await make_client(**MEMORY_ON)
    row = await learn(client, upstream, {
        **JAZZ, "keywords": ["爵士乐", "jazz", "音乐", "music", "jazz"],
        "questions": ["我喜欢什么音乐？", "What music do I like?"]})
    assert row["model_keywords"] == ["爵士乐", "jazz", "音乐", "music"]  # repeats dropped
    assert row["model_questions"] == ["我喜欢什么音乐？", "What music do I like?"]
    assert {"jazz", "music", "音乐"} <= set(row["search_terms"])
    prompt = upstream.requests[-1].body["messages"][0]["content"]
    assert '"keywords"' in prompt and '"questions"' in prompt
    # The English question now meets the Chinese memory (keyword-only search: no vectors).
    assert "用户喜欢听爵士乐" in await injected_for(client, upstream, "what music do I like")
    assert "<retrieved_memories>" not in await injected_for(client, upstream,
                                                            "Explain how a fridge works")


async def test_an_answer_without_usable_keywords_stores_the_memory_as_it_is(
        make_client: Any, upstream: Any) -> None:
    client = await make_client(**MEMORY_ON)
    row = await learn(client, upstream, {**JAZZ, "keywords": "jazz, music",
                                         "questions": [42, "", "x" * 500, None]})
    assert (row["model_keywords"], row["model_questions"]) == ([], [])
    assert "爵士乐" in row["search_terms"] and "music" not in row["search_terms"]
    assert "用户喜欢听爵士乐" in await injected_for(client, upstream, "推荐几首爵士乐")
    assert "<retrieved_memories>" not in await injected_for(client, upstream,
                                                            "what music do I like")


async def test_import_scoring_writes_keywords_too(make_client: Any, upstream: Any) -> None:
    client = await make_client(**MEMORY_ON)
    upstream.reply_text('[{"importance": 8, "keywords": ["peanut", "花生", "allergy", "过敏"],'
                        ' "questions": ["我对什么过敏？"]}, 4]')
    response = await client.post("/api/memories/import/text", json={
        "text": "The user is allergic to peanuts\nThe user had noodles today"})
    assert response.status == 200, await response.text()
    assert (await response.json())["scored"] == 2
    async with cursor(services_of(client.server.app).database.pool) as cur:
        rows = await fetch_all(cur, "SELECT content, importance, model_keywords,"
                                    " model_questions FROM memories ORDER BY id")
    assert [(r["content"], r["importance"], r["model_keywords"], r["model_questions"])
            for r in rows] == [
        ("The user is allergic to peanuts", 8, ["peanut", "花生", "allergy", "过敏"],
         ["我对什么过敏？"]),
        ("The user had noodles today", 4, [], [])]
    assert "The user is allergic to peanuts" in await injected_for(client, upstream,
                                                                   "我对什么东西过敏？")


async def test_a_reindex_cuts_the_models_words_again(make_client: Any, upstream: Any) -> None:
    client = await make_client(**MEMORY_ON)
    app = client.server.app
    await learn(client, upstream, {**JAZZ, "keywords": ["music"], "questions": []})
    pool = services_of(app).database.pool
    async with cursor(pool) as cur:
        await cur.execute("UPDATE memories SET search_terms = '{}'")
        await cur.execute("INSERT INTO jobs (kind, payload) VALUES ('keyword_reindex', '{}')")
    await services_of(app).jobs.run_until_idle()
    async with cursor(pool) as cur:
        row = await fetch_one(cur, "SELECT search_terms FROM memories")
    assert row is not None and {"爵士乐", "music"} <= set(row["search_terms"])


async def test_editing_the_text_drops_what_the_model_wrote_for_the_old_one(
        make_client: Any, upstream: Any) -> None:
    client = await make_client(**MEMORY_ON)
    await learn(client, upstream, {**JAZZ, "keywords": ["music"], "questions": ["Q?"]})
    [memory] = (await (await client.get("/api/memories")).json())["memories"]
    response = await client.put(f"/api/memories/{memory['id']}",
                                  json={"content": "用户喜欢听摇滚乐"})
    assert response.status == 200, await response.text()
    [row] = await stored(client.server.app)
    assert (row["model_keywords"], row["model_questions"]) == ([], [])
    assert "music" not in row["search_terms"]


def test_model_terms_are_bounded_strings() -> None:
    terms = ModelTerms.of({"keywords": [" 狗  ", "dog", 3, "dog", "x" * 41] + ["k"] * 30,
                           "questions": ["What is my dog's name?"] * 2})
    assert terms.keywords[:3] == ["狗", "dog", "k"] and len(terms.keywords) == 3
    assert terms.questions == ["What is my dog's name?"]
    assert ModelTerms.of("nonsense") == ModelTerms()
    assert searchable_text("a", ["b"], ["c?"]) == "a\nb\nc?"
    assert searchable_text("a") == "a"
