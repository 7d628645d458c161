"""The embedding backfill job, its status endpoint and provenance changes."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from pawwake.db import jobs as jobs_db
from pawwake.db import memory_embeddings as vectors_db
from pawwake.db.pool import cursor, execute, fetch_all
from pawwake.llm.embeddings import Provenance
from pawwake.memory.embedding_jobs import EMBED_KIND, request_embedding
from pawwake.services import services_of
from tests.embedding_server import FakeEmbeddings, serve_embeddings
from tests.memory_fixtures import insert_memory

SECRET = "sk-embed-secret-0123456789"


@pytest.fixture
async def fake(aiohttp_server: Any) -> FakeEmbeddings:
    return await serve_embeddings(aiohttp_server)


async def start(make_client: Any, fake: FakeEmbeddings, memories: int = 0,
                **overrides: Any) -> tuple[Any, Any, list[int]]:
    settings = {"JOB_WORKERS": 0, "EMBEDDING_API_KEY": SECRET,
                "EMBEDDING_BASE_URL": fake.base_url, "EMBEDDING_MODEL": "fake-a",
                "EMBEDDING_DIM": 16, **overrides}
    client = await make_client(**settings)
    app = client.server.app
    pool = services_of(app).database.pool
    ids = [await insert_memory(pool, f"记忆 number {i}: 喜欢的东西 {i * 7}") for i in range(memories)]
    return client, app, ids


async def status_of(client: Any) -> dict[str, Any]:
    resp = await client.get("/api/admin/backfill-memory-embeddings/status")
    assert resp.status == 200
    return await resp.json()


async def vector_rows(app: Any) -> list[dict[str, Any]]:
    async with cursor(services_of(app).database.pool) as cur:
        return await fetch_all(cur,
                               "SELECT memory_id, provider, model, dim FROM memory_embeddings"
                               " ORDER BY memory_id")


def embedded_texts(fake: FakeEmbeddings) -> list[str]:
    return [t for t in fake.inputs if t != "ping"]


async def test_backfill_embeds_everything_once_and_reports_progress(make_client: Any,
                                                                    fake: FakeEmbeddings) -> None:
    client, app, ids = await start(make_client, fake, memories=12)
    before = await status_of(client)
    assert (before["status"], before["done"], before["total"]) == ("idle", 0, 12)
    assert before["provenance"] == {"provider": "api", "model": "fake-a", "dim": 16}
    assert before["needs_rebuild"] is False and before["stored_provenance"] is None
    resp = await client.post("/api/admin/backfill-memory-embeddings")
    assert resp.status == 202
    queued = await resp.json()
    assert queued["status"] == "queued" and queued["rebuild"] is False
    assert (await status_of(client))["status"] == "queued"
    assert await services_of(app).jobs.run_until_idle() == 1
    after = await status_of(client)
    assert (after["status"], after["done"], after["total"]) == ("done", 12, 12)
    assert after["stored_provenance"] == {"provider": "api", "model": "fake-a", "dim": 16}
    rows = await vector_rows(app)
    assert [r["memory_id"] for r in rows] == ids
    assert all((r["provider"], r["model"], r["dim"]) == ("api", "fake-a", 16) for r in rows)
    assert sorted(embedded_texts(fake)) == sorted(set(embedded_texts(fake)))
    # Idempotent: nothing is missing, nothing is sent again.
    sent = len(embedded_texts(fake))
    await client.post("/api/admin/backfill-memory-embeddings")
    await services_of(app).jobs.run_until_idle()
    assert len(embedded_texts(fake)) == sent


async def test_an_interrupted_backfill_resumes_where_it_stopped(make_client: Any,
                                                                fake: FakeEmbeddings) -> None:
    client, app, ids = await start(make_client, fake, memories=12)
    pool = services_of(app).database.pool
    fake.fail_after = 2  # the size probe and one batch succeed, then the provider breaks
    async with cursor(pool) as cur:
        job_id = await jobs_db.enqueue(cur, EMBED_KIND, {"batch_size": 5}, dedupe_key="pending")
    assert await services_of(app).jobs.run_until_idle() == 1
    async with cursor(pool) as cur:
        job = await jobs_db.get_job(cur, job_id)
    assert job["status"] == "pending" and "500" in job["last_error"]
    midway = await status_of(client)
    assert (midway["status"], midway["done"], midway["total"]) == ("queued", 5, 12)
    assert "500" in midway["last_error"]
    assert len(await vector_rows(app)) == 5

    fake.fail_after = None
    async with cursor(pool) as cur:
        await execute(cur, "UPDATE jobs SET run_after = now() WHERE id = %s", (job_id,))
    assert await services_of(app).jobs.run_until_idle() == 1
    done = await status_of(client)
    assert (done["status"], done["done"], done["total"]) == ("done", 12, 12)
    assert done["last_error"] is None
    texts = embedded_texts(fake)
    assert len(texts) == len(set(texts)) == 12  # nothing embedded twice
    assert [r["memory_id"] for r in await vector_rows(app)] == ids


async def test_changed_content_is_embedded_again(make_client: Any, fake: FakeEmbeddings) -> None:
    client, app, ids = await start(make_client, fake, memories=4)
    await request_embedding(services_of(app).memory_writes)
    await services_of(app).jobs.run_until_idle()
    pool = services_of(app).database.pool
    # The storage layer deletes the vector of an edited memory...
    async with cursor(pool) as cur:
        await execute(cur, "UPDATE memories SET content = '小橘换了新的猫砂', updated_at = now()"
                           " WHERE id = %s", (ids[3],))
        await execute(cur, "DELETE FROM memory_embeddings WHERE memory_id = %s", (ids[3],))
    # ...and an edit that left its vector behind is caught by the digest.
    async with cursor(pool) as cur:
        await execute(cur, "UPDATE memories SET content = '新的内容：小橘爱吃冻干', updated_at = now()"
                           " WHERE id = %s", (ids[2],))
    assert (await status_of(client))["done"] == 2
    await request_embedding(services_of(app).memory_writes)
    await services_of(app).jobs.run_until_idle()
    assert sorted(embedded_texts(fake)[-2:]) == sorted(["新的内容：小橘爱吃冻干", "小橘换了新的猫砂"])
    assert len(embedded_texts(fake)) == 6
    assert (await status_of(client))["done"] == 4
    async with cursor(pool) as cur:
        shas = await fetch_all(cur, "SELECT m.id FROM memories m JOIN memory_embeddings e"
                                    " ON e.memory_id = m.id AND e.content_sha ="
                                    " encode(sha256(convert_to(m.content, 'UTF8')), 'hex')")
    assert len(shas) == 4


async def test_a_rate_limit_waits_without_using_an_attempt(make_client: Any,
                                                           fake: FakeEmbeddings) -> None:
    _client, app, _ids = await start(make_client, fake, memories=2)
    fake.fail_next(429)
    pool = services_of(app).database.pool
    async with cursor(pool) as cur:
        job_id = await jobs_db.enqueue(cur, EMBED_KIND, {}, dedupe_key="pending")
    await services_of(app).jobs.run_until_idle()
    async with cursor(pool) as cur:
        job = await jobs_db.get_job(cur, job_id)
    assert job["status"] == "pending" and job["attempts"] == 0
    async with cursor(pool) as cur:
        waiting = await fetch_all(cur, "SELECT run_after - now() > interval '5 seconds' AS later"
                                       " FROM jobs WHERE id = %s", (job_id,))
    assert waiting[0]["later"]


async def test_a_provenance_change_needs_a_confirmed_rebuild(make_client: Any,
                                                             fake: FakeEmbeddings) -> None:
    client, app, ids = await start(make_client, fake, memories=6)
    await client.post("/api/admin/backfill-memory-embeddings")
    await services_of(app).jobs.run_until_idle()
    hybrid = await client.post("/api/memories/search", json={"q": "喜欢的东西"})
    assert (await hybrid.json())["mode"] == "hybrid"

    await services_of(app).config.update({"EMBEDDING_MODEL": "fake-b"})
    status = await status_of(client)
    assert status["needs_rebuild"] is True
    assert status["provenance"]["model"] == "fake-b"
    assert status["stored_provenance"]["model"] == "fake-a"

    search = await client.post("/api/memories/search", json={"q": "喜欢的东西"})
    body = await search.json()
    assert body["mode"] == "keyword" and "rebuil" in body["warning"]
    assert body["results"]  # keywords still work

    refused = await client.post("/api/admin/backfill-memory-embeddings", json={})
    assert refused.status == 409
    error = (await refused.json())["error"]
    assert error["code"] == "rebuild_needs_confirmation"
    assert "fake-a" in error["message"] and "confirm_rebuild" in error["message"]

    # A write-triggered job must not quietly mix models either.
    await request_embedding(services_of(app).memory_writes)
    await services_of(app).jobs.run_until_idle()
    assert {r["model"] for r in await vector_rows(app)} == {"fake-a"}

    confirmed = await client.post("/api/admin/backfill-memory-embeddings",
                                  json={"confirm_rebuild": True})
    assert confirmed.status == 202
    assert (await confirmed.json())["rebuild"] is True
    await services_of(app).jobs.run_until_idle()
    rows = await vector_rows(app)
    assert [r["memory_id"] for r in rows] == ids and {r["model"] for r in rows} == {"fake-b"}
    status = await status_of(client)
    assert status["needs_rebuild"] is False and (status["done"], status["total"]) == (6, 6)
    again = await client.post("/api/memories/search", json={"q": "喜欢的东西"})
    assert (await again.json())["mode"] == "hybrid"


async def test_a_first_backfill_after_a_change_with_no_vectors_needs_no_confirmation(
        make_client: Any, fake: FakeEmbeddings) -> None:
    client, app, _ids = await start(make_client, fake, memories=2)
    await services_of(app).config.update({"EMBEDDING_DIM": 24})
    assert (await status_of(client))["needs_rebuild"] is False
    resp = await client.post("/api/admin/backfill-memory-embeddings")
    assert resp.status == 202
    await services_of(app).jobs.run_until_idle()
    assert {r["dim"] for r in await vector_rows(app)} == {24}


async def test_backfill_input_errors(make_client: Any, fake: FakeEmbeddings) -> None:
    client, _app, _ids = await start(make_client, fake)
    cases = [
        (b"not json", "invalid_json"),
        (b"[true]", "invalid_body"),
        (b'{"confirm_rebuild": "yes"}', "invalid_confirm_rebuild"),
        (b'{"confirm": true}', "unknown_field"),
    ]
    for raw, code in cases:
        resp = await client.post("/api/admin/backfill-memory-embeddings", data=raw,
                                 headers={"Content-Type": "application/json"})
        assert resp.status == 400, raw
        body = await resp.json()
        assert body["error"]["code"] == code and body["error"]["message"]


async def test_backfill_with_vectors_off_is_refused(make_client: Any,
                                                    fake: FakeEmbeddings) -> None:
    client, _app, _ids = await start(make_client, fake, MEMORY_VECTOR_ENABLED=False)
    resp = await client.post("/api/admin/backfill-memory-embeddings")
    assert resp.status == 409
    assert (await resp.json())["error"]["code"] == "vectors_disabled"
    assert (await status_of(client))["vectors_enabled"] is False


async def test_an_unreachable_provider_is_a_502(make_client: Any, fake: FakeEmbeddings) -> None:
    client, _app, _ids = await start(make_client, fake,
                                     EMBEDDING_BASE_URL="http://127.0.0.1:9/v1")
    resp = await client.post("/api/admin/backfill-memory-embeddings")
    assert resp.status == 502
    assert (await resp.json())["error"]["code"] == "embedding_unavailable"
    status = await status_of(client)
    assert "unreachable" in status["last_error"]


async def test_a_vector_of_old_text_is_not_stored_over_an_edit_in_flight(
        make_client: Any, fake: FakeEmbeddings) -> None:
    _client, app, ids = await start(make_client, fake, memories=1)
    pool = services_of(app).database.pool
    async with cursor(pool) as cur:
        old = (await fetch_all(cur, "SELECT content FROM memories WHERE id = %s", (ids[0],)))[0]
    provenance = Provenance("api", "fake-a", 16)
    async with pool.acquire() as conn, conn.cursor() as edit:
        await edit.execute("BEGIN")
        await edit.execute("UPDATE memories SET content = 'edited', updated_at = now()"
                           " WHERE id = %s", (ids[0],))
        async def store() -> list[int]:
            async with cursor(pool) as cur:
                return await vectors_db.store_vectors(
                    cur, provenance, [(ids[0], vectors_db.content_sha(old["content"]),
                                       np.ones(16, dtype=np.float32))])

        storing = asyncio.ensure_future(store())
        for _ in range(1000):  # until the store waits for the edit's row lock
            async with cursor(pool) as cur:
                waiting = await fetch_all(cur, "SELECT 1 FROM pg_stat_activity"
                                               " WHERE wait_event_type = 'Lock'")
            if waiting:
                break
            await asyncio.sleep(0.01)
        assert not storing.done()
        await edit.execute("COMMIT")
    assert await storing == []
    assert await vector_rows(app) == []


async def test_turning_vectors_off_stops_a_running_backfill(make_client: Any,
                                                            fake: FakeEmbeddings) -> None:
    client, app, ids = await start(make_client, fake, memories=12)
    pool = services_of(app).database.pool
    fake.delay = 0.05  # a batch takes a moment, as a local model's would
    async with cursor(pool) as cur:
        job_id = await jobs_db.enqueue(cur, EMBED_KIND, {"batch_size": 2}, dedupe_key="pending")
    running = asyncio.create_task(services_of(app).jobs.run_until_idle())
    while len(await vector_rows(app)) < 2:
        assert not running.done()
        await asyncio.sleep(0.01)
    resp = await client.put("/api/settings", json={"MEMORY_VECTOR_ENABLED": False})
    assert resp.status == 200, await resp.text()
    sent = len(embedded_texts(fake))
    assert await asyncio.wait_for(running, 30) == 1
    async with cursor(pool) as cur:
        job = await jobs_db.get_job(cur, job_id)
    assert job["status"] == "done" and "MEMORY_VECTOR_ENABLED" in job["result"]["stopped"]
    assert len(embedded_texts(fake)) <= sent + 2  # at most the batch in flight
    assert len(await vector_rows(app)) < len(ids)
