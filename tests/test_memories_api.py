"""/api/memories: strict create, idempotent retries, listing, edit, lifecycle rules, batches,
version chains (maintenance endpoints: test_memories_maintenance.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pawwake.db.pool import cursor, fetch_all
from pawwake.db.vector_rows import content_sha
from tests.memory_support import create, error_of, merge, pool, row, rows, sql, supersede


@pytest.fixture
async def api(make_client: Any) -> Any:
    """The real app without background workers (jobs stay queued where tests can see them)."""
    return await make_client(JOB_WORKERS=0)


# --- POST /api/memories: one case per validation rule --------------------------------------

BAD_BODIES = [
    pytest.param(b'["a list"]', "invalid_body", None, id="not-an-object"),
    pytest.param(b'{"content": "x",', "invalid_json", None, id="invalid-json"),
    pytest.param(b"", "invalid_json", None, id="empty-body"),
    pytest.param(b'{"importance": 5}', "missing_field", "content", id="content-missing"),
    pytest.param(b'{"content": ""}', "invalid_field", "content", id="content-empty"),
    pytest.param(b'{"content": "  \\n "}', "invalid_field", "content", id="content-blank"),
    pytest.param(b'{"content": 42}', "invalid_field", "content", id="content-not-string"),
    pytest.param(b'{"content": "x", "importance": true}', "invalid_field", "importance",
                 id="importance-bool"),
    pytest.param(b'{"content": "x", "importance": 0}', "invalid_field", "importance",
                 id="importance-too-low"),
    pytest.param(b'{"content": "x", "importance": 11}', "invalid_field", "importance",
                 id="importance-too-high"),
    pytest.param(b'{"content": "x", "importance": 5.5}', "invalid_field", "importance",
                 id="importance-fraction"),
    pytest.param(b'{"content": "x", "importance": "5"}', "invalid_field", "importance",
                 id="importance-string"),
    pytest.param(b'{"content": "x", "layer": 4}', "invalid_field", "layer", id="layer-4"),
    pytest.param(b'{"content": "x", "layer": 0}', "invalid_field", "layer", id="layer-0"),
    pytest.param(b'{"content": "x", "layer": false}', "invalid_field", "layer",
                 id="layer-bool"),
    pytest.param(b'{"content": "x", "title": 7}', "invalid_field", "title", id="title-number"),
    pytest.param(b'{"content": "x", "event_date": "2025/01/02"}', "invalid_field",
                 "event_date", id="event-date-format"),
    pytest.param(b'{"content": "x", "event_date": "2025-02-30"}', "invalid_field",
                 "event_date", id="event-date-impossible"),
    pytest.param(b'{"content": "x", "remind_at": "2025-01-02T09:00:00"}', "invalid_field",
                 "remind_at", id="remind-at-naive"),
    pytest.param(b'{"content": "x", "remind_at": "tomorrow 9am"}', "invalid_field",
                 "remind_at", id="remind-at-garbage"),
    pytest.param(b'{"content": "x", "remind_at": 1735779600}', "invalid_field",
                 "remind_at", id="remind-at-number"),
    pytest.param(b'{"content": "x", "external_id": ""}', "invalid_field", "external_id",
                 id="external-id-empty"),
    pytest.param(b'{"content": "x", "external_id": 12}', "invalid_field", "external_id",
                 id="external-id-number"),
    pytest.param(b'{"content": "x", "colour": "blue"}', "unknown_field", "colour",
                 id="unknown-field"),
]


@pytest.mark.parametrize(("body", "code", "field"), BAD_BODIES)
async def test_create_rejects_each_invalid_input(api: Any, body: bytes, code: str,
                                                 field: str | None) -> None:
    response = await api.post("/api/memories", data=body,
                              headers={"Content-Type": "application/json"})
    assert response.status == 400
    problem = await error_of(response)
    assert problem["code"] == code
    assert problem.get("field") == field
    if field:
        assert field in problem["message"]
    assert await rows(api) == []


async def test_create_applies_defaults_and_stores_terms(api: Any) -> None:
    response = await api.post("/api/memories", json={"content": "  用户的猫叫小橘  "})
    assert response.status == 201
    body = await response.json()
    assert body["inserted"] is True
    assert body["content"] == "用户的猫叫小橘"
    assert (body["importance"], body["layer"], body["title"]) == (5, 1, None)
    assert body["is_active"] is True and body["external_id"] is None
    stored = await row(api, body["id"])
    assert "小橘" in stored["search_terms"]
    jobs = await _jobs(api)
    assert [job["kind"] for job in jobs] == ["memory_embed"]


async def test_create_accepts_every_field(api: Any) -> None:
    body = await create(api, "提醒用户给小橘打疫苗", importance=8, layer=2, title="疫苗",
                        event_date="2025-03-01", remind_at="2025-03-01T01:00:00Z",
                        external_id="diary:42")
    assert body["event_date"] == "2025-03-01"
    assert body["remind_at"] == "2025-03-01T01:00:00+00:00"
    assert (body["importance"], body["layer"], body["title"]) == (8, 2, "疫苗")
    assert body["external_id"] == "diary:42"


async def test_create_replays_an_external_id(api: Any) -> None:
    first = await api.post("/api/memories", json={"content": "A", "external_id": "mcp:1"})
    again = await api.post("/api/memories", json={"content": "A changed", "external_id": "mcp:1"})
    assert first.status == 201 and again.status == 200
    one, two = await first.json(), await again.json()
    assert two["inserted"] is False and two["id"] == one["id"] and two["content"] == "A"
    assert len(await rows(api)) == 1


async def test_twenty_concurrent_retries_make_one_row(api: Any) -> None:
    body = {"content": "同一条记忆重试二十次", "external_id": "retry:20"}
    responses = await asyncio.gather(*(api.post("/api/memories", json=body) for _ in range(20)))
    statuses = sorted(r.status for r in responses)
    bodies = [await r.json() for r in responses]
    assert statuses == [200] * 19 + [201]
    assert len({b["id"] for b in bodies}) == 1
    assert sum(b["inserted"] for b in bodies) == 1
    assert len(await rows(api)) == 1


# --- listing -------------------------------------------------------------------------------

async def test_list_filters_pages_and_orders_newest_first(api: Any) -> None:
    made = [await create(api, f"memory {n}", layer=1 + n % 3) for n in range(9)]
    await api.delete(f"/api/memories/{made[0]['id']}")
    await api.delete(f"/api/memories/{made[3]['id']}")

    page = await (await api.get("/api/memories", params={"limit": 3})).json()
    assert page["total"] == 7
    assert [m["content"] for m in page["memories"]] == ["memory 8", "memory 7", "memory 6"]
    second = await (await api.get("/api/memories", params={"limit": 3, "offset": 3})).json()
    assert [m["content"] for m in second["memories"]] == ["memory 5", "memory 4", "memory 2"]

    layer1 = await (await api.get("/api/memories", params={"layer": 1})).json()
    assert [m["content"] for m in layer1["memories"]] == ["memory 6"]
    assert layer1["total"] == 1
    archived = await (await api.get("/api/memories", params={"status": "archived"})).json()
    assert [m["content"] for m in archived["memories"]] == ["memory 3", "memory 0"]
    assert archived["total"] == 2
    assert all(isinstance(m["id"], int) for m in archived["memories"])


@pytest.mark.parametrize("params", [{"status": "gone"}, {"layer": "4"}, {"limit": "0"},
                                    {"limit": "x"}, {"offset": "-1"}])
async def test_list_rejects_bad_filters(api: Any, params: dict[str, str]) -> None:
    response = await api.get("/api/memories", params=params)
    assert response.status == 400
    assert (await error_of(response))["field"] == next(iter(params))


# --- edit ----------------------------------------------------------------------------------

async def test_edit_content_retokenises_and_replaces_the_vector(api: Any) -> None:
    made = await create(api, "用户喜欢喝咖啡")
    await _fake_vector(api, made["id"])
    await sql(api, "DELETE FROM jobs")
    response = await api.put(f"/api/memories/{made['id']}", json={"content": "用户改喝绿茶了"})
    assert response.status == 200
    body = await response.json()
    assert body["content"] == "用户改喝绿茶了" and body["changed"] == ["content"]
    stored = await row(api, made["id"])
    assert "绿茶" in stored["search_terms"] and "咖啡" not in stored["search_terms"]
    async with cursor(pool(api)) as cur:  # the old vector went; the write made the new one
        vectors = await fetch_all(cur, "SELECT memory_id, provider, content_sha"
                                       " FROM memory_embeddings")
    assert vectors == [{"memory_id": made["id"], "provider": "local",
                        "content_sha": content_sha("用户改喝绿茶了")}]
    assert [job["kind"] for job in await _jobs(api)] == ["memory_embed"]


async def test_edit_other_fields_keeps_the_vector(api: Any) -> None:
    made = await create(api, "用户住在上海")
    await _fake_vector(api, made["id"])
    response = await api.put(f"/api/memories/{made['id']}",
                             json={"importance": 9, "title": "住址", "layer": 3})
    body = await response.json()
    assert (body["importance"], body["title"], body["layer"]) == (9, "住址", 3)
    assert body["changed"] == ["importance", "layer", "title"]
    assert await _vectors(api) == [made["id"]]


@pytest.mark.parametrize(("body", "code"), [({}, "missing_field"),
                                            ({"importance": True}, "invalid_field"),
                                            ({"external_id": "x"}, "unknown_field"),
                                            ({"content": ""}, "invalid_field")])
async def test_edit_validates_like_create(api: Any, body: dict[str, Any], code: str) -> None:
    made = await create(api, "不变的记忆")
    response = await api.put(f"/api/memories/{made['id']}", json=body)
    assert response.status == 400 and (await error_of(response))["code"] == code
    assert (await row(api, made["id"]))["content"] == "不变的记忆"


async def test_unknown_ids_are_404(api: Any) -> None:
    for method, path in [("GET", "/api/memories/999"), ("PUT", "/api/memories/999"),
                         ("DELETE", "/api/memories/999"),
                         ("POST", "/api/memories/999/restore"),
                         ("POST", "/api/memories/999/promote"),
                         ("POST", "/api/memories/999/undo-supersede"),
                         ("GET", "/api/memories/999/versions"),
                         ("GET", "/api/memories/99999999999999999999")]:
        response = await api.request(method, path, json={"importance": 3})
        assert response.status == 404, (method, path)
        assert (await error_of(response))["code"] == "not_found"


# --- archive, restore, delete, promote -----------------------------------------------------

async def test_soft_delete_restore_and_hard_delete(api: Any) -> None:
    made = await create(api, "可以删除的记忆")
    path = f"/api/memories/{made['id']}"
    refused = await api.delete(path, params={"soft": "false"})
    assert refused.status == 409 and (await error_of(refused))["code"] == "not_archived"

    archived = await api.delete(path)
    assert archived.status == 200
    assert (await archived.json())["memory"]["is_active"] is False
    again = await api.delete(path)
    assert again.status == 409 and (await error_of(again))["code"] == "already_archived"

    restored = await api.post(f"{path}/restore")
    assert restored.status == 200 and (await restored.json())["is_active"] is True
    twice = await api.post(f"{path}/restore")
    assert twice.status == 409 and (await error_of(twice))["code"] == "not_archived"

    await api.delete(path)
    gone = await api.delete(path, params={"soft": "false"})
    assert gone.status == 200 and (await gone.json()) == {"deleted": True, "id": made["id"]}
    assert await row(api, made["id"]) is None
    bad = await api.delete(path, params={"soft": "maybe"})
    assert bad.status == 400


async def test_hard_delete_refuses_chain_members_and_merge_sources(api: Any) -> None:
    old, new = await create(api, "用户住在北京"), await create(api, "用户搬到了上海")
    await supersede(api, old["id"], new["id"])
    refused = await api.delete(f"/api/memories/{old['id']}", params={"soft": "false"})
    assert refused.status == 409
    assert (await error_of(refused))["code"] == "version_chain_member"

    a, b = await create(api, "周六去了公园"), await create(api, "周六在公园野餐")
    merged = await create(api, "周六在公园野餐")
    await merge(api, merged["id"], [a["id"], b["id"]])
    source = await api.delete(f"/api/memories/{a['id']}", params={"soft": "false"})
    assert source.status == 409 and (await error_of(source))["code"] == "merge_source"
    assert await row(api, old["id"]) is not None and await row(api, a["id"]) is not None


async def test_restore_of_a_replaced_row_points_to_undo(api: Any) -> None:
    old, new = await create(api, "旧说法"), await create(api, "新说法")
    await supersede(api, old["id"], new["id"])
    response = await api.post(f"/api/memories/{old['id']}/restore")
    assert response.status == 409 and (await error_of(response))["code"] == "superseded"


async def test_promote_makes_core_and_refuses_archived(api: Any) -> None:
    made = await create(api, "用户的生日是三月一日")
    response = await api.post(f"/api/memories/{made['id']}/promote")
    assert response.status == 200 and (await response.json())["layer"] == 3
    await api.delete(f"/api/memories/{made['id']}")
    refused = await api.post(f"/api/memories/{made['id']}/promote")
    assert refused.status == 409 and (await error_of(refused))["code"] == "archived"


# --- version chains ------------------------------------------------------------------------

async def test_versions_list_the_whole_chain_oldest_first(api: Any) -> None:
    a, b, c = [await create(api, text) for text in ("住在北京", "住在上海", "住在杭州")]
    await supersede(api, a["id"], b["id"])
    await supersede(api, b["id"], c["id"])
    for member in (a, b, c):
        body = await (await api.get(f"/api/memories/{member['id']}/versions")).json()
        assert [v["id"] for v in body["versions"]] == [a["id"], b["id"], c["id"]]
        assert body["current_id"] == c["id"]
    alone = await create(api, "没有版本链")
    body = await (await api.get(f"/api/memories/{alone['id']}/versions")).json()
    assert [v["id"] for v in body["versions"]] == [alone["id"]]


@pytest.mark.parametrize("side", ["older", "newer"])
async def test_undo_supersede_restores_the_older_version(api: Any, side: str) -> None:
    old, new = await create(api, "用户养了一只猫"), await create(api, "用户养了两只猫")
    await supersede(api, old["id"], new["id"])
    target = old if side == "older" else new
    response = await api.post(f"/api/memories/{target['id']}/undo-supersede")
    assert response.status == 200
    body = await response.json()
    assert body["restored"]["id"] == old["id"] and body["archived"]["id"] == new["id"]
    older, newer = await row(api, old["id"]), await row(api, new["id"])
    assert older["is_active"] is True and older["superseded_by"] is None
    assert newer["is_active"] is False and newer["archived_at"] is not None
    again = await api.post(f"/api/memories/{old['id']}/undo-supersede")
    assert again.status == 409 and (await error_of(again))["code"] == "not_superseded"


async def test_undo_supersede_needs_the_newer_version_current(api: Any) -> None:
    a, b, c = [await create(api, text) for text in ("v1", "v2", "v3")]
    await supersede(api, a["id"], b["id"])
    await supersede(api, b["id"], c["id"])
    response = await api.post(f"/api/memories/{a['id']}/undo-supersede")
    assert response.status == 409
    assert (await error_of(response))["code"] == "newer_not_current"
    assert (await row(api, a["id"]))["superseded_by"] == b["id"]


# --- batches -------------------------------------------------------------------------------

async def test_batches_report_what_they_really_did(api: Any) -> None:
    a, b, c, d = [await create(api, f"batch {n}") for n in range(4)]
    await api.delete(f"/api/memories/{c['id']}")

    archive = await api.post("/api/memories/batch-delete",
                             json={"ids": [a["id"], b["id"], c["id"], 999]})
    report = await archive.json()
    assert (report["archived"], report["processed"], report["requested"]) == (2, 2, 4)
    assert report["skipped"] == {"not_found": 1, "already_archived": 1}

    await supersede(api, b["id"], d["id"])
    hard = await api.post("/api/memories/batch-delete",
                          json={"ids": [a["id"], b["id"], d["id"]], "soft": False})
    report = await hard.json()
    assert report["deleted"] == 1 and report["ids"] == [a["id"]]
    assert report["skipped"] == {"not_archived": 1, "version_chain_member": 1}
    assert await row(api, a["id"]) is None

    restore = await api.post("/api/memories/batch-restore",
                             json={"ids": [b["id"], c["id"], d["id"]]})
    report = await restore.json()
    assert report["restored"] == 1 and report["ids"] == [c["id"]]
    assert report["skipped"] == {"not_archived": 1, "superseded": 1}

    update = await api.post("/api/memories/batch-update",
                            json={"ids": [c["id"], d["id"]], "fields": {"importance": 5}})
    assert (await update.json())["updated"] == 0
    update = await api.post("/api/memories/batch-update",
                            json={"ids": [c["id"], d["id"]], "fields": {"importance": 9}})
    assert (await update.json())["updated"] == 2
    assert [r["importance"] for r in await rows(api, "id = ANY(%s)", ([c["id"], d["id"]],))
            ] == [9, 9]


@pytest.mark.parametrize("body", [{"ids": []}, {"ids": [True]}, {"ids": "1"},
                                  {"ids": [1], "fields": {"content": "x"}},
                                  {"ids": [1], "fields": {"importance": 11}},
                                  {"ids": [1], "fields": {}}, {"ids": [1]}])
async def test_batch_update_validates(api: Any, body: dict[str, Any]) -> None:
    response = await api.post("/api/memories/batch-update", json=body)
    assert response.status == 400


async def test_memory_api_needs_the_gateway_key(make_client: Any) -> None:
    client = await make_client(GATEWAY_SECRET="gw-key-0123456789", JOB_WORKERS=0)
    assert (await client.get("/api/memories")).status == 401
    ok = await client.get("/api/memories", headers={"X-Gateway-Key": "gw-key-0123456789"})
    assert ok.status == 200


async def test_memory_api_without_a_database_is_503(make_client: Any) -> None:
    client = await make_client(DATABASE_ENABLED=False)
    response = await client.post("/api/memories", json={"content": "x"})
    assert response.status == 503
    assert (await error_of(response))["code"] == "database_disabled"


async def _jobs(client: Any) -> list[dict[str, Any]]:
    async with cursor(pool(client)) as cur:
        return await fetch_all(cur, "SELECT kind, status FROM jobs ORDER BY id")


async def _fake_vector(client: Any, memory_id: int) -> None:
    """A vector no model made, in place of the one the create stored."""
    await sql(client, "INSERT INTO memory_embeddings (memory_id, provider, model, dim,"
                      " content_sha, embedding) VALUES (%s, 'test', 'm', 2, 'x', '{0.1,0.2}')"
                      " ON CONFLICT (memory_id) DO UPDATE SET provider = EXCLUDED.provider,"
                      " model = EXCLUDED.model, dim = EXCLUDED.dim,"
                      " content_sha = EXCLUDED.content_sha, embedding = EXCLUDED.embedding",
              (memory_id,))


async def _vectors(client: Any) -> list[int]:
    async with cursor(pool(client)) as cur:
        return [r["memory_id"] for r in await fetch_all(
            cur, "SELECT memory_id FROM memory_embeddings ORDER BY memory_id")]
