"""The describe job: memories added through the API get the memory model's keywords and
questions in both languages, so a question in the other language finds them; asserted on the
rows and on what reaches the model. The fake model answers deterministically
(``tests/memory_model_fake.py``); it also answers with nothing usable, and not at all."""

from __future__ import annotations

from typing import Any

from pawwake.db.pool import cursor
from pawwake.memory.describe import BATCH, parse_descriptions
from pawwake.memory.model_terms import ModelTerms
from pawwake.services import services_of
from tests.gateway_support import chat_body
from tests.memory_model_fake import describing_responder
from tests.memory_support import create, rows

DESCRIBING = {"JOB_WORKERS": 0, "MEMORY_ENABLED": True, "MEMORY_DESCRIBE": True,
              "MEMORY_EXTRACT_INTERVAL": 0, "MEMORY_VECTOR_ENABLED": False}


def describe_requests(upstream: Any) -> list[Any]:
    return [r for r in upstream.requests if r.body and "find its long-term memories"
            in str(r.body["messages"][0]["content"])]


async def sent_for(client: Any, upstream: Any, text: str) -> str:
    response = await client.post("/v1/chat/completions", json=chat_body(text))
    assert response.status == 200
    await response.read()
    return "\n".join(str(m["content"]) for m in upstream.requests[-1].body["messages"])


async def test_memories_added_through_the_api_are_described_in_both_languages(
        make_client: Any, upstream: Any) -> None:
    upstream.responder = describing_responder
    client = await make_client(**DESCRIBING)
    jazz = await create(client, "用户喜欢听爵士乐")
    await create(client, "The user is allergic to peanuts")
    # Keyword-only search, before the model's words: the English question misses.
    assert "<retrieved_memories>" not in await sent_for(client, upstream,
                                                        "what music do I like")
    await services_of(client.server.app).jobs.run_until_idle()
    [asked] = describe_requests(upstream)
    assert asked.body["messages"][-1]["content"] == ("1. 用户喜欢听爵士乐\n"
                                                     "2. The user is allergic to peanuts")
    stored = {r["content"]: r for r in await rows(client)}
    row = stored["用户喜欢听爵士乐"]
    assert {"jazz", "music", "音乐"} <= set(row["model_keywords"])
    assert "What music do I like?" in row["model_questions"]
    assert {"jazz", "music"} <= set(row["search_terms"]) and row["described_at"] is not None
    assert "花生" in stored["The user is allergic to peanuts"]["model_keywords"]
    assert "用户喜欢听爵士乐" in await sent_for(client, upstream, "what music do I like")
    assert "The user is allergic to peanuts" in await sent_for(client, upstream,
                                                               "我对花生过敏吗？")
    assert "<retrieved_memories>" not in await sent_for(client, upstream,
                                                        "Explain how a fridge works")
    # Described once: another run asks nothing; new text is described again.
    await services_of(client.server.app).jobs.run_until_idle()
    assert len(describe_requests(upstream)) == 1
    response = await client.put(f"/api/memories/{jazz['id']}",
                                json={"content": "用户喜欢听摇滚乐"})
    assert response.status == 200, await response.text()
    await services_of(client.server.app).jobs.run_until_idle()
    assert len(describe_requests(upstream)) == 2
    [edited] = await rows(client, "id = %s", (jazz["id"],))
    assert "jazz" not in edited["model_keywords"] and "music" in edited["model_keywords"]


async def test_an_answer_with_nothing_usable_leaves_the_memory_as_it_was(
        make_client: Any, upstream: Any) -> None:
    client = await make_client(**DESCRIBING)
    await create(client, "用户喜欢听爵士乐")
    upstream.reply_text("Sure! Here are some keywords: jazz, music.")
    await services_of(client.server.app).jobs.run_until_idle()
    [row] = await rows(client)
    assert (row["model_keywords"], row["model_questions"]) == ([], [])
    assert row["described_at"] is not None  # not asked about again
    assert "爵士乐" in row["search_terms"] and "music" not in row["search_terms"]
    assert "用户喜欢听爵士乐" in await sent_for(client, upstream, "推荐几首爵士乐")
    await services_of(client.server.app).jobs.run_until_idle()
    assert len(describe_requests(upstream)) == 1


async def test_an_unreachable_model_is_asked_again_later(make_client: Any,
                                                         upstream: Any) -> None:
    client = await make_client(**DESCRIBING)
    await create(client, "用户喜欢听爵士乐")
    upstream.reply_error(500)
    await services_of(client.server.app).jobs.run_until_idle()
    [row] = await rows(client)
    assert row["described_at"] is None and row["model_keywords"] == []
    async with cursor(services_of(client.server.app).database.pool) as cur:
        await cur.execute("SELECT status, last_error FROM jobs WHERE kind = 'memory_describe'")
        [(status, error)] = await cur.fetchall()
    assert status == "pending" and "500" in error


async def test_describing_off_asks_the_model_nothing(make_client: Any, upstream: Any) -> None:
    upstream.responder = describing_responder
    client = await make_client(**{**DESCRIBING, "MEMORY_DESCRIBE": False})
    await create(client, "用户喜欢听爵士乐")
    await services_of(client.server.app).jobs.run_until_idle()
    assert describe_requests(upstream) == []
    [row] = await rows(client)
    assert row["described_at"] is None


def test_an_answer_is_one_object_per_memory() -> None:
    assert parse_descriptions('```json\n[{"keywords": ["狗", "dog"]}, 3]\n```', 2) == [
        ModelTerms(["狗", "dog"], []), ModelTerms()]
    assert parse_descriptions('[{"keywords": ["狗"]}]', 2) is None
    assert parse_descriptions("no", 1) is None
    assert BATCH == 20
