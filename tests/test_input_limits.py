"""Bad and oversized input gets a clear 4xx on every route, never a 500: deep JSON nesting,
extreme dates, multipart bodies without a boundary, fields over their documented limits."""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any

import pytest

from pawwake.db.pool import cursor, fetch_all
from pawwake.memory.fields import MAX_CONTENT_CHARS, MAX_TITLE_CHARS
from pawwake.services import services_of
from pawwake.text.json_input import MAX_JSON_DEPTH
from tests.dashboard_memories_support import signed_in
from tests.dashboard_support import same_origin
from tests.gateway_support import GATEWAY_KEY, chat_body

SETTINGS = {"JOB_WORKERS": 0, "CONVERSATION_RECALL_ENABLED": True}

JSON_ROUTES = [
    ("POST", "/api/memories"), ("PUT", "/api/memories/1"),
    ("POST", "/api/memories/batch-update"), ("POST", "/api/memories/batch-delete"),
    ("POST", "/api/memories/batch-restore"), ("POST", "/api/memories/check-duplicate"),
    ("POST", "/api/memories/cleanup-fragments"), ("POST", "/api/memories/consolidate"),
    ("POST", "/api/memories/merge"), ("POST", "/api/memories/import/text"),
    ("POST", "/api/memories/import"), ("POST", "/api/memories/search"),
    ("POST", "/api/admin/backfill-memory-embeddings"), ("POST", "/api/conversations/turn"),
    ("POST", "/api/chat/search-fragments"), ("POST", "/api/conversations/import"),
    ("PUT", "/api/conversations/messages/1"), ("POST", "/api/conversations/batch-delete"),
    ("POST", "/api/admin/merge-sessions"), ("POST", "/api/partition/switch"),
    ("POST", "/api/partition/thread"), ("PUT", "/api/partition/thread/rename"),
    ("PUT", "/api/partition/summary"), ("PUT", "/api/settings"),
]


def nested(depth: int) -> bytes:
    return b'{"q": ' + b"[" * depth + b"]" * depth + b"}"


async def api_error(response: Any, status: int) -> dict[str, Any]:
    text = await response.text()
    assert response.status == status, text[:500]
    body = json.loads(text)
    assert set(body) == {"error"} and isinstance(body["error"]["message"], str), body
    return body["error"]


# --- JSON nesting ------------------------------------------------------------------------------

@pytest.mark.parametrize("depth", [100_000, MAX_JSON_DEPTH + 1], ids=["100k", "limit+1"])
@pytest.mark.parametrize(("method", "path"), JSON_ROUTES, ids=[p for _, p in JSON_ROUTES])
async def test_deep_json_is_400_on_every_api_route(make_client: Any, method: str, path: str,
                                                   depth: int) -> None:
    client = await make_client(**SETTINGS)
    response = await client.request(method, path, data=nested(depth),
                                     headers={"Content-Type": "application/json"})
    error = await api_error(response, 400)
    assert error["code"] == "json_too_deep"


async def test_json_at_the_depth_limit_is_read(make_client: Any) -> None:
    client = await make_client(**SETTINGS)
    body = b'{"content": "deep enough", "title": null, "external_id": "x"}'
    deep = nested(MAX_JSON_DEPTH - 1)  # the object itself is the first level
    response = await client.post("/api/memories/search", data=deep,
                                 headers={"Content-Type": "application/json"})
    assert (await api_error(response, 400))["code"] == "invalid_query"
    assert (await client.post("/api/memories", data=body,
                              headers={"Content-Type": "application/json"})).status == 201


async def test_deep_json_chat_is_400_in_openai_shape(gateway: Any, upstream: Any) -> None:
    client = await gateway()
    response = await client.post("/v1/chat/completions", data=b"[" * 100_000,
                                 headers={"Content-Type": "application/json"})
    assert response.status == 400
    error = (await response.json())["error"]
    assert error["code"] == "json_too_deep" and error["type"] == "invalid_request_error"
    assert upstream.requests == []


async def test_chat_nesting_just_under_the_parser_limit_is_never_500(gateway: Any,
                                                                     upstream: Any) -> None:
    for depth in (500, 900, 960, 990):
        client = await gateway()
        body = chat_body("hi")
        raw = json.dumps(body).encode()[:-1] + b', "extra": ' + b"[" * depth + b"]" * depth \
            + b"}"
        response = await client.post("/v1/chat/completions", data=raw,
                                     headers={"Content-Type": "application/json"})
        assert response.status in (200, 400), (depth, await response.text())
        await client.close()


# --- dates -------------------------------------------------------------------------------------

EXTREME_TIMES = ["9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+23:59",
                 "9999-12-31T23:59:59+00:00", "0999-12-31T00:00:00Z"]
EXTREME_DATES = ["9999-12-31", "0001-01-01", "0999-06-01"]


@pytest.mark.parametrize("moment", EXTREME_TIMES)
async def test_extreme_times_are_400(make_client: Any, moment: str) -> None:
    client = await make_client(**SETTINGS)
    cases = [
        ("/api/memories", {"content": "x", "remind_at": moment}, "remind_at"),
        ("/api/conversations/turn", {
            "turn_id": "t", "session_id": "s", "source": "cli", "occurred_at": moment,
            "messages": [{"role": "user", "content": "hi"}]}, None),
        ("/api/conversations/import", [{"session_id": "s", "role": "user", "content": "hi",
                                        "created_at": moment}], None),
        ("/api/memories/import", {"schema_version": 1, "memories": [
            {"backup_id": 1, "content": "x", "remind_at": moment}]}, None),
    ]
    for path, body, field in cases:
        error = await api_error(await client.post(path, json=body), 400)
        if field:
            assert error["field"] == field
    async with cursor(services_of(client.server.app).database.pool) as cur:
        assert await fetch_all(cur,
                               "SELECT id FROM memories") == []


@pytest.mark.parametrize("day", EXTREME_DATES)
async def test_extreme_event_dates_are_400(make_client: Any, day: str) -> None:
    client = await make_client(**SETTINGS)
    error = await api_error(await client.post("/api/memories",
                                              json={"content": "x", "event_date": day}), 400)
    assert error["field"] == "event_date"
    response = await client.post("/api/memories/consolidate",
                                 json={"date_from": day, "date_to": day})
    await api_error(response, 400)


async def test_ordinary_times_still_work(make_client: Any) -> None:
    client = await make_client(**SETTINGS)
    response = await client.post("/api/memories", json={
        "content": "dentist", "remind_at": "2030-01-31T09:00:00+08:00",
        "event_date": "1999-12-31"})
    assert response.status == 201, await response.text()


# --- multipart ---------------------------------------------------------------------------------

NO_BOUNDARY = {"Content-Type": "multipart/form-data"}
BODY = b"--xyz\r\nContent-Disposition: form-data; name=\"text\"\r\n\r\nhello\r\n--xyz--\r\n"


@pytest.mark.parametrize("path", ["/api/memories/import/text", "/api/memories/import"])
async def test_api_multipart_without_boundary_is_400(make_client: Any, path: str) -> None:
    # With a gateway key: without one, /api takes JSON bodies only (tests/test_open_gateway.py).
    client = await make_client(**SETTINGS, GATEWAY_SECRET=GATEWAY_KEY)
    error = await api_error(await client.post(path, data=BODY, headers={
        **NO_BOUNDARY, "X-Gateway-Key": GATEWAY_KEY}), 400)
    assert error["code"] == "invalid_multipart"


DASHBOARD_FORMS = ["/dashboard/import/text", "/dashboard/import/backup",
                   "/dashboard/memories/search", "/dashboard/memories/edit",
                   "/dashboard/settings", "/dashboard/conversations/search",
                   "/dashboard/threads/action", "/dashboard/memories/merge"]


@pytest.mark.parametrize("path", DASHBOARD_FORMS)
async def test_dashboard_forms_without_boundary_are_400(make_client: Any, path: str) -> None:
    client = await signed_in(make_client)
    response = await client.post(path, data=BODY, headers=same_origin(client, **NO_BOUNDARY))
    assert response.status == 400, await response.text()


@pytest.mark.parametrize("path", ["/dashboard/import/text", "/dashboard/memories/search"])
async def test_dashboard_multipart_that_is_not_utf8_is_400(make_client: Any, path: str) -> None:
    client = await signed_in(make_client)
    body = (b"--xyz\r\nContent-Disposition: form-data; name=\"q\"\r\n\r\nmark\xed\xa0\x80end"
            b"\r\n--xyz--\r\n")
    response = await client.post(path, data=body, headers=same_origin(
        client, **{"Content-Type": "multipart/form-data; boundary=xyz"}))
    assert response.status == 400, await response.text()


@pytest.mark.parametrize("path", ["/dashboard/memories/search", "/dashboard/conversations/search",
                                  "/dashboard/settings", "/dashboard/threads/action"])
async def test_dashboard_forms_with_nul_are_never_500(make_client: Any, path: str) -> None:
    client = await signed_in(make_client, CONVERSATION_RECALL_ENABLED=True)
    form = {"q": "mark\x00end", "_group": "advanced", "SYSTEM_PROMPT": "mark\x00end",
            "action": "summary_save", "thread": "default", "summary": "mark\x00end"}
    response = await client.post(path, data=form, headers=same_origin(client))
    assert response.status < 500, await response.text()


# --- field limits ------------------------------------------------------------------------------

async def test_a_30mb_memory_is_413_while_the_gateway_keeps_answering(make_client: Any
                                                                     ) -> None:
    client = await make_client(**SETTINGS)
    body = json.dumps({"content": "猫" * (30 * 1024 * 1024 // 3)}, ensure_ascii=False).encode()
    posting = asyncio.create_task(client.post("/api/memories", data=io.BytesIO(body),
                                              headers={"Content-Type": "application/json"}))
    health = await client.get("/")
    assert health.status == 200
    response = await asyncio.wait_for(posting, 120)
    error = await api_error(response, 413)
    assert error["code"] == "request_too_large"
    async with cursor(services_of(client.server.app).database.pool) as cur:
        assert await fetch_all(cur,
                               "SELECT id FROM memories") == []


@pytest.mark.parametrize(("body", "field", "code"), [
    ({"content": "x" * (MAX_CONTENT_CHARS + 1)}, "content", "content_too_long"),
    ({"content": "x", "title": "t" * (MAX_TITLE_CHARS + 1)}, "title", "title_too_long"),
], ids=["content", "title"])
async def test_memory_fields_over_their_limit_are_400(make_client: Any, body: dict[str, Any],
                                                      field: str, code: str) -> None:
    client = await make_client(**SETTINGS)
    error = await api_error(await client.post("/api/memories", json=body), 400)
    assert (error["code"], error["field"]) == (code, field)
    at_limit = {"content": "猫" * MAX_CONTENT_CHARS, "title": "t" * MAX_TITLE_CHARS}
    assert (await client.post("/api/memories", json=at_limit)).status == 201


async def test_memory_limits_hold_for_edit_merge_import_and_backup(make_client: Any) -> None:
    client = await make_client(**SETTINGS)
    ids = []
    for text in ("one", "two"):
        ids.append((await (await client.post("/api/memories", json={"content": text})).json())
                   ["id"])
    long = "x" * (MAX_CONTENT_CHARS + 1)
    await api_error(await client.put(f"/api/memories/{ids[0]}", json={"content": long}), 400)
    await api_error(await client.post("/api/memories/merge", json={
        "source_ids": ids, "content": long, "layer": 2}), 400)
    error = await api_error(await client.post("/api/memories/import/text", json={
        "text": f"fine\n{long}", "skip_scoring": True}), 400)
    assert error["code"] == "line_too_long"
    await api_error(await client.post("/api/memories/import", json={
        "schema_version": 1, "memories": [{"backup_id": 1, "content": long}]}), 400)
    async with cursor(services_of(client.server.app).database.pool) as cur:
        contents = [r["content"] for r in await fetch_all(
            cur, "SELECT content FROM memories ORDER BY id")]
    assert contents == ["one", "two"]


async def test_long_chat_messages_are_still_relayed(gateway: Any, upstream: Any) -> None:
    client = await gateway()
    text = "长" * (MAX_CONTENT_CHARS * 5)
    response = await client.post("/v1/chat/completions", json=chat_body(text))
    assert response.status == 200, await response.text()
    assert upstream.requests[-1].body["messages"][-1]["content"].endswith(text)


async def test_dashboard_edits_with_nul_are_stored_clean(make_client: Any) -> None:
    client = await signed_in(make_client)
    memory = (await (await client.post("/api/memories", json={"content": "old"})).json())["id"]
    seed = [{"session_id": "s1", "role": "user", "content": "hello",
             "created_at": "2026-01-01T10:00:00Z"}]
    assert (await client.post("/api/conversations/import", json=seed)).status == 201
    pool = services_of(client.server.app).database.pool
    async with cursor(pool) as cur:
        message = (await fetch_all(cur, "SELECT id FROM conversations"))[0]["id"]
    posts = [
        ("/dashboard/memories/edit", {"id": str(memory), "n": "1", "content": "mem\x00ory",
                                      "title": "ti\x00tle"}),
        ("/dashboard/conversations/message", {"session": "s1", "message": str(message),
                                              "number": "1", "action": "save",
                                              "content": "mes\x00sage"}),
        ("/dashboard/settings", {"_group": "advanced", "SYSTEM_PROMPT": "pro\x00mpt"}),
    ]
    for path, form in posts:
        response = await client.post(path, data=form, headers=same_origin(client),
                                     allow_redirects=False)
        assert response.status in (200, 303), (path, (await response.text())[:500])
    async with cursor(pool) as cur:
        stored = await fetch_all(cur, "SELECT content || coalesce(title, '') AS t FROM memories"
                                      " UNION ALL SELECT content FROM conversations"
                                      " UNION ALL SELECT value::text FROM gateway_config")
    assert {"memorytitle", "message"} <= {r["t"] for r in stored}
    assert any("prompt" in r["t"] for r in stored)
