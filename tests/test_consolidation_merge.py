"""Confirming drafts and manual merges: the merge transaction, races, core sources, reverts,
sources, delete protection and core candidates."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pawwake.db.pool import cursor, execute, fetch_all, fetch_one, transaction
from tests.consolidation_support import (
    add,
    error_of,
    group,
    make_drafts,
    pool,
    snapshot,
    status,
)


@pytest.fixture
async def api(make_client: Any) -> Any:
    return await make_client(JOB_WORKERS=0, TIMEZONE_HOURS=8, MEMORY_MODEL="test/memory",
                             MEMORY_VECTOR_ENABLED=False)


async def picnic(api: Any) -> list[int]:
    """Three fragments of one Saturday in UTC+8, the first one just before local midnight."""
    return [await add(api, "周五晚上准备了野餐的三明治", at="2025-05-02T15:50:00+00:00"),
            await add(api, "周六和阿杰去公园野餐", at="2025-05-03T02:00:00+00:00",
                      importance=6),
            await add(api, "野餐时下了小雨，但很开心", at="2025-05-03T05:00:00+00:00")]


async def picnic_draft(api: Any, upstream: Any) -> tuple[list[int], dict[str, Any]]:
    ids = await picnic(api)
    [draft] = await make_drafts(api, upstream, ids, [
        group("周五备好三明治，周六和阿杰去公园野餐，下了小雨但很开心", [1, 2, 3],
              title="公园野餐", importance=7)])
    return ids, draft


async def confirm(api: Any, body: dict[str, Any]) -> Any:
    return await api.post("/api/memories/merge", json=body)


async def test_confirming_a_draft_merges_in_one_step(api: Any, upstream: Any) -> None:
    ids, draft = await picnic_draft(api, upstream)
    response = await confirm(api, {"draft_id": draft["draft_id"]})
    assert response.status == 201, await response.text()
    body = await response.json()
    merged = body["memory"]
    assert body["archived_ids"] == ids and body["draft_id"] == draft["draft_id"]
    assert (merged["content"], merged["title"], merged["importance"], merged["layer"]) == (
        draft["content"], "公园野餐", 7, 2)
    assert merged["event_date"] == "2025-05-02"  # the earliest local date, not UTC's
    assert merged["merged_from"] == ids and merged["is_active"] is True
    async with cursor(pool(api)) as cur:
        stored = await fetch_all(cur, "SELECT id, is_active, search_terms FROM memories"
                                 " ORDER BY id")
    assert [r["is_active"] for r in stored] == [False, False, False, True]
    assert "野餐" in stored[-1]["search_terms"]
    async with cursor(pool(api)) as cur:
        jobs = await fetch_all(cur, "SELECT kind FROM jobs WHERE status = 'pending'")
    assert {"kind": "memory_embed"} in jobs
    [shown] = (await status(api))["drafts"]
    assert shown["state"] == "confirmed" and shown["merged_id"] == merged["id"]


async def test_a_confirm_may_edit_the_draft(api: Any, upstream: Any) -> None:
    ids, draft = await picnic_draft(api, upstream)
    response = await confirm(api, {"draft_id": draft["draft_id"], "content": "改写后的野餐",
                                   "title": None, "importance": 9, "layer": 3,
                                   "source_ids": list(reversed(ids))})
    assert response.status == 201
    merged = (await response.json())["memory"]
    assert (merged["content"], merged["title"], merged["importance"], merged["layer"]) == (
        "改写后的野餐", None, 9, 3)


@pytest.mark.parametrize("change", ["archive", "edit", "reminder", "promote"])
async def test_a_source_changed_after_the_draft_makes_the_confirm_409(
        api: Any, upstream: Any, change: str) -> None:
    ids, draft = await picnic_draft(api, upstream)
    target = f"/api/memories/{ids[1]}"
    if change == "archive":
        assert (await api.delete(target)).status == 200
    elif change == "edit":
        assert (await api.put(target, json={"content": "其实是去了海边"})).status == 200
    elif change == "promote":
        assert (await api.post(f"{target}/promote")).status == 200
    else:
        await _sql(api, "UPDATE memories SET remind_at = now() + interval '1 day'"
                        " WHERE id = %s", (ids[1],))
    before = await snapshot(api)
    response = await confirm(api, {"draft_id": draft["draft_id"]})
    assert response.status == 409
    refused = await error_of(response)
    expected_code = "source_archived" if change == "archive" else "source_changed"
    assert refused["code"] == expected_code and refused["ids"] == [ids[1]]
    assert await snapshot(api) == before
    [shown] = (await status(api))["drafts"]
    assert shown["state"] == "stale" and shown["changed_ids"] == [ids[1]]


async def test_two_concurrent_confirms_of_one_draft_make_one_event(api: Any,
                                                                   upstream: Any) -> None:
    ids, draft = await picnic_draft(api, upstream)
    # Hold one source locked until both confirms wait inside their transactions, so they
    # really race for the same rows instead of running one after the other.
    async with transaction(pool(api)) as cur:
        await cur.execute("SELECT id FROM memories WHERE id = %s FOR UPDATE", (ids[0],))
        racing = asyncio.gather(*(confirm(api, {"draft_id": draft["draft_id"]})
                                  for _ in range(2)))
        await _lock_waiters(api, 2)
    responses = await racing
    assert sorted(r.status for r in responses) == [201, 409]
    loser = next(r for r in responses if r.status == 409)
    winner = next(r for r in responses if r.status == 201)
    refused = await error_of(loser)
    assert refused["code"] == "already_merged"
    assert refused["merged_id"] == (await winner.json())["memory"]["id"]
    async with cursor(pool(api)) as cur:
        events = await fetch_all(cur, "SELECT id FROM memories WHERE layer = 2")
    assert len(events) == 1
    again = await confirm(api, {"draft_id": draft["draft_id"]})
    assert again.status == 409 and (await error_of(again))["code"] == "already_merged"


async def test_a_draft_with_a_core_source_needs_its_own_confirmation(api: Any,
                                                                     upstream: Any) -> None:
    core = await add(api, "对花生过敏，随身带肾上腺素笔", layer=3, importance=9)
    fragment = await add(api, "今天在餐厅特意问了有没有花生")
    [draft] = await make_drafts(api, upstream, [core, fragment],
                                [group("对花生过敏，在餐厅特意确认", [1, 2])])
    assert draft["includes_core"] is True and draft["layer"] == 3
    refused = await confirm(api, {"draft_id": draft["draft_id"]})
    assert refused.status == 409
    assert (await error_of(refused))["code"] == "core_confirmation_required"
    too_low = await confirm(api, {"draft_id": draft["draft_id"], "layer": 2,
                                  "confirm_core": True})
    assert too_low.status == 400 and (await error_of(too_low))["code"] == "layer_below_sources"
    async with cursor(pool(api)) as cur:
        assert len(await fetch_all(cur, "SELECT id FROM memories")) == 2
    accepted = await confirm(api, {"draft_id": draft["draft_id"], "confirm_core": True})
    assert accepted.status == 201
    assert (await accepted.json())["memory"]["layer"] == 3


async def test_manual_merge(api: Any) -> None:
    a = await add(api, "开始学吉他", at="2025-06-01T10:00:00+08:00", importance=4)
    b = await add(api, "吉他老师姓王", at="2025-06-03T10:00:00+08:00", importance=6)
    response = await confirm(api, {"source_ids": [b, a], "content": "开始学吉他，老师姓王"})
    assert response.status == 201
    merged = (await response.json())["memory"]
    assert merged["merged_from"] == [a, b] and merged["layer"] == 2
    assert merged["importance"] == 6 and merged["event_date"] == "2025-06-01"
    assert merged["title"] is None


async def test_merge_refusals(api: Any, upstream: Any) -> None:
    a, b = await add(api, "甲"), await add(api, "乙")
    archived = await add(api, "归档", active=False)
    waiting = await add(api, "提醒", remind_at="2030-01-01T09:00:00+08:00")
    cases = [
        ({"source_ids": [a], "content": "x"}, 400, "too_few_sources"),
        ({"source_ids": [a, b]}, 400, "missing_field"),
        ({"source_ids": [a, b], "content": "x", "layer": 1}, 400, "invalid_field"),
        ({"source_ids": [a, b], "content": " "}, 400, "invalid_field"),
        ({"source_ids": [a, b], "content": "x", "confirm_core": "yes"}, 400, "invalid_field"),
        ({"source_ids": [a, b], "content": "x", "colour": 1}, 400, "unknown_field"),
        ({"source_ids": [a, b], "content": "x", "expected": "abc"}, 400, "invalid_field"),
        ({"draft_id": "1-1", "expected": "0" * 32}, 400, "ambiguous_request"),
        ([a, b], 400, "invalid_body"),
        ({"source_ids": [a, 999], "content": "x"}, 404, "not_found"),
        ({"draft_id": "999-1"}, 404, "not_found"),
        ({"draft_id": "nonsense"}, 404, "not_found"),
        ({"source_ids": [a, archived], "content": "x"}, 409, "source_archived"),
        ({"source_ids": [a, waiting], "content": "x"}, 409, "source_has_reminder"),
        ({"source_ids": [a, b], "content": "x", "expected": "0" * 32}, 409, "source_changed"),
    ]
    before = await snapshot(api)
    for body, code_status, code in cases:
        response = await confirm(api, body)
        assert response.status == code_status, (body, await response.text())
        assert (await error_of(response))["code"] == code, body
    assert await snapshot(api) == before
    [draft] = await make_drafts(api, upstream, [a, b], [group("甲乙", [1, 2])])
    mismatch = await confirm(api, {"draft_id": draft["draft_id"], "source_ids": [a]})
    assert mismatch.status == 400
    assert (await error_of(mismatch))["code"] == "draft_sources_mismatch"
    matching = await confirm(api, {"source_ids": [a, b], "content": "甲乙",
                                   "expected": draft["fingerprint"]})
    assert matching.status == 201


# --- revert and sources --------------------------------------------------------------------

async def test_revert_restores_exactly_the_sources(api: Any, upstream: Any) -> None:
    ids, draft = await picnic_draft(api, upstream)
    bystander = await add(api, "无关的碎片", active=False)
    before = {r["id"]: r for r in await snapshot(api)}
    merged = (await (await confirm(api, {"draft_id": draft["draft_id"]})).json())["memory"]

    shown = await (await api.get(f"/api/memories/{merged['id']}/sources")).json()
    assert shown["merged"] is True and shown["can_revert"] is True
    assert [s["id"] for s in shown["sources"]] == ids and shown["missing_ids"] == []

    response = await api.post(f"/api/memories/{merged['id']}/revert-merge")
    assert response.status == 200
    body = await response.json()
    assert body["restored_ids"] == ids
    assert body["archived"]["id"] == merged["id"] and body["archived"]["is_active"] is False
    assert body["archived"]["merged_from"] == []
    after = {r["id"]: r for r in await snapshot(api)}
    for source in ids:
        assert after[source]["is_active"] is True and after[source]["archived_at"] is None
        assert after[source]["content"] == before[source]["content"]
    assert after[bystander] == before[bystander]
    [state] = (await status(api))["drafts"]
    assert state["state"] == "ready"  # the draft could be confirmed again

    twice = await api.post(f"/api/memories/{merged['id']}/revert-merge")
    assert twice.status == 409 and (await error_of(twice))["code"] == "not_merged"
    shown = await (await api.get(f"/api/memories/{merged['id']}/sources")).json()
    assert shown["merged"] is False and shown["can_revert"] is False


async def test_revert_with_a_missing_source_changes_nothing(api: Any, upstream: Any) -> None:
    ids, draft = await picnic_draft(api, upstream)
    merged = (await (await confirm(api, {"draft_id": draft["draft_id"]})).json())["memory"]
    await _sql(api, "DELETE FROM memories WHERE id = %s", (ids[0],))  # an old broken link
    before = await snapshot(api)
    response = await api.post(f"/api/memories/{merged['id']}/revert-merge")
    assert response.status == 409
    refused = await error_of(response)
    assert refused["code"] == "source_missing" and refused["ids"] == [ids[0]]
    assert await snapshot(api) == before
    shown = await (await api.get(f"/api/memories/{merged['id']}/sources")).json()
    assert shown["missing_ids"] == [ids[0]] and shown["can_revert"] is False
    assert shown["revert_blocker"]["code"] == "source_missing"


async def test_a_merge_merged_again_reverts_outer_first(api: Any, upstream: Any) -> None:
    ids, draft = await picnic_draft(api, upstream)
    inner = (await (await confirm(api, {"draft_id": draft["draft_id"]})).json())["memory"]
    other = await add(api, "野餐后一起看了电影", layer=2)
    outer = await confirm(api, {"source_ids": [inner["id"], other], "content": "野餐和电影"})
    assert outer.status == 201
    outer_id = (await outer.json())["memory"]["id"]
    refused = await api.post(f"/api/memories/{inner['id']}/revert-merge")
    assert refused.status == 409
    assert (await error_of(refused)) | {"message": ""} == {
        "code": "merged_again", "message": "", "merged_id": outer_id}
    assert (await api.post(f"/api/memories/{outer_id}/revert-merge")).status == 200
    assert (await api.post(f"/api/memories/{inner['id']}/revert-merge")).status == 200
    async with cursor(pool(api)) as cur:
        active = await fetch_all(cur, "SELECT id FROM memories WHERE is_active ORDER BY id")
    assert [r["id"] for r in active] == [*ids, other]


async def test_merge_sources_and_chain_members_cannot_be_deleted(
        api: Any, upstream: Any) -> None:
    ids, draft = await picnic_draft(api, upstream)
    merged = (await (await confirm(api, {"draft_id": draft["draft_id"]})).json())["memory"]
    old, new = await add(api, "住在北京"), await add(api, "搬到了上海")
    await _sql(api, "UPDATE memories SET is_active = false, archived_at = now(),"
                    " superseded_by = %s WHERE id = %s", (new, old))
    for memory_id, code in ((ids[0], "merge_source"), (old, "version_chain_member")):
        response = await api.delete(f"/api/memories/{memory_id}", params={"soft": "false"})
        assert response.status == 409 and (await error_of(response))["code"] == code
    batch = await api.post("/api/memories/batch-delete",
                           json={"ids": [*ids, old], "soft": False})
    assert (await batch.json())["deleted"] == 0
    # After a revert the merge no longer needs its sources: an archived one may then go.
    assert (await api.post(f"/api/memories/{merged['id']}/revert-merge")).status == 200
    assert (await api.delete(f"/api/memories/{ids[0]}")).status == 200
    gone = await api.delete(f"/api/memories/{ids[0]}", params={"soft": "false"})
    assert gone.status == 200


async def test_the_cleanup_deletes_old_merge_sources_and_ends_their_merge(
        api: Any, upstream: Any) -> None:
    _ids, draft = await picnic_draft(api, upstream)
    merged = (await (await confirm(api, {"draft_id": draft["draft_id"]})).json())["memory"]
    old, new = await add(api, "住在北京"), await add(api, "搬到了上海")
    await _sql(api, "UPDATE memories SET is_active = false, archived_at = now(),"
                    " superseded_by = %s WHERE id = %s", (new, old))
    cleaned = await api.post("/api/memories/cleanup-fragments", json={"days": 0})
    report = await cleaned.json()
    assert (report["deleted"], report["merge_sources_deleted"], report["merges_ended"]) == (
        3, 3, 1)
    assert report["kept_reasons"] == {"version_chain_member": 1}
    assert {r["id"] for r in await snapshot(api)} == {merged["id"], old, new}
    shown = await (await api.get(f"/api/memories/{merged['id']}/sources")).json()
    assert shown["merged"] is False and shown["sources"] == []
    refused = await api.post(f"/api/memories/{merged['id']}/revert-merge")
    assert refused.status == 409 and (await error_of(refused))["code"] == "not_merged"


async def test_unknown_memories_are_404(api: Any) -> None:
    for method, path in (("POST", "/api/memories/999/revert-merge"),
                         ("GET", "/api/memories/999/sources")):
        response = await api.request(method, path)
        assert response.status == 404 and (await error_of(response))["code"] == "not_found"
    plain = await add(api, "普通碎片")
    shown = await (await api.get(f"/api/memories/{plain}/sources")).json()
    assert shown["merged"] is False and shown["sources"] == []
    refused = await api.post(f"/api/memories/{plain}/revert-merge")
    assert refused.status == 409 and (await error_of(refused))["code"] == "not_merged"


# --- core candidates -----------------------------------------------------------------------

async def test_core_candidates_explain_themselves_and_promote_nothing(api: Any) -> None:
    sources = [await add(api, f"来源{n}", active=False, layer=1 if n < 3 else 2)
               for n in range(4)]
    many = await add(api, "四条合并成的事件", layer=2, importance=5)
    await _sql(api, "UPDATE memories SET merged_from = %s::bigint[] WHERE id = %s",
               (sources, many))
    both = await add(api, "重要又多来源", layer=2, importance=9)
    await _sql(api, "UPDATE memories SET merged_from = %s::bigint[] WHERE id = %s",
               (sources[:3], both))
    important = await add(api, "很重要的事件", layer=2, importance=8)
    await add(api, "普通事件", layer=2, importance=7)
    await add(api, "重要的碎片", layer=1, importance=10)
    await add(api, "已经是核心", layer=3, importance=10)
    await add(api, "归档的重要事件", layer=2, importance=9, active=False)

    response = await api.get("/api/memories/core-candidates")
    assert response.status == 200
    body = await response.json()
    assert [c["id"] for c in body["candidates"]] == [both, important, many]
    first, second, third = body["candidates"]
    assert [r["code"] for r in first["reasons"]] == ["many_sources", "high_importance"]
    assert first["reasons"][0]["text"] == "merged from 3 fragments"
    assert second["reasons"] == [{"code": "high_importance", "importance": 8,
                                  "text": "importance 8"}]
    assert third["reasons"][0] | {"text": ""} == {
        "code": "many_sources", "sources": 4, "fragments": 3, "events": 1, "text": ""}
    assert third["reasons"][0]["text"] == "merged from 3 fragments and 1 event"
    async with cursor(pool(api)) as cur:
        layers = await fetch_all(cur, "SELECT layer FROM memories WHERE id = ANY(%s)",
                                 ([both, important, many],))
    assert {r["layer"] for r in layers} == {2}  # suggestions only

    promoted = await api.post(f"/api/memories/{important}/promote")
    assert promoted.status == 200 and (await promoted.json())["layer"] == 3
    after = await (await api.get("/api/memories/core-candidates")).json()
    assert important not in [c["id"] for c in after["candidates"]]


async def test_core_candidates_are_capped_at_20(api: Any) -> None:
    for n in range(25):
        await add(api, f"重要事件{n}", layer=2, importance=8 + n % 3)
    body = await (await api.get("/api/memories/core-candidates")).json()
    assert body["count"] == 20
    importances = [c["importance"] for c in body["candidates"]]
    assert importances == sorted(importances, reverse=True)
    few = await (await api.get("/api/memories/core-candidates?limit=2")).json()
    assert few["count"] == 2
    for bad in ("0", "21", "x"):
        response = await api.get(f"/api/memories/core-candidates?limit={bad}")
        assert response.status == 400


async def _sql(api: Any, statement: str, params: Any = None) -> None:
    async with cursor(pool(api)) as cur:
        await execute(cur, statement, params)


async def _lock_waiters(api: Any, count: int) -> None:
    """Wait until ``count`` sessions of this database wait for a row lock."""
    for _ in range(2000):
        async with cursor(pool(api)) as cur:
            row = await fetch_one(cur, "SELECT count(*) AS n FROM pg_stat_activity"
                                  " WHERE datname = current_database() AND wait_event_type = 'Lock'")
        if row is not None and row["n"] >= count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{count} confirms never met at the row lock")
