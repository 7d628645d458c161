"""A memory just written is found by meaning at once: the write embeds its rows itself (within
a bounded wait) and the durable embedding job stays queued as the fallback."""

from __future__ import annotations

from typing import Any

import pytest

from pawwake.db.pool import cursor, execute, fetch_all
from pawwake.memory import fresh_vectors
from pawwake.services import services_of
from tests import retrieval_devset
from tests.conditions import until
from tests.dashboard_memories_support import post, signed_in
from tests.embedding_server import FakeEmbeddings, serve_embeddings
from tests.memory_support import create

LOCAL = {"EMBEDDING_PROVIDER": "local", "JOB_WORKERS": 0}
BURST = 90


@pytest.fixture
async def fake(aiohttp_server: Any) -> FakeEmbeddings:
    return await serve_embeddings(aiohttp_server)


def api_embeddings(fake: FakeEmbeddings) -> dict[str, Any]:
    return {"EMBEDDING_PROVIDER": "api", "EMBEDDING_API_KEY": "sk-embed-0123456789",
            "EMBEDDING_BASE_URL": fake.base_url, "EMBEDDING_MODEL": "fake-a",
            "EMBEDDING_DIM": 16, "JOB_WORKERS": 0}


async def query_rows(client: Any, sql: str, params: Any = None) -> list[dict[str, Any]]:
    async with cursor(services_of(client.server.app).database.pool) as cur:
        return await fetch_all(cur, sql, params)


async def without_vector(client: Any) -> list[int]:
    rows = await query_rows(client, "SELECT id FROM memories m WHERE NOT EXISTS"
                                    " (SELECT 1 FROM memory_embeddings e WHERE e.memory_id = m.id)"
                                    " ORDER BY id")
    return [row["id"] for row in rows]


async def written(client: Any) -> None:
    """Wait for the vectors a write started (on a loaded host they may outlast its bounded
    wait); the job does not run meanwhile (no workers), so what is there the write made."""
    await until(lambda: services_of(client.server.app).tasks.pending == 0)


async def embed_jobs(client: Any) -> list[dict[str, Any]]:
    return await query_rows(client, "SELECT status, run_after > now() AS later FROM jobs"
                                    " WHERE kind = 'memory_embed' ORDER BY id")


async def found(client: Any, query: str) -> list[int]:
    response = await client.post("/api/memories/search", json={"q": query, "limit": 5})
    assert response.status == 200, await response.text()
    return [result["id"] for result in (await response.json())["results"]]


async def run_the_job_now(client: Any) -> int:
    """What the runner does once the fallback job is due (here at once)."""
    async with cursor(services_of(client.server.app).database.pool) as cur:
        await execute(cur, "UPDATE jobs SET run_after = now() WHERE status = 'pending'")
    return await services_of(client.server.app).jobs.run_until_idle()


@pytest.mark.parametrize("backend", ["pgvector", "numpy"])
async def test_a_burst_of_creates_is_found_by_meaning_right_away(make_client: Any,
                                                                 backend: str) -> None:
    """90 creates, then paraphrases of them (few or no shared keywords): each search right
    after the creates (their own embedding done, the job not run) finds what it finds once
    the job has run too. Before, 5 of 57 were found right away, 53 after the job."""
    client = await make_client(**LOCAL, VECTOR_BACKEND=backend)
    devset = retrieval_devset.load()
    ids = [(await create(client, text))["id"] for text in devset.memories[:BURST]]
    await written(client)
    questions = [q for q in devset.queries
                 if q.category in ("paraphrase", "cross") and q.target < BURST]
    assert len(questions) >= 20

    assert await without_vector(client) == []
    right_away = {q.text: ids[q.target] in await found(client, q.text) for q in questions}

    assert [job["status"] for job in await embed_jobs(client)] == ["pending"]  # the fallback
    assert await run_the_job_now(client) == 1
    settled = {q.text: ids[q.target] in await found(client, q.text) for q in questions}
    assert right_away == settled
    assert sum(settled.values()) >= len(questions) // 2  # the vectors really do the finding


async def test_an_edit_is_found_by_its_new_meaning_right_away(make_client: Any) -> None:
    client = await make_client(**LOCAL)
    made = await create(client, "用户喜欢喝咖啡")
    for text in ("用户住在杭州", "用户的妹妹在读大学", "用户周末去爬山"):
        await create(client, text)
    response = await client.put(f"/api/memories/{made['id']}",
                                json={"content": "The user plays the cello in an orchestra"})
    assert response.status == 200
    await written(client)
    assert await without_vector(client) == []
    assert (await found(client, "what musical instrument do I play"))[:1] == [made["id"]]


async def test_text_imported_on_the_dashboard_is_found_by_meaning_right_away(
        make_client: Any) -> None:
    client = await signed_in(make_client, **LOCAL)
    response = await post(client, "/dashboard/import/text", {
        "text": "用户养了一只橘猫，名字叫小橘\n用户每天早上跑步五公里\n用户对青霉素过敏",
        "skip_scoring": "1"})
    assert response.status == 200
    await written(client)
    assert await without_vector(client) == []
    cat = (await query_rows(client, "SELECT id FROM memories WHERE content LIKE '%%橘猫%%'"))[0]
    assert cat["id"] in await found(client, "What's my pet called?")


async def test_a_provider_that_fails_leaves_the_job_to_embed_later(make_client: Any,
                                                                   fake: FakeEmbeddings) -> None:
    client = await make_client(**api_embeddings(fake))
    fake.fail_next(503)
    made = await create(client, "The user keeps bees on the roof")
    await written(client)
    assert await without_vector(client) == [made["id"]]
    assert await embed_jobs(client) == [{"status": "pending", "later": True}]
    assert await run_the_job_now(client) == 1
    assert await without_vector(client) == []


async def test_a_slow_provider_does_not_hold_the_write(make_client: Any,
                                                       fake: FakeEmbeddings) -> None:
    """The write answers after its bounded wait; the vector it started still arrives (here
    with no job running at all)."""
    client = await make_client(**api_embeddings(fake))
    fake.delay = fresh_vectors.WAIT_SECONDS + 2.0
    made = await create(client, "The user keeps bees on the roof")
    assert await without_vector(client) == [made["id"]]
    await written(client)
    assert await without_vector(client) == []
    assert (await embed_jobs(client))[0]["status"] == "pending"
    assert await run_the_job_now(client) == 1  # finds nothing left to embed
    assert [t for t in fake.inputs if t != "ping"] == ["The user keeps bees on the roof"]


async def test_vector_search_off_embeds_nothing_on_write(make_client: Any,
                                                         fake: FakeEmbeddings) -> None:
    client = await make_client(**api_embeddings(fake), MEMORY_VECTOR_ENABLED=False)
    await create(client, "The user keeps bees on the roof")
    assert fake.requests == []


async def test_a_backfill_asked_for_runs_the_waiting_fallback_job_now(
        make_client: Any, fake: FakeEmbeddings) -> None:
    client = await make_client(**api_embeddings(fake))
    fake.fail_next(503)
    await create(client, "The user keeps bees on the roof")
    assert await embed_jobs(client) == [{"status": "pending", "later": True}]
    response = await client.post("/api/admin/backfill-memory-embeddings")
    assert response.status == 202
    assert await embed_jobs(client) == [{"status": "pending", "later": False}]
    assert await services_of(client.server.app).jobs.run_until_idle() == 1
    assert await without_vector(client) == []
