"""Keyword rules: English normalisation, contraction stopwords, one-character Chinese words,
the same rules on both sides, and the re-index of rows stored under the old rules."""

from __future__ import annotations

from typing import Any

import pytest

from pawwake.db.migrate import MIGRATIONS_DIR
from pawwake.memory.search import search_memories
from pawwake.services import services_of
from pawwake.text import english, tokens
from tests.dashboard_memories_support import post, rows, signed_in, soup
from tests.memory_support import create, row, sql

KEYWORDS = {"EMBEDDING_PROVIDER": "local", "JOB_WORKERS": 0, "MEMORY_VECTOR_ENABLED": False}


@pytest.mark.parametrize(("query_word", "stored_word"), [
    ("dog's", "dog"), ("dog", "dogs'"), ("name", "named"), ("peanut", "peanuts"),
    ("Allergies", "allergies"), ("running", "runs"), ("dog\u2019s", "dog"),
    ("grow", "grew"), ("eat", "ate"), ("written", "writes"), ("bought", "buy"),
])
def test_english_forms_meet(query_word: str, stored_word: str) -> None:
    assert english.terms(query_word) == english.terms(stored_word) != []


@pytest.mark.parametrize("text", ["what's", "What's", "it's", "don't", "I'm", "you've",
                                  "they'll", "we'd", "can't", "won't", "the", "is"])
def test_contractions_and_stopwords_are_not_keywords(text: str) -> None:
    assert english.terms(text) == []


def test_ambiguous_and_light_irregular_forms_stay_themselves() -> None:
    assert english.terms("left") == ["left"]  # the side, not "leave"
    assert english.terms("went") != english.terms("go")  # a light verb, little meaning


def test_query_and_index_sides_use_the_same_rules() -> None:
    assert tokens.query_keywords("What's my dog's name?") == ["dog", "name"]
    memory = tokens.index_terms("The user's dog is a golden retriever named Biscuit")
    assert {"dog", "name", "biscuit"} <= set(memory)
    assert "what" not in tokens.query_keywords("What's my cat called?")


@pytest.mark.parametrize(("question", "keywords"), [
    ("我的生日是几月几号？", ["生日"]),  # 几月, 几号 outweighed 生日 three to one
    ("我几点坐火车上班？", ["坐火车", "上班", "火车"]),
    ("豆豆最近好吗", ["豆豆"]),
    ("Any tips for my fear of flights before the trip?", ["fear", "flight", "trip"]),
    ("几点了？", ["几点"]),  # nothing but the frame: the frame is searched
])
def test_a_questions_frame_words_are_not_its_keywords(question: str,
                                                      keywords: list[str]) -> None:
    tokens.load()
    assert tokens.query_keywords(question) == keywords


def test_one_character_words_are_index_terms() -> None:
    assert "猫" in tokens.index_terms("我的猫叫小橘")
    assert "狗" in tokens.index_terms("我的狗叫旺财")
    assert "的" not in tokens.index_terms("我的狗叫旺财")  # stopword characters stay out


async def keyword_ids(app: Any, query: str) -> list[int]:
    settings = (await services_of(app).config.fresh()).with_values({"MEMORY_VECTOR_ENABLED": False})
    outcome = await search_memories(services_of(app).memory_search, query, limit=5, settings=settings)
    assert outcome.mode == "keyword"
    return [r.id for r in outcome.results]


async def test_keyword_search_matches_normalised_english(make_client: Any) -> None:
    client = await make_client(**KEYWORDS)
    app = client.server.app
    dog = (await create(client, "The user's dog is a golden retriever named Biscuit"))["id"]
    nuts = (await create(client, "I am allergic to peanuts"))["id"]
    await create(client, "The user bought a new kettle")
    assert (await keyword_ids(app, "What is my dog's name"))[0] == dog
    assert (await keyword_ids(app, "peanut"))[0] == nuts
    assert await keyword_ids(app, "what's") == []


@pytest.mark.parametrize(("query", "expected"), [("猫", "我的猫叫小橘"), ("狗", "我的狗叫旺财")])
async def test_one_character_query_finds_the_word_containing_it(
        make_client: Any, query: str, expected: str) -> None:
    client = await make_client(**KEYWORDS)
    app = client.server.app
    ids = {text: (await create(client, text))["id"]
           for text in ("我的猫叫小橘", "我的狗叫旺财", "今天下雨了")}
    assert await keyword_ids(app, query) == [ids[expected]]


@pytest.mark.parametrize(("query", "expected"), [("猫", "我的猫叫小橘"), ("狗", "我的狗叫旺财")])
async def test_dashboard_filter_finds_one_character_words(make_client: Any, query: str,
                                                          expected: str) -> None:
    client = await signed_in(make_client, MEMORY_VECTOR_ENABLED=False)
    for text in ("我的猫叫小橘", "我的狗叫旺财", "今天下雨了"):
        await create(client, text)
    response = await post(client, "/dashboard/memories/search",
                          {"q": query, "mode": "keyword", "status": "active", "layer": ""})
    assert response.status == 200
    assert [r["content"] for r in rows(soup(await response.text()))] == [expected]


async def test_reindex_migration_rewrites_rows_stored_with_the_old_rules(
        make_client: Any) -> None:
    client = await make_client(**{**KEYWORDS, "CONVERSATION_RECALL_ENABLED": True})
    app = client.server.app
    cat = (await create(client, "我的猫叫小橘"))["id"]
    dog = (await create(client, "The user's dog is named Biscuit"))["id"]
    # What the old rules stored: whole jieba words, English words unstemmed with "'s" kept.
    await sql(client, "UPDATE memories SET search_terms = %s WHERE id = %s",
              (["猫叫", "小橘"], cat))
    await sql(client, "UPDATE memories SET search_terms = %s WHERE id = %s",
              (["user's", "dog", "named", "biscuit"], dog))
    await sql(client, "INSERT INTO conversations (session_id, role, content, search_terms)"
                      " VALUES ('s1', 'user', '我的狗叫旺财', %s),"
                      " ('s1', 'assistant', 'not indexed yet', NULL)", (["狗叫", "旺财"],))
    assert await keyword_ids(app, "猫") == []
    assert await keyword_ids(app, "name") == []

    migration = MIGRATIONS_DIR / "0013_keyword_rules_v2.sql"
    await sql(client, "DELETE FROM jobs WHERE kind = 'keyword_reindex'")
    await sql(client, migration.read_text(encoding="utf-8"))
    await sql(client, migration.read_text(encoding="utf-8"))  # one pending job, not two
    await services_of(app).jobs.run_until_idle()

    assert await keyword_ids(app, "猫") == [cat]
    assert await keyword_ids(app, "name") == [dog]
    assert "猫" in (await row(client, cat))["search_terms"]
    database = services_of(app).database
    async with database.pool.acquire() as conn, conn.cursor() as cur:
        await cur.execute("SELECT content, search_terms FROM conversations ORDER BY id")
        messages = dict(await cur.fetchall())
        await cur.execute("SELECT result FROM jobs WHERE kind = 'keyword_reindex'")
        results = [r[0] for r in await cur.fetchall()]
    assert len(results) == 1
    result = results[0]
    assert "狗" in messages["我的狗叫旺财"]
    assert messages["not indexed yet"] is None  # left to the pending indexer
    assert result["memories"] == 2 and result["conversations"] == 1


def test_a_pronoun_is_not_glued_to_its_verb() -> None:
    # jieba's HMM made "我开" and "我想养" one unknown word, so "车" and "狗" were dropped.
    assert "车" in tokens.query_keywords("我开什么车")
    assert {"养", "狗"} <= set(tokens.query_keywords("我想养什么狗"))
    assert "做后" not in tokens.index_terms("用户在杭州的一家游戏公司做后端开发")


async def test_rules_v3_reindex_drops_guessed_words(make_client: Any) -> None:
    client = await make_client(**KEYWORDS)
    app = client.server.app
    car = (await create(client, "用户的车是一辆白色的比亚迪汉"))["id"]
    await create(client, "用户买了一本书")
    await sql(client, "UPDATE memories SET search_terms = %s WHERE id = %s",
              (["一辆", "白色", "比亚迪"], car))  # stored by rules without single characters
    assert car not in await keyword_ids(app, "我开什么车")

    migration = MIGRATIONS_DIR / "0017_keyword_rules_v3.sql"
    await sql(client, "DELETE FROM jobs WHERE kind = 'keyword_reindex'")
    await sql(client, migration.read_text(encoding="utf-8"))
    await services_of(app).jobs.run_until_idle()

    assert (await keyword_ids(app, "我开什么车"))[0] == car
