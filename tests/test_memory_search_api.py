"""GET/POST /api/memories/search and the backfill status: input errors, auth, no database."""

from __future__ import annotations

from typing import Any

import pytest

from pawwake.services import services_of
from tests.memory_fixtures import insert_memory


@pytest.mark.parametrize(("params", "code"), [
    ({}, "missing_query"),
    ({"q": ""}, "missing_query"),
    ({"q": "   "}, "missing_query"),
    ({"q": "x" * 2001}, "query_too_long"),
    ({"q": "猫", "limit": "ten"}, "invalid_limit"),
    ({"q": "猫", "limit": "0"}, "invalid_limit"),
    ({"q": "猫", "limit": "101"}, "invalid_limit"),
    ({"q": "猫", "limit": "2.5"}, "invalid_limit"),
    ({"q": "猫", "sort": "new"}, "unknown_parameter"),
    ([("q", "猫"), ("q", "狗")], "repeated_parameter"),
])
async def test_get_rejects_bad_input(make_client: Any, params: Any, code: str) -> None:
    client = await make_client(JOB_WORKERS=0)
    resp = await client.get("/api/memories/search", params=params)
    assert resp.status == 400
    body = await resp.json()
    assert body == {"error": {"code": code, "message": body["error"]["message"]}}
    assert body["error"]["message"]


@pytest.mark.parametrize(("raw", "code"), [
    (b"{not json", "invalid_json"),
    (b"", "invalid_json"),
    (b'["q"]', "invalid_body"),
    (b'"q"', "invalid_body"),
    (b"{}", "missing_query"),
    (b'{"q": null}', "missing_query"),
    (b'{"q": 5}', "invalid_query"),
    (b'{"q": ["a"]}', "invalid_query"),
    (b'{"q": " "}', "missing_query"),
    (b'{"q": "cat", "limit": "5"}', "invalid_limit"),
    (b'{"q": "cat", "limit": true}', "invalid_limit"),
    (b'{"q": "cat", "limit": 5.5}', "invalid_limit"),
    (b'{"q": "cat", "limit": 0}', "invalid_limit"),
    (b'{"q": "cat", "limit": 1000}', "invalid_limit"),
    (b'{"q": "cat", "exclude_ids": [1]}', "unknown_field"),
])
async def test_post_rejects_bad_input(make_client: Any, raw: bytes, code: str) -> None:
    client = await make_client(JOB_WORKERS=0)
    resp = await client.post("/api/memories/search", data=raw,
                             headers={"Content-Type": "application/json"})
    assert resp.status == 400, raw
    assert (await resp.json())["error"]["code"] == code


async def test_limits_at_the_edges_are_accepted(make_client: Any) -> None:
    client = await make_client(JOB_WORKERS=0, MEMORY_VECTOR_ENABLED=False)
    pool = services_of(client.server.app).database.pool
    for n in range(3):
        await insert_memory(pool, f"小橘第{n}次打翻了水杯")
    for limit in (1, 100):
        resp = await client.post("/api/memories/search", json={"q": "小橘 水杯", "limit": limit})
        assert resp.status == 200
        assert len((await resp.json())["results"]) == min(limit, 3)
    resp = await client.get("/api/memories/search", params={"q": "小橘 水杯"})
    assert len((await resp.json())["results"]) == 3  # default limit 10


async def test_search_needs_the_gateway_key(make_client: Any) -> None:
    client = await make_client(JOB_WORKERS=0, GATEWAY_SECRET="gw-secret-0123456789")
    assert (await client.post("/api/memories/search", json={"q": "x"})).status == 401
    assert (await client.get("/api/admin/backfill-memory-embeddings/status")).status == 401
    assert (await client.post("/api/admin/backfill-memory-embeddings")).status == 401
    resp = await client.post("/api/memories/search", json={"q": "x"},
                             headers={"X-Gateway-Key": "gw-secret-0123456789"})
    assert resp.status == 200


async def test_without_a_database_the_endpoints_answer_503(make_client: Any) -> None:
    client = await make_client(DATABASE_ENABLED=False)
    for method, path in (("GET", "/api/memories/search?q=x"),
                         ("POST", "/api/admin/backfill-memory-embeddings"),
                         ("GET", "/api/admin/backfill-memory-embeddings/status")):
        resp = await client.request(method, path)
        assert resp.status == 503, path
        assert (await resp.json())["error"]["code"] == "database_unavailable"
    resp = await client.post("/api/memories/search", json={"q": "x"})
    assert resp.status == 503


async def test_an_empty_collection_returns_no_results(make_client: Any) -> None:
    client = await make_client(JOB_WORKERS=0, EMBEDDING_PROVIDER="local")
    resp = await client.post("/api/memories/search", json={"q": "我的猫叫什么"})
    assert resp.status == 200
    body = await resp.json()
    assert body["results"] == [] and body["mode"] == "keyword" and body["warning"]
