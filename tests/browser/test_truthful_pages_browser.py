"""Pages that tell the truth in a real browser: a memory model that is rate limited shows on the
status page as a provider problem too (not "no failed upstream answer" beside "memory
extraction failing"), and a refused plain-text import keeps what was pasted."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from pawwake.app import create_app
from pawwake.db.pool import cursor, fetch_all
from pawwake.services import services_of
from tests.browser.dashboard_data import VIEWPORTS, logged_in
from tests.dashboard_support import PASSWORD, SECRET
from tests.fake_upstream import FakeUpstream

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="session")]

MEMORY_MODEL = "test/memory-model"


async def rate_limited_memory_model(aiohttp_server: Any, make_settings: Any,
                                    upstream: FakeUpstream) -> tuple[Any, str]:
    """A gateway whose one chat went through while its memory model answered 429."""
    app = create_app(make_settings(DASHBOARD_PASSWORD=PASSWORD, SESSION_SECRET=SECRET,
                                   JOB_WORKERS=0, MEMORY_ENABLED=True,
                                   MEMORY_VECTOR_ENABLED=False, MEMORY_MODEL=MEMORY_MODEL,
                                   MEMORY_EXTRACT_INTERVAL=1, TIMEZONE_HOURS=8))
    server = await aiohttp_server(app)
    services = services_of(app)
    await services.database.wait_ready()
    upstream.reply_text("记住了：你的猫叫小橘。")
    upstream.reply_error(429, "slow down")
    async with aiohttp.ClientSession() as http, http.post(
            server.make_url("/v1/chat/completions"),
            json={"model": "test/model-a", "stream": False,
                  "messages": [{"role": "user", "content": "我的猫叫小橘"}]}) as response:
        assert response.status == 200
        await response.read()
    await services.tasks.drain()  # the turn is stored and its extraction queued
    assert await services.jobs.run_until_idle() == 1
    async with cursor(services.database.pool) as cur:
        jobs = await fetch_all(cur, "SELECT kind, status, last_error FROM jobs")
    assert [(j["kind"], j["status"]) for j in jobs] == [("memory_extract", "pending")]
    assert "429" in jobs[0]["last_error"]
    assert [r.body["model"] for r in upstream.requests] == ["test/model-a", MEMORY_MODEL]
    return app, str(server.make_url("/dashboard")).rstrip("/")


@pytest.mark.parametrize("device", list(VIEWPORTS))
async def test_a_rate_limited_memory_model_is_an_upstream_problem_on_the_status_page(
        browser: Any, aiohttp_server: Any, make_settings: Any, upstream: FakeUpstream,
        device: str) -> None:
    _app, base = await rate_limited_memory_model(aiohttp_server, make_settings, upstream)
    for lang, memory_words, failing in (("zh", "记忆模型", "记忆提取失败"),
                                        ("en", "Memory model", "memory extraction is failing")):
        page = await logged_in(browser, base, VIEWPORTS[device], lang)
        assert failing in await page.inner_text("[data-switch='status.memory']")
        line = page.locator("[data-health=upstream]")
        assert await line.get_attribute("data-state") == "error"
        call = line.locator("[data-upstream-error=extract]")
        text = await call.inner_text()
        assert memory_words in text and "429" in text and MEMORY_MODEL in text, text
        assert "UTC+8" in text
        # the chat itself went through: its kind of call has no failure to show
        assert await line.locator("[data-upstream-error=chat]").count() == 0
        # the jobs card words the same failure in the page's language
        problem = page.locator("[data-jobs-kind=memory_extract] [data-field=error] .job-error")
        assert await problem.get_attribute("data-error-kind") == "rate_limited"
        await page.context.close()

    # Another gateway process on the same database (or this one after a restart) never saw
    # the failure itself, but the job still waits: its upstream line says so too.
    other = await aiohttp_server(create_app(make_settings(
        DASHBOARD_PASSWORD=PASSWORD, SESSION_SECRET=SECRET, JOB_WORKERS=0,
        MEMORY_VECTOR_ENABLED=False, TIMEZONE_HOURS=8)))
    await services_of(other.app).database.wait_ready()
    page = await logged_in(browser, str(other.make_url("/dashboard")).rstrip("/"),
                           VIEWPORTS[device], "en")
    line = page.locator("[data-health=upstream]")
    assert await line.get_attribute("data-state") != "ok"
    assert "429" in await line.locator("[data-upstream-error=extract]").inner_text()
    await page.context.close()


async def test_a_refused_plain_text_import_keeps_the_pasted_text(
        browser: Any, aiohttp_server: Any, make_settings: Any) -> None:
    app = create_app(make_settings(DASHBOARD_PASSWORD=PASSWORD, SESSION_SECRET=SECRET,
                                   JOB_WORKERS=0))
    server = await aiohttp_server(app)
    await services_of(app).database.wait_ready()
    base = str(server.make_url("/dashboard")).rstrip("/")
    pasted = "用户的猫叫小橘\n" + "很长的一行" * 5000 + "\n用户住在杭州"  # 25,000 characters
    for lang in ("zh", "en"):
        page = await logged_in(browser, base, VIEWPORTS["phone"], lang)
        await page.goto(base + "/import")
        await page.fill("#import-text-area", pasted)
        await page.click("[data-action=import-text]")
        await page.wait_for_selector("#import-text [data-result=error]")
        assert "2" in await page.inner_text("#import-text [data-result=error]")  # the line
        assert await page.input_value("#import-text-area") == pasted
        # fixed and sent again, the same text (minus the long line) imports
        await page.fill("#import-text-area", pasted.replace("很长的一行" * 5000 + "\n", ""))
        await page.check("input[name=skip_scoring]")
        await page.click("[data-action=import-text]")
        await page.wait_for_selector("#import-text [data-import-report]")
        assert await page.input_value("#import-text-area") == ""
        await page.context.close()
    async with cursor(services_of(app).database.pool) as cur:
        stored = await fetch_all(cur, "SELECT content FROM memories ORDER BY id")
    assert [row["content"] for row in stored] == ["用户的猫叫小橘", "用户住在杭州"]


async def test_an_empty_try_it_message_says_so(browser: Any, aiohttp_server: Any,
                                               make_settings: Any, upstream: FakeUpstream
                                               ) -> None:
    app = create_app(make_settings(DASHBOARD_PASSWORD=PASSWORD, SESSION_SECRET=SECRET,
                                   JOB_WORKERS=0))
    server = await aiohttp_server(app)
    base = str(server.make_url("/dashboard")).rstrip("/")
    for lang, words in (("zh", "请先写一条消息"), ("en", "Write a message first")):
        page = await logged_in(browser, base, VIEWPORTS["phone"], lang)
        await page.goto(base + "/try")
        await page.fill("textarea[name=message]", "   \n ")
        await page.click("[data-tryit-send]")
        error = page.locator("[data-tryit-error]")
        await error.wait_for(state="visible")
        assert words in await error.inner_text()
        await page.context.close()
    assert upstream.requests == []  # nothing was sent
