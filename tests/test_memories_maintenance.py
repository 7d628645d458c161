"""/api/memories maintenance: layer stats, the duplicate check and fragment cleanup."""

from __future__ import annotations

from typing import Any

import pytest

from tests.memory_support import create, merge, rows, sql, supersede


@pytest.fixture
async def api(make_client: Any) -> Any:
    """The real app without background workers (jobs stay queued where tests can see them)."""
    return await make_client(JOB_WORKERS=0)

# --- stats, duplicates, cleanup ------------------------------------------------------------

async def test_layer_stats_count_active_and_archived(api: Any) -> None:
    for layer in (1, 1, 2, 3):
        await create(api, f"layer {layer} {id(layer)}", layer=layer)
    gone = await create(api, "archived fragment")
    await api.delete(f"/api/memories/{gone['id']}")
    body = await (await api.get("/api/memories/layer-stats")).json()
    assert body["layers"] == [
        {"layer": 1, "name": "fragment", "active": 2, "archived": 1},
        {"layer": 2, "name": "event", "active": 1, "archived": 0},
        {"layer": 3, "name": "core", "active": 1, "archived": 0}]
    assert (body["active"], body["archived"]) == (4, 1)


@pytest.mark.parametrize(("text", "reason"), [
    ("用户 喜欢在周末去公园跑步", "exact"),
    ("  用户喜欢在周末去公园跑步，风雨无阻  ", "containment"),
    ("周末用户喜欢去公园跑步", "jaccard"),
    ("用户对花生过敏", None),
])
async def test_check_duplicate_reasons(api: Any, text: str, reason: str | None) -> None:
    existing = await create(api, "用户喜欢在周末去公园跑步")
    await create(api, "用户的猫叫小橘")
    response = await api.post("/api/memories/check-duplicate", json={"content": text})
    assert response.status == 200
    body = await response.json()
    assert body["reason"] == reason
    assert body["is_duplicate"] is (reason is not None)
    assert body["matched_id"] == (existing["id"] if reason else None)
    if reason == "exact":
        assert body["similarity"] == 1.0
    if reason == "jaccard":
        assert body["similarity"] >= 0.7


async def test_check_duplicate_ignores_archived_rows(api: Any) -> None:
    made = await create(api, "用户喜欢爬山")
    await api.delete(f"/api/memories/{made['id']}")
    body = await (await api.post("/api/memories/check-duplicate",
                                 json={"content": "用户喜欢爬山"})).json()
    assert body["is_duplicate"] is False


async def test_cleanup_fragments_keeps_chain_members_and_ends_the_merges_it_empties(
        api: Any) -> None:
    plain = await create(api, "旧碎片")
    old, new = await create(api, "旧版本"), await create(api, "新版本")
    src, merged = await create(api, "合并来源"), await create(api, "合并结果")
    recent = await create(api, "刚归档的碎片")
    event = await create(api, "归档的事件", layer=2)
    await supersede(api, old["id"], new["id"])
    await merge(api, merged["id"], [src["id"]])
    for memory in (plain, recent, event):
        await api.delete(f"/api/memories/{memory['id']}")
    await sql(api, "UPDATE memories SET archived_at = now() - interval '40 days'"
                   " WHERE id = ANY(%s)",
              ([plain["id"], old["id"], src["id"], event["id"]],))

    response = await api.post("/api/memories/cleanup-fragments", json={"days": 30})
    assert response.status == 200
    report = await response.json()
    assert report == {"days": 30, "deleted": 2, "kept": 1,
                      "kept_reasons": {"version_chain_member": 1},
                      "merge_sources_deleted": 1, "merges_ended": 1}
    remaining = {r["id"] for r in await rows(api)}
    assert plain["id"] not in remaining and src["id"] not in remaining
    assert {old["id"], merged["id"], recent["id"], event["id"]} <= remaining
    # The merged memory keeps its text; its merge cannot be reverted any more.
    kept = await (await api.get(f"/api/memories/{merged['id']}")).json()
    assert kept["content"] == "合并结果" and kept["is_active"] is True
    revert = await api.post(f"/api/memories/{merged['id']}/revert-merge")
    assert revert.status == 409
    bad = await api.post("/api/memories/cleanup-fragments", json={"days": -1})
    assert bad.status == 400
