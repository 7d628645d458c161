"""Semantic admission by rank and cross-language search with the local model: the failure
classes the seed's absolute cosine threshold had, each with near-miss distractors around."""

from __future__ import annotations

from typing import Any

import pytest

from pawwake.memory.embedding_jobs import request_embedding
from pawwake.memory.extraction.job import candidate_memories, similar_memory_ids
from pawwake.memory.search import search_memories
from pawwake.services import services_of
from tests.memory_support import create

LOCAL = {"EMBEDDING_PROVIDER": "local", "JOB_WORKERS": 0, "MEMORY_ENABLED": True}
MEMORIES = (
    "The user's dog is a golden retriever named Biscuit",
    "The user named their sourdough starter Gerald",
    "The user plays the cello in a community orchestra",
    "The user plays tennis with a colleague on Fridays",
    "The user gets migraines when they skip breakfast",
    "The user eats breakfast at a diner near the office",
    "用户养了一只橘猫，名字叫小橘",
    "用户的表妹名字叫小雨，在读高中",
    "I am allergic to peanuts",
    "My nephew is allergic to cats",
    "用户每天早上跑步五公里",
    "The user moved to Toronto in 2021 for a new job",
)


async def filled(make_client: Any) -> tuple[Any, dict[str, int]]:
    client = await make_client(**LOCAL)
    app = client.server.app
    ids = {text: (await create(client, text))["id"] for text in MEMORIES}
    await request_embedding(services_of(app).memory_writes)
    await services_of(app).jobs.run_until_idle()
    return app, ids


@pytest.mark.parametrize(("query", "expected"), [
    ("What is my dog's name", "The user's dog is a golden retriever named Biscuit"),
    ("musical instrument", "The user plays the cello in a community orchestra"),
    ("headache triggers", "The user gets migraines when they skip breakfast"),
])
async def test_the_nearest_neighbour_enters_the_pool_and_wins(make_client: Any, query: str,
                                                             expected: str) -> None:
    app, ids = await filled(make_client)
    outcome = await search_memories(services_of(app).memory_search, query, limit=5,
                                    settings=services_of(app).config.current())
    assert outcome.mode == "hybrid"
    assert outcome.threshold is not None and outcome.threshold < 0.87  # a noise floor now
    assert [r.id for r in outcome.results][:1] == [ids[expected]], [
        (r.memory["content"], round(r.score, 3)) for r in outcome.results]
    top = outcome.results[0]
    assert top.parts["semantic"] > 0.5
    assert top.similarity is not None and top.similarity < 0.87  # the seed's rule missed it


@pytest.mark.parametrize(("query", "expected"), [
    ("What's my cat called?", "用户养了一只橘猫，名字叫小橘"),
    ("花生过敏", "I am allergic to peanuts"),
])
async def test_cross_language_queries_find_the_memory(make_client: Any, query: str,
                                                      expected: str) -> None:
    """Through the same path as any query. The small local model ranks a Chinese query's
    English answer below Chinese texts of any meaning (it ranks "I am allergic to peanuts" 4th
    of these twelve for "花生过敏"), so the figure is "found", not "first"; the dev set reports
    both directions."""
    app, ids = await filled(make_client)
    outcome = await search_memories(services_of(app).memory_search, query, limit=5,
                                    settings=services_of(app).config.current())
    assert outcome.mode == "hybrid"
    assert ids[expected] in [r.id for r in outcome.results]


async def test_a_literal_match_still_wins_over_a_semantic_neighbour(make_client: Any) -> None:
    app, ids = await filled(make_client)
    outcome = await search_memories(services_of(app).memory_search, "sourdough starter", limit=5,
                                    settings=services_of(app).config.current())
    assert outcome.results[0].id == ids["The user named their sourdough starter Gerald"]
    assert outcome.results[0].parts["keyword"] == 1.0


async def test_the_api_response_keeps_mode_parts_and_threshold(make_client: Any) -> None:
    client = await make_client(**LOCAL)
    for text in MEMORIES:
        await create(client, text)
    await request_embedding(services_of(client.server.app).memory_writes)
    await services_of(client.server.app).jobs.run_until_idle()
    response = await client.post("/api/memories/search", json={"q": "musical instrument"})
    assert response.status == 200
    body = await response.json()
    assert body["mode"] == "hybrid" and body["threshold"] == pytest.approx(0.78)
    top = body["results"][0]
    assert top["content"] == "The user plays the cello in a community orchestra"
    assert set(top["score_parts"]) == {"keyword", "semantic", "importance", "recency"}
    assert 0 < top["relevance"] <= 1


async def test_extraction_candidates_come_from_vectors_when_they_are_on(
        make_client: Any) -> None:
    client = await make_client(**LOCAL)
    app = client.server.app
    cello = (await create(client, "The user plays the cello in a community orchestra"))["id"]
    for text in MEMORIES:  # newer rows, so the cello is not among the latest ten
        if "cello" not in text:
            await create(client, text)
    await request_embedding(services_of(app).memory_writes)
    await services_of(app).jobs.run_until_idle()
    dialogue = "User: what music do I make?"
    settings = await services_of(app).config.fresh()
    database = services_of(app).database
    async with database.pool.acquire() as conn, conn.cursor() as cur:
        by_keywords = await candidate_memories(cur, dialogue, None)
        similar = await similar_memory_ids(services_of(app).memory_search, settings, dialogue)
        by_vectors = await candidate_memories(cur, dialogue, similar)
    assert cello not in {row["id"] for row in by_keywords}  # no shared word
    assert similar is not None and similar[0] == cello
    assert cello in {row["id"] for row in by_vectors}
    off = settings.with_values({"MEMORY_VECTOR_ENABLED": False})
    assert await similar_memory_ids(services_of(app).memory_search, off, dialogue) is None
