"""Consolidation drafts with a scripted fake model: local days, halving, truncation, coverage,
JSON repair, 429 back-off with resume, failures that touch nothing, and every refusal."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pawwake.db.pool import cursor, execute, fetch_all
from tests.consolidation_support import (
    add,
    answer,
    answer_text,
    error_of,
    group,
    items_in,
    pool,
    prompt_of,
    run_jobs,
    snapshot,
    start,
    status,
)


@pytest.fixture
async def api(make_client: Any) -> Any:
    """The real app in UTC+8 with a memory model and no background workers."""
    return await make_client(JOB_WORKERS=0, TIMEZONE_HOURS=8, MEMORY_MODEL="test/memory",
                             MEMORY_MAX_TOKENS=4000, MEMORY_VECTOR_ENABLED=False)


async def day_of(api: Any, texts: list[str], day: str = "2025-03-01") -> list[int]:
    return [await add(api, text, at=f"{day}T0{n}:00:00+08:00") for n, text in enumerate(texts)]


async def test_range_spanning_midnight_groups_by_local_day(api: Any, upstream: Any) -> None:
    evening = await add(api, "晚上十一点半和阿杰在外滩散步", at="2025-03-01T15:30:00+00:00")
    after_midnight = await add(api, "过了午夜才到家，很累但很开心", at="2025-03-01T16:30:00+00:00")
    morning = await add(api, "第二天早上睡到十点", at="2025-03-02T02:00:00+00:00")
    dated = await add(api, "那天还买了一束花", at="2025-03-05T03:00:00+00:00",
                      event_date="2025-03-01")
    event = await add(api, "周六的聚会", at="2025-03-02T04:00:00+00:00", layer=2)
    await add(api, "下一天的事", at="2025-03-02T16:10:00+00:00")  # local 03-03: outside
    await add(api, "核心记忆不按日期整理", at="2025-03-01T03:00:00+00:00", layer=3)
    await add(api, "已归档的碎片", at="2025-03-01T03:00:00+00:00", active=False)
    await add(api, "还没提醒的事", at="2025-03-01T03:00:00+00:00",
              remind_at="2025-04-01T09:00:00+08:00")
    delivered = await add(api, "已经提醒过的事", at="2025-03-01T05:00:00+00:00",
                          remind_at="2025-03-01T09:00:00+08:00", delivered=True)
    before = await snapshot(api)

    started = await start(api, {"date_from": "2025-03-01", "date_to": "2025-03-02"})
    assert started["items"] == 6 and started["mode"] == "range"
    assert started["status_url"] == "/api/memories/consolidate/status"
    queued = await status(api)
    assert queued["status"] == "queued" and "drafts" not in queued
    answer(upstream, [group("被提醒的事", [1]),
                      group("外滩散步，买了花", [2, 3], title="外滩散步和买花的美好一晚")])
    answer(upstream, [group("午夜到家，第二天睡懒觉", [1, 2], importance=7),
                      group("周六的聚会", [3])])
    assert await run_jobs(api) == 1

    first, second = prompt_of(upstream, 0), prompt_of(upstream, 1)
    assert items_in(first) == [("2025-03-01", "已经提醒过的事"),
                               ("2025-03-01", "晚上十一点半和阿杰在外滩散步"),
                               ("2025-03-01", "那天还买了一束花")]
    assert items_in(second) == [("2025-03-02", "过了午夜才到家，很累但很开心"),
                                ("2025-03-02", "第二天早上睡到十点"), ("2025-03-02", "周六的聚会")]
    sent = upstream.requests[0].body
    assert sent["model"] == "test/memory" and sent["max_tokens"] == 4000
    assert sent["stream"] is False

    shown = await status(api)
    assert shown["status"] == "done"
    assert shown["progress"]["days_done"] == shown["progress"]["days_total"] == 2
    drafts = shown["drafts"]
    assert [d["source_ids"] for d in drafts] == [[delivered], sorted([evening, dated]),
                                                 [after_midnight, morning], [event]]
    assert [d["event_date"] for d in drafts] == ["2025-03-01"] * 2 + ["2025-03-02"] * 2
    assert [d["day"] for d in drafts] == ["2025-03-01"] * 2 + ["2025-03-02"] * 2
    assert drafts[1]["title"] == "外滩散步和买花的美好"  # clipped to 10 characters
    assert [d["draft_id"] for d in drafts] == [f"{started['job_id']}-{n}" for n in range(1, 5)]
    assert drafts[1]["sources"][0] == {
        "id": evening, "content": "晚上十一点半和阿杰在外滩散步", "title": None, "layer": 1,
        "importance": 5, "local_date": "2025-03-01",
        "version": drafts[1]["sources"][0]["version"]}
    assert [s["id"] for s in drafts[1]["sources"]] == [evening, dated]
    assert all(d["state"] == "ready" and d["layer"] == 2 and d["includes_core"] is False
               for d in drafts)
    assert drafts[2]["importance"] == 7
    async with cursor(pool(api)) as cur:
        usage = await fetch_all(cur, "SELECT usage_type, model FROM token_usage")
    assert usage == [{"usage_type": "consolidate", "model": "test/model-a"}] * 2
    assert await snapshot(api) == before  # drafts write nothing


async def test_an_oversized_day_is_halved_before_asking(api: Any, upstream: Any) -> None:
    texts = [f"第{n}段很长的日记：" + "今天发生了很多事情。" * 350 for n in range(4)]
    await day_of(api, texts)
    await start(api, {"date_from": "2025-03-01", "date_to": "2025-03-01"})
    answer(upstream, [group("前半天", [1, 2])])
    answer(upstream, [group("后半天", [1, 2])])
    await run_jobs(api)
    assert len(upstream.requests) == 2  # the oversized day itself was never sent
    assert [len(items_in(prompt_of(upstream, n))) for n in (0, 1)] == [2, 2]
    assert all(len(prompt_of(upstream, n)) <= 12000 for n in (0, 1))
    shown = await status(api)
    assert [d["content"] for d in shown["drafts"]] == ["前半天", "后半天"]
    assert shown["stats"]["halvings"] == 1


@pytest.mark.parametrize("cut", [
    pytest.param({"finish_reason": "length"}, id="finish-reason-length"),
    pytest.param({"usage": {"prompt_tokens": 900, "completion_tokens": 4000,
                            "total_tokens": 4900}}, id="usage-at-max-tokens"),
])
async def test_a_truncated_answer_is_halved_and_retried(api: Any, upstream: Any,
                                                        cut: dict[str, Any]) -> None:
    ids = await day_of(api, ["早餐吃了豆浆油条", "上午开会", "下午写代码", "晚上看电影"])
    await start(api, {"date_from": "2025-03-01", "date_to": "2025-03-01"})
    answer_text(upstream, '[{"title": "一天", "content": "早餐吃了豆浆油条，上午', **cut)
    answer(upstream, [group("早餐和会议", [1, 2])])
    answer(upstream, [group("写代码和看电影", [1, 2])])
    await run_jobs(api)
    assert [len(items_in(prompt_of(upstream, n))) for n in range(3)] == [4, 2, 2]
    shown = await status(api)
    assert [d["source_ids"] for d in shown["drafts"]] == [ids[:2], ids[2:]]
    assert shown["stats"]["repairs"] == 0  # a cut answer is split, never "repaired"


@pytest.mark.parametrize("bad", [
    pytest.param([group("少了一条", [1, 2, 3])], id="drops-an-id"),
    pytest.param([group("a", [1, 2]), group("b", [2, 3, 4])], id="repeats-an-id"),
    pytest.param([group("a", [1, 2, 3, 4, 5])], id="foreign-id"),
    pytest.param([group("", [1, 2]), group("b", [3, 4])], id="empty-content"),
])
async def test_a_draft_that_misses_or_repeats_an_id_is_rejected_and_retried(
        api: Any, upstream: Any, bad: list[dict[str, Any]]) -> None:
    ids = await day_of(api, ["去医院体检", "抽血前没吃早饭", "体检结果都正常", "晚上庆祝"])
    await start(api, {"ids": ids})
    answer(upstream, bad)
    answer(upstream, [group("体检", [1, 2])])
    answer(upstream, [group("结果正常并庆祝", [1, 2])])
    await run_jobs(api)
    shown = await status(api)
    assert shown["status"] == "done"
    assert [d["source_ids"] for d in shown["drafts"]] == [ids[:2], ids[2:]]
    assert len(upstream.requests) == 3


async def test_malformed_json_is_repaired_once_with_the_whole_text(api: Any,
                                                                   upstream: Any) -> None:
    ids = await day_of(api, ["和朋友去爬山", "山顶风景很美"])
    await start(api, {"ids": ids})
    broken = ("```json\n[{'title': '爬山', 'content': '" + "山路很长，" * 2000
              + "', 'importance': 6, 'merged_ids': [1, 2],}]\n```")
    answer_text(upstream, broken)
    answer(upstream, [group("和朋友爬山，山顶风景很美", [1, 2], title="爬山")])
    await run_jobs(api)
    assert len(upstream.requests) == 2
    repair_prompt = prompt_of(upstream, 1)
    assert broken in repair_prompt  # the whole answer, not a cut
    shown = await status(api)
    assert shown["stats"]["repairs"] == 1
    assert [(d["title"], d["source_ids"]) for d in shown["drafts"]] == [("爬山", ids)]


async def test_an_unrepairable_answer_halves_and_a_single_item_failure_fails_the_job(
        api: Any, upstream: Any) -> None:
    ids = await day_of(api, ["第一件事", "第二件事"])
    before = await snapshot(api)
    await start(api, {"ids": ids})
    answer_text(upstream, "not json at all")
    answer_text(upstream, "still not json")  # the one repair call
    answer(upstream, [group("第一件事", [1])])
    answer(upstream, [group("", [1])])  # the second half alone: no content
    await run_jobs(api)
    assert len(upstream.requests) == 4
    shown = await status(api)
    assert shown["status"] == "failed" and "drafts" not in shown
    assert shown["error"]["code"] == "answer_incomplete"
    assert str(ids[1]) in shown["error"]["message"]
    assert await snapshot(api) == before


async def test_a_failure_leaves_every_fragment_untouched(api: Any, upstream: Any) -> None:
    ids = await day_of(api, ["买了新自行车", "骑车去上班", "车胎被扎了"])
    ids += await day_of(api, ["修好了车胎"], day="2025-03-02")
    before = await snapshot(api)
    await start(api, {"date_from": "2025-03-01", "date_to": "2025-03-02"})
    answer(upstream, [group("新自行车", [1, 2, 3])])  # day one is fine
    answer_text(upstream, '[{"content": "修车', finish_reason="length")  # a single item cut
    await run_jobs(api)
    shown = await status(api)
    assert shown["status"] == "failed"
    assert shown["error"]["code"] == "answer_truncated"
    assert await snapshot(api) == before
    refused = await api.post("/api/memories/merge", json={"draft_id": f"{shown['job_id']}-1"})
    assert refused.status == 404  # a failed run offers no drafts to confirm


async def test_a_model_refusal_fails_at_once(api: Any, upstream: Any) -> None:
    ids = await day_of(api, ["a", "b"])
    await start(api, {"ids": ids})
    upstream.reply_error(400, "no such model")
    await run_jobs(api)
    shown = await status(api)
    assert shown["status"] == "failed" and shown["error"]["code"] == "model_refused"
    assert len(upstream.requests) == 1


async def test_429_backs_off_and_resumes_where_it_stopped(api: Any, upstream: Any) -> None:
    await day_of(api, ["一号的事", "一号的另一件事"])
    await day_of(api, ["二号的事"], day="2025-03-02")
    await start(api, {"date_from": "2025-03-01", "date_to": "2025-03-02"})
    answer(upstream, [group("一号", [1, 2])])
    upstream.reply_error(429, "slow down")
    assert await run_jobs(api) == 1
    waiting = await status(api)
    assert waiting["status"] == "retrying" and "429" in waiting["last_error"]
    assert waiting["progress"]["days_done"] == 1 and "resume" not in waiting["progress"]
    again = await api.post("/api/memories/consolidate", json={"ids": [1, 2]})
    assert again.status == 409  # still one run at a time while it waits

    await _due_now(api)
    answer(upstream, [group("二号", [1])])
    assert await run_jobs(api) == 1
    shown = await status(api)
    assert shown["status"] == "done"
    assert [d["content"] for d in shown["drafts"]] == ["一号", "二号"]
    assert len(upstream.requests) == 3  # day one was not asked again
    assert shown["stats"]["rate_limited"] == 1


async def test_429_back_off_is_bounded(api: Any, upstream: Any) -> None:
    ids = await day_of(api, ["a", "b"])
    await start(api, {"ids": ids})
    for _ in range(7):
        upstream.reply_error(429)
        await run_jobs(api)
        await _due_now(api)
    shown = await status(api)
    assert shown["status"] == "failed" and shown["error"]["code"] == "rate_limited"


async def _due_now(api: Any) -> None:
    """Let a job waiting out its back-off run now."""
    async with cursor(pool(api)) as cur:
        await execute(cur, "UPDATE jobs SET run_after = now() WHERE status = 'pending'")


async def test_running_workers_pick_up_a_run(make_client: Any, upstream: Any) -> None:
    client = await make_client(JOB_WORKERS=1, MEMORY_VECTOR_ENABLED=False)
    ids = await day_of(client, ["早上", "晚上"])
    answer(upstream, [group("一天", [1, 2])])
    await start(client, {"ids": ids})
    for _ in range(1000):  # the worker was woken; wait for it, not for a clock
        shown = await status(client)
        if shown["status"] in ("done", "failed"):
            break
        await asyncio.sleep(0.02)
    assert shown["status"] == "done"
    assert [d["source_ids"] for d in shown["drafts"]] == [ids]


# --- refusals ------------------------------------------------------------------------------

@pytest.mark.parametrize(("body", "code"), [
    ({}, "missing_field"),
    ({"ids": "1,2"}, "invalid_field"),
    ({"ids": [1]}, "too_few_memories"),
    ({"ids": [1, 1]}, "too_few_memories"),
    ({"ids": [1, True]}, "invalid_field"),
    ({"ids": [1, 2], "date_from": "2025-03-01"}, "ambiguous_request"),
    ({"ids": [1, 2], "colour": "red"}, "unknown_field"),
    ({"date_from": "2025-03-01"}, "missing_field"),
    ({"date_from": "2025/03/01", "date_to": "2025-03-02"}, "invalid_field"),
    ({"date_from": "2025-02-30", "date_to": "2025-03-02"}, "invalid_field"),
    ({"date_from": "2025-03-02", "date_to": "2025-03-01"}, "invalid_range"),
    ({"date_from": "2024-01-01", "date_to": "2025-03-01"}, "range_too_long"),
    ({"date_from": "2030-01-01", "date_to": "2030-01-02"}, "nothing_to_consolidate"),
])
async def test_bad_requests_are_400(api: Any, body: dict[str, Any], code: str) -> None:
    await add(api, "x", at="2025-03-01T10:00:00+08:00")
    response = await api.post("/api/memories/consolidate", json=body)
    assert response.status == 400
    assert (await error_of(response))["code"] == code
    assert (await status(api))["status"] == "none"


async def test_selection_refusals_name_the_memories(api: Any) -> None:
    good = await add(api, "好的")
    archived = await add(api, "归档的", active=False)
    waiting = await add(api, "待提醒", remind_at="2030-01-01T09:00:00+08:00")
    response = await api.post("/api/memories/consolidate", json={"ids": [good, archived]})
    assert response.status == 400
    refused = await error_of(response)
    assert refused["code"] == "memory_archived" and refused["ids"] == [archived]
    response = await api.post("/api/memories/consolidate", json={"ids": [good, waiting]})
    assert response.status == 400
    assert (await error_of(response))["code"] == "memory_has_reminder"
    response = await api.post("/api/memories/consolidate", json={"ids": [good, 999]})
    assert response.status == 404 and (await error_of(response))["code"] == "not_found"
    core = await add(api, "核心", layer=3)
    accepted = await api.post("/api/memories/consolidate", json={"ids": [good, core]})
    assert accepted.status == 202  # a selection may hold any layer


async def test_one_run_at_a_time_and_cancel(api: Any, upstream: Any) -> None:
    ids = await day_of(api, ["a", "b", "c"])
    first = await start(api, {"ids": ids[:2]})
    busy = await api.post("/api/memories/consolidate", json={"ids": ids[1:]})
    assert busy.status == 409
    refused = await error_of(busy)
    assert refused["code"] == "consolidation_running" and refused["job_id"] == first["job_id"]

    cancelled = await api.post("/api/memories/consolidate/cancel")
    assert cancelled.status == 200
    assert await cancelled.json() == {"cancelled": True, "job_id": first["job_id"]}
    shown = await status(api)
    assert shown["status"] == "failed" and shown["error"]["code"] == "cancelled"
    assert await run_jobs(api) == 0 and upstream.requests == []
    nothing = await api.post("/api/memories/consolidate/cancel")
    assert nothing.status == 409 and (await error_of(nothing))["code"] == "not_running"
    second = await start(api, {"ids": ids[1:]})
    assert second["job_id"] != first["job_id"]


async def test_status_of_runs(api: Any) -> None:
    assert await status(api) == {"status": "none", "job_id": None}
    for query in ("job_id=999", "job_id=abc"):
        response = await api.get(f"/api/memories/consolidate/status?{query}")
        assert response.status == (404 if query.endswith("999") else 400)
    ids = await day_of(api, ["a", "b"])
    made = await start(api, {"ids": ids})
    named = await api.get(f"/api/memories/consolidate/status?job_id={made['job_id']}")
    assert (await named.json())["request"] == {"ids": ids}


async def test_consolidation_without_a_database_is_503(make_client: Any) -> None:
    client = await make_client(DATABASE_ENABLED=False)
    response = await client.post("/api/memories/consolidate", json={"ids": [1, 2]})
    assert response.status == 503
