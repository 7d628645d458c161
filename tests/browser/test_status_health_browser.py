"""The status page's health in a real browser at 1366 and 390 px: a failing memory extraction
shows as an error line with its message, and retrying it from the jobs card answers in that
card and queues the job again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pawwake.db import jobs as jobs_db
from pawwake.db.pool import cursor
from pawwake.services import services_of
from tests.browser.test_tryit_browser import overflow, signed_in
from tests.dashboard_support import dashboard_client
from tests.test_dashboard_status_health import failed_extraction

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="session")]


@pytest.mark.parametrize("width", [1366, 390])
async def test_failing_extraction_shown_and_retried_from_status(browser: Any, make_client: Any,
                                                                tmp_path: Path, width: int
                                                                ) -> None:
    client = await dashboard_client(make_client, JOB_WORKERS=0, MEMORY_ENABLED=True,
                                    MEMORY_VECTOR_ENABLED=False)
    app = client.server.app
    pool = services_of(app).database.pool
    dead = await failed_extraction(app)
    base = str(client.make_url("/")).rstrip("/")
    context, page, errors = await signed_in(browser, base, width, "/dashboard")

    assert await page.get_attribute("[data-health=jobs]", "data-state") == "error"
    assert await page.get_attribute("[data-health=database]", "data-state") == "ok"
    kind = page.locator("[data-jobs-kind=memory_extract]")
    assert await kind.get_attribute("data-state") == "error"
    assert "记忆提取" in await kind.inner_text()
    error = kind.locator("[data-field=error]")
    assert "记忆模型的回答无法使用" in await error.inner_text()  # the stored text behind a toggle
    assert "nonsense" in await error.locator(".raw-error code").text_content()
    assert await overflow(page) <= 0
    await page.screenshot(path=str(tmp_path / f"status-{width}.png"), full_page=True)

    await kind.locator("[data-action=retry]").click()
    notice = page.locator("#status-jobs [data-notice]")
    await notice.wait_for()
    assert f"任务 {dead} 已重新排队" in await notice.inner_text()
    assert page.url == base + "/dashboard"  # swapped in place, the page did not move away
    async with cursor(pool) as cur:
        assert (await jobs_db.get_job(cur, dead))["attempts"] == 0
    assert await page.get_attribute("[data-jobs-kind=memory_extract]",
                                    "data-state") == "warning"
    assert errors == []
    await context.close()
