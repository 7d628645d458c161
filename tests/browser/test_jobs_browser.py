"""The background jobs page in a real browser: the status page points to failing jobs, retry
and discard swap the list in place (discard asks first), the filter, and English labels."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pawwake.db import jobs as jobs_db
from pawwake.db.pool import cursor
from pawwake.jobs import Job
from pawwake.services import services_of
from tests.browser.test_tryit_browser import signed_in
from tests.dashboard_support import dashboard_client

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="session")]


async def failing(job: Job) -> None:
    job.model = "test/memory"
    raise ValueError("the memory model answered nonsense")


async def test_jobs_page_end_to_end(browser: Any, make_client: Any, tmp_path: Path) -> None:
    client = await dashboard_client(make_client, JOB_WORKERS=0)
    app = client.server.app
    pool = services_of(app).database.pool
    services_of(app).jobs.register("memory_extract", failing)
    async with cursor(pool) as cur:
        dead = await jobs_db.enqueue(cur, "memory_extract", {}, max_attempts=1)
        waiting = await jobs_db.enqueue(cur, "memory_extract", {}, max_attempts=5)
    await services_of(app).jobs.run_until_idle()
    base = str(client.make_url("/")).rstrip("/")

    context, page, console_errors = await signed_in(browser, base, 1280, "/dashboard")

    # The status page says memory extraction is failing and links to the jobs.
    assert await page.get_attribute("[data-jobs-health]", "data-jobs-health") == "problems"
    assert "1 个已停止重试" in await page.inner_text("[data-jobs-count=dead]")
    await page.screenshot(path=str(tmp_path / "status-jobs.png"), full_page=True)
    await page.click("text=查看后台任务")
    await page.wait_for_url("**/dashboard/jobs?status=attention")
    assert await page.inner_text("h1") == "后台任务"
    assert await page.locator("tr[data-job]").count() == 2
    row = page.locator(f"tr[data-job='{dead}']")
    assert "记忆提取" in await row.locator("[data-field=kind]").inner_text()
    assert await row.locator("[data-field=attempts]").inner_text() == "1 / 1"
    # the error in the reader's language, the stored text behind a toggle
    error = row.locator("[data-field=error]")
    assert "记忆模型的回答无法使用" in await error.inner_text()
    assert not await error.locator(".raw-error code").is_visible()
    await error.locator(".raw-error summary").click()
    assert "the memory model answered nonsense" in await error.locator(".raw-error code"
                                                                     ).inner_text()
    assert await row.locator("[data-field=model]").inner_text() == "test/memory"
    await page.screenshot(path=str(tmp_path / "jobs-zh.png"), full_page=True)

    # Retry swaps the list in place (no navigation) and queues the job to run now.
    await row.locator("[data-action=retry]").click()
    await page.wait_for_selector("[data-notice]")
    assert f"任务 {dead} 已重新排队" in await page.inner_text("[data-notice]")
    assert page.url.endswith("/dashboard/jobs?status=attention")
    async with cursor(pool) as cur:
        assert (await jobs_db.get_job(cur, dead))["attempts"] == 0

    # Discard asks first; dismissing changes nothing, accepting discards.
    page.once("dialog", lambda dialog: dialog.dismiss())
    await page.locator(f"tr[data-job='{waiting}'] [data-action=discard]").click()
    async with cursor(pool) as cur:
        assert (await jobs_db.get_job(cur, waiting))["status"] == "pending"
    page.once("dialog", lambda dialog: dialog.accept())
    await page.locator(f"tr[data-job='{waiting}'] [data-action=discard]").click()
    await page.wait_for_selector(f"[data-notice]:has-text('任务 {waiting} 已放弃')")
    async with cursor(pool) as cur:
        assert (await jobs_db.get_job(cur, waiting))["status"] == "discarded"

    # The filter swaps the list and keeps the choice in the address.
    await page.select_option("select[name=status]", "discarded")
    await page.wait_for_selector("#jobs-region[data-jobs-filter=discarded]")
    await page.wait_for_function("location.search === '?status=discarded'")
    assert [await r.get_attribute("data-job") for r in
            await page.locator("tr[data-job]").all()] == [str(waiting)]

    await page.click("button[name=lang][value=en]")
    await page.wait_for_selector("html[lang=en]")
    assert await page.inner_text("h1") == "Background jobs"
    await page.screenshot(path=str(tmp_path / "jobs-en.png"), full_page=True)
    assert console_errors == []
    await context.close()
