"""JSON backup: export, import into a fresh database, validation before any write, idempotent
re-import, dry runs, and repair of dangling links."""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Callable
from typing import Any

import pytest
from aiohttp import FormData
from aiohttp.test_utils import TestClient

from pawwake.app import create_app
from pawwake.db.pool import cursor, fetch_all
from pawwake.settings import Settings
from tests.gateway_support import GATEWAY_KEY
from tests.memory_support import create, error_of, merge, pool, row, rows, sql, supersede

_second_db = itertools.count(1)


@pytest.fixture
async def api(make_client: Any) -> TestClient:
    return await make_client(JOB_WORKERS=0)


@pytest.fixture
async def fresh_api(postgres: Any, aiohttp_client: Any, make_settings: Callable[..., Settings]
                    ) -> Any:
    """A second gateway on its own new, empty database."""
    name = f"t_backup_target_{next(_second_db)}"
    postgres.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    postgres.admin(f"CREATE DATABASE {name} TEMPLATE pawwake_template")
    client = await aiohttp_client(create_app(make_settings(DATABASE_URL=postgres.uri(name),
                                                           JOB_WORKERS=0)))
    yield client
    await client.close()
    postgres.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


async def build_history(api: TestClient) -> None:
    """Every kind of memory a real database holds: layers, archive, merge, chain, reminders."""
    await create(api, "用户的名字叫阿青", importance=10, layer=3, title="名字")
    await create(api, "用户每年春节回杭州", layer=2, event_date="2025-01-29")
    a = await create(api, "周六去了西湖")
    b = await create(api, "周六在西湖划船")
    merged = await create(api, "周六在西湖划船，玩得很开心", title="西湖")
    await merge(api, merged["id"], [a["id"], b["id"]])
    old = await create(api, "用户住在北京", importance=7)
    new = await create(api, "用户搬到了上海", importance=7)
    await supersede(api, old["id"], new["id"])
    await create(api, "提醒用户给小橘打疫苗", remind_at="2025-03-01T09:00:00+08:00",
                 external_id="diary:7")
    delivered = await create(api, "提醒用户交房租", remind_at="2025-02-01T09:00:00+08:00")
    await sql(api, "UPDATE memories SET reminder_delivered_at = '2025-02-01T01:02:03+00'"
                   " WHERE id = %s", (delivered["id"],))
    gone = await create(api, "一条归档的碎片")
    await api.delete(f"/api/memories/{gone['id']}")


async def export(api: TestClient) -> dict[str, Any]:
    response = await api.get("/api/memories/export")
    assert response.status == 200, await response.text()
    assert "attachment" in response.headers["Content-Disposition"]
    return await response.json()


def body_of(document: dict[str, Any]) -> list[dict[str, Any]]:
    return document["memories"]


async def import_file(api: TestClient, document: Any, **params: str) -> Any:
    return await api.post("/api/memories/import", json=document, params=params)


async def snapshot(api: TestClient) -> list[dict[str, Any]]:
    async with cursor(pool(api)) as cur:
        return await fetch_all(cur, "SELECT * FROM memories ORDER BY id")


async def test_round_trip_into_a_fresh_database_keeps_everything(api: TestClient,
                                                                 fresh_api: TestClient) -> None:
    await build_history(api)
    document = await export(api)
    assert document["schema_version"] == 3
    assert len(document["source_database_id"]) == 32
    assert len(body_of(document)) == 10

    response = await import_file(fresh_api, document)
    assert response.status == 200
    report = await response.json()
    assert (report["imported"], report["skipped"], report["conflicts"]) == (10, 0, 0)
    assert report["same_database"] is False

    copied = await export(fresh_api)
    assert copied["source_database_id"] != document["source_database_id"]
    assert body_of(copied) == body_of(document)

    by_content = {r["content"]: r for r in await rows(fresh_api)}
    merged = by_content["周六在西湖划船，玩得很开心"]
    assert merged["layer"] == 2 and merged["is_active"]
    assert sorted(merged["merged_from"]) == sorted(
        [by_content["周六去了西湖"]["id"], by_content["周六在西湖划船"]["id"]])
    assert not by_content["周六去了西湖"]["is_active"]
    old = by_content["用户住在北京"]
    assert old["superseded_by"] == by_content["用户搬到了上海"]["id"] and not old["is_active"]
    reminder = by_content["提醒用户给小橘打疫苗"]
    assert reminder["remind_at"].isoformat() == "2025-03-01T01:00:00+00:00"
    assert reminder["external_id"] == "diary:7"
    assert by_content["提醒用户交房租"]["reminder_delivered_at"] is not None
    assert by_content["用户的名字叫阿青"]["layer"] == 3
    assert all(r["search_terms"] for r in by_content.values())

    versions = await (await fresh_api.get(f"/api/memories/{old['id']}/versions")).json()
    assert [v["content"] for v in versions["versions"]] == ["用户住在北京", "用户搬到了上海"]


async def test_importing_the_same_file_twice_changes_nothing(api: TestClient,
                                                             fresh_api: TestClient) -> None:
    await build_history(api)
    document = await export(api)
    await import_file(fresh_api, document)
    before = await snapshot(fresh_api)
    report = await (await import_file(fresh_api, document)).json()
    assert (report["imported"], report["skipped"], report["conflicts"]) == (0, 10, 0)
    assert await snapshot(fresh_api) == before

    own = await (await import_file(api, document)).json()
    assert own["imported"] == 0 and own["same_database"] is True


async def test_dry_run_previews_and_writes_nothing(api: TestClient,
                                                   fresh_api: TestClient) -> None:
    await build_history(api)
    document = await export(api)
    preview = await (await import_file(fresh_api, document, dry_run="true")).json()
    assert preview["dry_run"] is True
    assert (preview["imported"], preview["skipped"]) == (10, 0)
    assert await snapshot(fresh_api) == []
    real = await (await import_file(fresh_api, document)).json()
    assert {k: v for k, v in real.items() if k != "dry_run"} == \
        {k: v for k, v in preview.items() if k != "dry_run"}


def _corrupt_deep(document: dict[str, Any]) -> dict[str, Any]:
    broken = copy.deepcopy(document)
    broken["memories"][-1]["importance"] = "high"
    return broken


def _dangling(document: dict[str, Any]) -> dict[str, Any]:
    broken = copy.deepcopy(document)
    broken["memories"][0]["merged_from"] = [999]
    return broken


def _cycle(document: dict[str, Any]) -> dict[str, Any]:
    broken = copy.deepcopy(document)
    first, second = broken["memories"][0], broken["memories"][1]
    first["superseded_by"], second["superseded_by"] = second["backup_id"], first["backup_id"]
    return broken


def _merge_cycle(document: dict[str, Any]) -> dict[str, Any]:
    broken = copy.deepcopy(document)
    first, second = broken["memories"][0], broken["memories"][1]
    first["merged_from"], second["merged_from"] = [second["backup_id"]], [first["backup_id"]]
    return broken


def _duplicate_ids(document: dict[str, Any]) -> dict[str, Any]:
    broken = copy.deepcopy(document)
    broken["memories"][1]["backup_id"] = broken["memories"][0]["backup_id"]
    return broken


def _naive_time(document: dict[str, Any]) -> dict[str, Any]:
    broken = copy.deepcopy(document)
    broken["memories"][3]["created_at"] = "2025-01-01T10:00:00"
    return broken


def _future_version(document: dict[str, Any]) -> dict[str, Any]:
    return {**document, "schema_version": 4}


@pytest.mark.parametrize(("spoil", "hint"), [
    (_corrupt_deep, "importance"), (_dangling, "not in the file"), (_cycle, "cycle"),
    (_merge_cycle, "cycle"), (_duplicate_ids, "more than once"), (_naive_time, "created_at"),
    (_future_version, "schema_version"),
])
async def test_a_corrupt_file_changes_nothing(api: TestClient, fresh_api: TestClient,
                                              spoil: Callable[[dict[str, Any]], Any],
                                              hint: str) -> None:
    await build_history(api)
    document = await export(api)
    await create(fresh_api, "导入前已有的记忆")
    before = await snapshot(fresh_api)
    response = await import_file(fresh_api, spoil(document))
    assert response.status == 400
    problem = await error_of(response)
    assert problem["code"] == "invalid_backup"
    assert any(hint in text for text in problem["problems"]), problem
    assert await snapshot(fresh_api) == before


@pytest.mark.parametrize("payload", [b"[]", b"{not json", b'{"schema_version": 3}'])
async def test_import_rejects_what_is_not_a_backup(api: TestClient, payload: bytes) -> None:
    response = await api.post("/api/memories/import", data=payload,
                              headers={"Content-Type": "application/json"})
    assert response.status == 400
    assert (await error_of(response))["code"] in ("invalid_backup", "invalid_json")


async def test_version_one_files_have_no_links_and_import(api: TestClient) -> None:
    document = {"schema_version": 1, "memories": [
        {"backup_id": 1, "content": "用户喜欢猫", "importance": 6},
        {"backup_id": 2, "content": "用户喜欢狗", "merged_from": [1]},
    ]}
    report = await (await import_file(api, document)).json()
    assert report["imported"] == 2 and report["schema_version"] == 1
    assert [r["merged_from"] for r in await rows(api)] == [[], []]
    again = await (await import_file(api, document)).json()
    assert (again["imported"], again["conflicts"]) == (0, 0)


async def test_conflicts_are_reported_and_the_database_wins(api: TestClient) -> None:
    await create(api, "用户喜欢猫", importance=9)
    await create(api, "别的内容", external_id="ext:1")
    document = {"schema_version": 3, "memories": [
        {"backup_id": "a", "content": "用户喜欢猫", "importance": 4},
        {"backup_id": "b", "content": "全新的内容", "external_id": "ext:1"},
    ]}
    report = await (await import_file(api, document)).json()
    assert (report["imported"], report["skipped"], report["conflicts"]) == (1, 1, 2)
    reasons = {d["backup_id"]: d for d in report["conflict_details"]}
    assert reasons["a"]["reason"] == "differs_from_existing"
    assert reasons["a"]["fields"] == ["importance"]
    assert reasons["b"]["reason"] == "external_id_in_use"
    stored = {r["content"]: r for r in await rows(api)}
    assert stored["用户喜欢猫"]["importance"] == 9
    assert stored["全新的内容"]["external_id"] is None


async def test_export_refuses_dangling_links_until_repaired(api: TestClient) -> None:
    source = await create(api, "来源碎片")
    merged = await create(api, "合并后的事件")
    await sql(api, "UPDATE memories SET merged_from = %s::bigint[] WHERE id = %s",
              ([source["id"], 987654], merged["id"]))
    refused = await api.get("/api/memories/export")
    assert refused.status == 409
    problem = await error_of(refused)
    assert problem["code"] == "broken_links"
    assert problem["broken"][0]["missing_sources"] == [987654]

    repaired = await (await api.post("/api/memories/repair-links")).json()
    assert repaired == {"repaired": 1, "removed_sources": 1, "cleared_successors": 0,
                        "memory_ids": [merged["id"]]}
    assert (await row(api, merged["id"]))["merged_from"] == [source["id"]]
    document = await export(api)
    assert len(document["memories"]) == 2
    again = await (await api.post("/api/memories/repair-links")).json()
    assert again["repaired"] == 0


async def test_import_accepts_an_uploaded_file(make_client: Any) -> None:
    # With a gateway key: without one, /api takes JSON bodies only (no multipart).
    api = await make_client(JOB_WORKERS=0, GATEWAY_SECRET=GATEWAY_KEY)
    form = FormData()
    form.add_field("file", json.dumps({"schema_version": 3, "memories": [
        {"backup_id": 1, "content": "上传的备份"}]}).encode(), filename="backup.json",
        content_type="application/json")
    response = await api.post("/api/memories/import", data=form,
                              headers={"X-Gateway-Key": GATEWAY_KEY})
    assert response.status == 200 and (await response.json())["imported"] == 1
