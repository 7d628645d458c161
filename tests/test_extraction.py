"""Memory extraction with a scripted fake model: actions, refusals, failures, crash recovery."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from pawwake.conversations.extraction_schedule import EXTRACT_KIND, schedule_extraction
from pawwake.db import jobs as jobs_db
from pawwake.db.conversations import NewMessage, insert_messages
from pawwake.db.pool import cursor, fetch_all, fetch_one, transaction
from pawwake.memory.extraction.parse import is_meta_talk, parse_answer
from pawwake.services import services_of
from pawwake.text import tokens
from tests.fake_upstream import Reply, completion_body

SESSION = "chat-1"


@pytest.fixture
async def app(make_client: Any) -> Any:
    client = await make_client(JOB_WORKERS=0, MEMORY_ENABLED=True, MEMORY_MODEL="test/memory",
                               MEMORY_EXTRACT_INTERVAL=1)
    app = client.server.app
    assert EXTRACT_KIND in services_of(app).jobs.handlers
    return app


async def add_memory(app: Any, content: str, *, layer: int = 1) -> int:
    tokens.load()
    async with transaction(services_of(app).database.pool) as cur:
        await cur.execute("INSERT INTO memories (content, layer, search_terms) VALUES (%s, %s, %s)"
                          " RETURNING id", (content, layer, tokens.index_terms(content)))
        return (await cur.fetchone())[0]


async def store_round(app: Any, user_text: str, reply_text: str, session: str = SESSION
                      ) -> int | None:
    """Store one finished round the way the gateway does, and schedule extraction with it."""
    settings = await services_of(app).config.fresh()
    async with transaction(services_of(app).database.pool) as cur:
        await insert_messages(cur, session, [NewMessage("user", user_text),
                                             NewMessage("assistant", reply_text)])
        return await schedule_extraction(cur, settings, session)


def model_says(upstream: Any, items: list[dict[str, Any]], **kwargs: Any) -> None:
    upstream.queue(Reply(body=completion_body(json.dumps({"memories": items},
                                                         ensure_ascii=False), **kwargs)))


async def memories(app: Any) -> list[dict[str, Any]]:
    async with cursor(services_of(app).database.pool) as cur:
        return await fetch_all(cur,
                               "SELECT id, content, importance, layer, is_active, superseded_by,"
                               " remind_at, source_session FROM memories ORDER BY id")


async def job_row(app: Any, job_id: int) -> dict[str, Any]:
    async with cursor(services_of(app).database.pool) as cur:
        return await jobs_db.get_job(cur, job_id)


async def test_new_memory_is_learned_from_the_round(app: Any, upstream: Any) -> None:
    job_id = await store_round(app, "我的猫叫小橘，是一只橘猫", "小橘这个名字真可爱！")
    assert job_id is not None
    model_says(upstream, [{"content": "用户的猫叫小橘，是一只橘猫", "importance": 7,
                           "action": "new", "candidate_id": None, "remind_at": None,
                           "source_refs": [1]}])
    await services_of(app).jobs.run_until_idle()
    rows = await memories(app)
    assert [(r["content"], r["importance"], r["layer"]) for r in rows] == [
        ("用户的猫叫小橘，是一只橘猫", 7, 1)]
    assert rows[0]["source_session"] == SESSION
    sent = upstream.requests[-1].body
    assert sent["model"] == "test/memory"
    prompt = sent["messages"][0]["content"]
    assert "1. User: 我的猫叫小橘" in prompt and "2. Assistant: 小橘这个名字真可爱" in prompt
    async with cursor(services_of(app).database.pool) as cur:
        usage = await fetch_one(cur,
                                "SELECT usage_type FROM token_usage WHERE usage_type = 'extract'")
    assert usage is not None
    assert (await job_row(app, job_id))["status"] == "done"


async def test_duplicate_is_dropped_and_supersede_replaces_a_fragment(app: Any, upstream: Any
                                                                      ) -> None:
    old_city = await add_memory(app, "用户住在杭州")
    cat = await add_memory(app, "用户的猫叫小橘")
    await store_round(app, "我搬到上海了，对了小橘还好", "搬家辛苦啦")
    model_says(upstream, [
        {"content": "用户的猫叫小橘", "importance": 6, "action": "duplicate",
         "candidate_id": cat},
        {"content": "用户搬到了上海", "importance": 7, "action": "supersede",
         "candidate_id": old_city}])
    await services_of(app).jobs.run_until_idle()
    rows = {r["content"]: r for r in await memories(app)}
    assert set(rows) == {"用户住在杭州", "用户的猫叫小橘", "用户搬到了上海"}
    assert rows["用户住在杭州"]["is_active"] is False
    assert rows["用户住在杭州"]["superseded_by"] == rows["用户搬到了上海"]["id"]
    assert rows["用户搬到了上海"]["is_active"] is True


@pytest.mark.parametrize("layer", [2, 3])
async def test_events_and_core_are_never_superseded_automatically(app: Any, upstream: Any,
                                                                  layer: int) -> None:
    kept = await add_memory(app, "用户在杭州工作了五年", layer=layer)
    await store_round(app, "我现在在上海工作", "新工作加油")
    model_says(upstream, [{"content": "用户现在在上海工作", "importance": 7,
                           "action": "supersede", "candidate_id": kept}])
    await services_of(app).jobs.run_until_idle()
    rows = {r["content"]: r for r in await memories(app)}
    assert rows["用户在杭州工作了五年"]["is_active"] is True
    assert rows["用户在杭州工作了五年"]["superseded_by"] is None
    assert rows["用户现在在上海工作"]["is_active"] is True


async def test_supersede_naming_an_id_outside_the_candidates_only_adds(app: Any, upstream: Any
                                                                        ) -> None:
    outsider = await add_memory(app, "Favourite colour is teal")
    for number in range(12):  # newer, unrelated: the outsider is neither latest nor related
        await add_memory(app, f"Unrelated note number {number} about gardening tools")
    await store_round(app, "我的生日是三月五号", "记下啦")
    model_says(upstream, [{"content": "用户的生日是三月五号", "importance": 8,
                           "action": "supersede", "candidate_id": outsider}])
    await services_of(app).jobs.run_until_idle()
    prompt = upstream.requests[-1].body["messages"][0]["content"]
    assert f"{outsider}: Favourite colour" not in prompt
    rows = {r["content"]: r for r in await memories(app)}
    assert rows["Favourite colour is teal"]["is_active"] is True
    assert rows["用户的生日是三月五号"]["is_active"] is True


@pytest.mark.parametrize("answer", [
    "Sure! Here are the memories: {\"memories\": [{\"content\": ",  # malformed JSON
    "I could not find anything.",  # no JSON at all
])
async def test_unusable_answer_is_retried_later_and_writes_nothing(app: Any, upstream: Any,
                                                                   answer: str) -> None:
    job_id = await store_round(app, "我下周去成都出差", "一路顺风")
    upstream.queue(Reply(body=completion_body(answer)))
    await services_of(app).jobs.run_until_idle()
    job = await job_row(app, job_id)
    assert job["status"] == "pending" and job["attempts"] == 1
    assert "unusable" in job["last_error"]
    assert await memories(app) == []
    # The next run, with a good answer, applies it.
    await _make_due(app, job_id)
    model_says(upstream, [{"content": "用户下周去成都出差", "importance": 5, "action": "new"}])
    await services_of(app).jobs.run_until_idle()
    assert [r["content"] for r in await memories(app)] == ["用户下周去成都出差"]


async def test_truncated_answer_is_not_applied(app: Any, upstream: Any) -> None:
    job_id = await store_round(app, "我喜欢爬山和游泳", "很健康的爱好")
    model_says(upstream, [{"content": "用户喜欢爬山", "importance": 5, "action": "new"}],
               finish_reason="length")
    await services_of(app).jobs.run_until_idle()
    job = await job_row(app, job_id)
    assert job["status"] == "pending" and "truncated" in job["last_error"]
    assert await memories(app) == []


async def test_rate_limit_then_success(app: Any, upstream: Any) -> None:
    job_id = await store_round(app, "I am allergic to peanuts", "Noted, I will keep that in mind")
    upstream.reply_error(429, "slow down")
    await services_of(app).jobs.run_until_idle()
    job = await job_row(app, job_id)
    assert job["status"] == "pending" and job["attempts"] == 0  # a 429 is not the job's fault
    await _make_due(app, job_id)
    model_says(upstream, [{"content": "The user is allergic to peanuts", "importance": 9,
                           "action": "new"}])
    await services_of(app).jobs.run_until_idle()
    assert [r["content"] for r in await memories(app)] == ["The user is allergic to peanuts"]


async def test_a_crash_between_claim_and_commit_reruns_the_job_once(app: Any, upstream: Any
                                                                     ) -> None:
    job_id = await store_round(app, "我女儿叫朵朵", "朵朵真好听")
    pool = services_of(app).database.pool
    async with cursor(pool) as cur:
        crashed = await jobs_db.claim_next(cur, [EXTRACT_KIND], lease_seconds=0.05)
    assert crashed["id"] == job_id  # this run dies before writing anything
    await asyncio.sleep(0.1)
    model_says(upstream, [{"content": "用户的女儿叫朵朵", "importance": 8, "action": "new"}])
    await services_of(app).jobs.run_until_idle()
    await services_of(app).jobs.run_until_idle()
    assert [r["content"] for r in await memories(app)] == ["用户的女儿叫朵朵"]
    assert len([r for r in upstream.requests if r.body["model"] == "test/memory"]) == 1
    assert (await job_row(app, job_id))["status"] == "done"


async def test_interval_counts_rounds_from_stored_history(app: Any) -> None:
    await services_of(app).config.update({"MEMORY_EXTRACT_INTERVAL": 3})
    scheduled = [await store_round(app, f"第{n}轮的问题", f"第{n}轮的回答") for n in range(1, 7)]
    assert [job is not None for job in scheduled] == [False, False, True, False, False, True]
    payloads = [(await job_row(app, j))["payload"] for j in scheduled if j]
    assert payloads == [{"session_id": SESSION, "rounds": 3}, {"session_id": SESSION, "rounds": 6}]


async def test_user_only_events_and_pending_tool_calls_schedule_nothing(app: Any) -> None:
    settings = await services_of(app).config.fresh()
    async with transaction(services_of(app).database.pool) as cur:
        await insert_messages(cur, SESSION, [NewMessage("user", "只有问题")])
        assert await schedule_extraction(cur, settings, SESSION) is None
        await insert_messages(cur, SESSION, [NewMessage(
            "assistant", "", metadata={"tool_calls": [{"id": "c1", "type": "function",
                                                       "function": {"name": "f"}}]})])
        assert await schedule_extraction(cur, settings, SESSION) is None


async def test_same_round_count_is_queued_once(app: Any) -> None:
    settings = await services_of(app).config.fresh()
    first = await store_round(app, "问题", "回答")
    async with transaction(services_of(app).database.pool) as cur:
        again = await schedule_extraction(cur, settings, SESSION)
    assert first is not None and again is None


def test_parser_tolerates_fences_and_drops_bad_items_and_meta_talk() -> None:
    answer = """```json
    {"memories": [
      {"content": "用户喜欢猫", "importance": 12, "action": "new"},
      {"content": "", "importance": 5},
      {"content": "用户希望记忆系统记住这次对话", "importance": 5, "action": "new"},
      {"content": "The user moved", "importance": true, "action": "supersede",
       "candidate_id": "7", "remind_at": "2026-12-01T09:00:00+08:00"},
      {"content": "naive time", "remind_at": "2026-12-01T09:00:00"}
    ]}
    ```"""
    items = parse_answer(answer)
    assert [(i.content, i.importance, i.action, i.candidate_id) for i in items] == [
        ("用户喜欢猫", 10, "new", None), ("The user moved", 5, "supersede", 7),
        ("naive time", 5, "new", None)]
    assert items[1].remind_at is not None and items[2].remind_at is None
    assert is_meta_talk("Remember this conversation about the memory system")
    assert not is_meta_talk("用户的生日是三月五号")


async def _make_due(app: Any, job_id: int) -> None:
    async with transaction(services_of(app).database.pool) as cur:
        await cur.execute("UPDATE jobs SET run_after = now() WHERE id = %s", (job_id,))


async def _wait_seconds(app: Any, job_id: int) -> float:
    async with cursor(services_of(app).database.pool) as cur:
        row = await fetch_one(cur, "SELECT extract(epoch FROM run_after - now()) AS s"
                                   " FROM jobs WHERE id = %s", (job_id,))
    assert row is not None
    return float(row["s"])


async def test_a_rate_limited_model_is_waited_for_doubling_and_then_counted(
        app: Any, upstream: Any) -> None:
    from pawwake.jobs import FREE_RATE_LIMIT_WAITS, RATE_LIMIT_FIRST_SECONDS

    job_id = await store_round(app, "I am allergic to peanuts", "Noted, I will keep that in mind")
    waits = []
    for _ in range(FREE_RATE_LIMIT_WAITS):
        upstream.reply_error(429, "slow down")
        await services_of(app).jobs.run_until_idle()
        waits.append(await _wait_seconds(app, job_id))
        job = await job_row(app, job_id)
        assert job["status"] == "pending" and job["attempts"] == 0  # not the job's fault
        await _make_due(app, job_id)
    # Each wait twice the one before (30 s, 60 s, 120 s ...), as the jobs page says.
    for number, wait in enumerate(waits[:4]):
        assert abs(wait - RATE_LIMIT_FIRST_SECONDS * 2 ** number) < 5, waits
    assert (await job_row(app, job_id))["rate_limit_waits"] == FREE_RATE_LIMIT_WAITS
    # The provider's Retry-After is honoured.
    upstream.reply_error(429, "slow down", headers={"Retry-After": "7"})
    await services_of(app).jobs.run_until_idle()
    assert abs(await _wait_seconds(app, job_id) - 7) < 3
    # Past the free waits a rate limit uses up attempts: it cannot go on for ever.
    job = await job_row(app, job_id)
    assert job["attempts"] == 1 and "429" in job["last_error"]


async def test_the_jobs_page_shows_rate_limit_waits(make_client: Any, upstream: Any) -> None:
    from tests.dashboard_support import dashboard_client, login

    client = await dashboard_client(make_client, JOB_WORKERS=0, MEMORY_ENABLED=True,
                                    MEMORY_MODEL="test/memory", MEMORY_EXTRACT_INTERVAL=1)
    app = client.server.app
    job_id = await store_round(app, "我对花生过敏", "记住了")
    upstream.reply_error(429, "slow down")
    await services_of(app).jobs.run_until_idle()
    assert (await login(client)).status == 303
    from bs4 import BeautifulSoup

    for lang, words in (("en", "1 rate-limit wait(s) in a row"), ("zh", "连续限流等待 1 次")):
        client.session.cookie_jar.update_cookies({"pawwake_lang": lang})
        html = await (await client.get("/dashboard/jobs?status=all")).text()
        page = BeautifulSoup(html, "html.parser")
        cell = page.select_one(f'tr[data-job="{job_id}"] td[data-field="attempts"]')
        assert cell is not None and words in cell.get_text(), html
        assert "Retry-After" in page.get_text()  # the page says how a 429 is waited for


async def test_a_huge_message_reaches_the_memory_model_bounded(app: Any, upstream: Any) -> None:
    pasted = "开头的句子。" + "很长的粘贴内容，" * 400_000 + "结尾的句子。"  # about 3 MB
    job_id = await store_round(app, pasted, "这本书讲的是猫")
    upstream.reply_error(429, "slow down")  # and again on the retry
    await services_of(app).jobs.run_until_idle()
    await _make_due(app, job_id)
    model_says(upstream, [{"content": "用户分享了一本关于猫的书", "importance": 5,
                           "action": "new"}])
    await services_of(app).jobs.run_until_idle()
    sent = [r for r in upstream.requests if r.body.get("model") == "test/memory"]
    assert len(sent) == 2
    for request in sent:
        assert len(request.raw) < 200_000  # not the 9 MB of UTF-8 pasted
        prompt = request.body["messages"][0]["content"]
        assert "开头的句子。" in prompt and "结尾的句子。" in prompt
        assert "characters left out" in prompt and "这本书讲的是猫" in prompt
    assert [r["content"] for r in await memories(app)] == ["用户分享了一本关于猫的书"]
