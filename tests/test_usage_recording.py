"""Every model call the gateway makes on its own is booked in token_usage: extraction (also
an answer that cannot be used), partition summaries and folds, import scoring. An unusable
extraction answer is logged at WARNING with its head."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from bs4 import BeautifulSoup

from pawwake.db.pool import cursor, fetch_all
from pawwake.services import services_of
from tests.dashboard_support import PASSWORD, SECRET, login
from tests.fake_upstream import Reply, completion_body
from tests.partition_support import PARTITION, say
from tests.test_extraction import store_round

SESSION = "chat-usage"
USAGE = {"prompt_tokens": 900, "completion_tokens": 100, "total_tokens": 1000}


async def usage_of(app: Any, usage_type: str) -> list[dict[str, Any]]:
    async with cursor(services_of(app).database.pool) as cur:
        return await fetch_all(cur,
                               "SELECT session_id, model, prompt_tokens, completion_tokens,"
                               " total_tokens FROM token_usage WHERE usage_type = %s ORDER BY id",
                               (usage_type,))


@pytest.fixture
async def memory_app(make_client: Any) -> Any:
    client = await make_client(JOB_WORKERS=0, MEMORY_ENABLED=True, MEMORY_MODEL="test/memory",
                               MEMORY_EXTRACT_INTERVAL=1)
    return client.server.app


async def test_an_unparsable_extraction_answer_is_booked_and_logged(
        memory_app: Any, upstream: Any, caplog: pytest.LogCaptureFixture) -> None:
    await store_round(memory_app, "我养了一只叫团子的兔子", "团子真可爱", SESSION)
    answer = "好的！我记住了：用户养了一只兔子。" + "，没有 JSON" * 600
    upstream.queue(Reply(body=completion_body(answer, usage=USAGE)))
    with caplog.at_level(logging.INFO, logger="pawwake"):
        await services_of(memory_app).jobs.run_until_idle()
    assert await usage_of(memory_app, "extract") == [
        {"session_id": SESSION, "model": "test/model-a", "prompt_tokens": 900,
         "completion_tokens": 100, "total_tokens": 1000}]
    logged = [r for r in caplog.records if "unusable answer" in r.getMessage()]
    assert len(logged) == 1 and logged[0].levelno == logging.WARNING
    message = logged[0].getMessage()
    assert "好的！我记住了：用户养了一只兔子。" in message
    assert len(message.encode()) < 2048 + 400  # the head of the answer, not all of it
    failures = [r for r in caplog.records if r.name == "pawwake.jobs"]
    assert failures and all(r.levelno >= logging.WARNING for r in failures)


async def test_a_truncated_extraction_answer_is_booked(memory_app: Any, upstream: Any) -> None:
    await store_round(memory_app, "我喜欢爬山", "很健康", SESSION)
    body = completion_body(json.dumps({"memories": [{"content": "用户喜欢爬山"}]}),
                           usage=USAGE, finish_reason="length")
    upstream.queue(Reply(body=body))
    await services_of(memory_app).jobs.run_until_idle()
    assert [r["total_tokens"] for r in await usage_of(memory_app, "extract")] == [1000]


async def test_import_scoring_is_booked_even_when_the_answer_is_unusable(
        make_client: Any, upstream: Any) -> None:
    client = await make_client(JOB_WORKERS=0, MEMORY_MODEL="test/memory-model")
    upstream.queue(Reply(body=completion_body("These all look important.", usage=USAGE)))
    response = await client.post("/api/memories/import/text",
                                 json={"text": "用户会弹钢琴\n用户讨厌下雨天"})
    assert response.status in (200, 201), await response.text()
    assert [r["total_tokens"] for r in await usage_of(client.server.app, "extract")] == [1000]


SUMMARY = {"CACHE_SUMMARY_MODEL": "test/summary", **PARTITION}


async def test_partition_summaries_are_booked_and_shown_on_the_usage_page(
        gateway: Any, upstream: Any) -> None:
    client = await gateway(DASHBOARD_PASSWORD=PASSWORD, SESSION_SECRET=SECRET, **SUMMARY)
    for n in range(1, 5):
        await say(client, upstream, f"问{n}", f"答{n}")
    upstream.queue(Reply(body=completion_body("第一段摘要", usage=USAGE)))
    await say(client, upstream, "问5", "答5")
    app = client.server.app
    assert await usage_of(app, "summary") == [
        {"session_id": "default", "model": "test/model-a", "prompt_tokens": 900,
         "completion_tokens": 100, "total_tokens": 1000}]

    await login(client)
    page = BeautifulSoup(await (await client.get("/dashboard/usage")).text(), "html.parser")
    today = page.select("svg.usage-chart g.day")[-1]  # the chart's last day is today
    summary = today.select_one("rect[data-kind=summary]")
    assert summary is not None and summary["data-tokens"] == "1000"
    assert "摘要: 1,000" in today.title.get_text()


async def test_a_summary_cut_at_the_output_limit_is_booked(gateway: Any, upstream: Any) -> None:
    client = await gateway(CACHE_SUMMARY_BUDGET_CHARS=10, **SUMMARY)
    for n in range(1, 5):
        await say(client, upstream, f"问{n}", f"答{n}")
    # Cut at the output limit: the rotation is cancelled, but the tokens were spent.
    upstream.queue(Reply(body=completion_body("摘要被截", usage=USAGE, finish_reason="length")))
    await say(client, upstream, "问5", "答5")
    app = client.server.app
    assert [r["total_tokens"] for r in await usage_of(app, "summary")] == [1000]
