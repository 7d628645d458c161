"""Feedback where the action was, in a real browser at 1366 and 390 px: the selection bar's
organise answer shows at the bar (above it while it shows, in its place once it hides), and
the settings notice by the button that saved."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.browser.test_tryit_browser import overflow, signed_in
from tests.consolidation_support import add
from tests.dashboard_support import dashboard_client

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="session")]


@pytest.mark.parametrize("width", [1366, 390])
async def test_answers_show_where_the_action_was(browser: Any, make_client: Any,
                                                 tmp_path: Path, width: int) -> None:
    client = await dashboard_client(make_client, JOB_WORKERS=0, TIMEZONE_HOURS=8,
                                    MEMORY_MODEL="test/memory", MEMORY_VECTOR_ENABLED=False)
    for n, text in enumerate(["周六和阿杰去公园野餐", "野餐带了三明治和西瓜"]):
        await add(client, text, at=f"2025-03-01T0{n + 1}:00:00+08:00")
    base = str(client.make_url("/")).rstrip("/")
    context, page, errors = await signed_in(browser, base, width, "/dashboard/memories")
    height = page.viewport_size["height"]

    # One row ticked: the refusal shows in the bar, the top card says nothing.
    await page.check('.memory-row[data-row="1"] [data-row-select]')
    bar = page.locator("[data-bulk-bar]")
    await bar.locator("[data-action=organise]").click()
    result = page.locator("#bulk-result[data-bulk-result=alert]")
    await result.wait_for()
    assert "至少勾选 2 条" in await result.inner_text()
    shown, bar_box = await result.bounding_box(), await bar.bounding_box()
    assert bar_box["y"] <= shown["y"] and shown["y"] + shown["height"] <= bar_box["y"] + bar_box["height"]
    assert await page.locator("#consolidation [data-organise-problem]").count() == 0
    await page.screenshot(path=str(tmp_path / f"bar-refused-{width}.png"))

    # Changing the selection clears that answer; two rows start a run, answered in the bar
    # too (the selection stays), while the top card follows the run.
    await page.check('.memory-row[data-row="2"] [data-row-select]')
    assert not await page.locator("#bulk-result[data-bulk-result]").count()
    assert not await page.is_visible("#bulk-result")
    await bar.locator("[data-action=organise]").click()
    result = page.locator("#bulk-result[data-bulk-result=notice]")
    await result.wait_for()
    assert "2 条" in await result.inner_text()
    shown, bar_box = await result.bounding_box(), await bar.bounding_box()
    assert bar_box["y"] <= shown["y"] and shown["y"] + shown["height"] <= bar_box["y"] + bar_box["height"]
    assert height - (bar_box["y"] + bar_box["height"]) < 60  # the floating bar, at the bottom
    assert await page.get_attribute("#consolidation", "data-consolidation-status") == "queued"
    assert await overflow(page) <= 0
    await page.screenshot(path=str(tmp_path / f"bar-started-{width}.png"))

    # Settings: the saved notice sits beside the button that saved.
    await page.goto(base + "/dashboard/settings")
    await page.fill("#f-DEFAULT_MODEL", "test/model-b")
    button = page.locator("#group-basic button.button-primary[type=submit]")  # Save
    await button.click()
    notice = page.locator("#group-basic .group-foot [data-result=saved]")
    await notice.wait_for()
    notice_box, button_box = await notice.bounding_box(), await button.bounding_box()
    assert abs((notice_box["y"] + notice_box["height"] / 2)
               - (button_box["y"] + button_box["height"] / 2)) < 60
    # The refused start answers 400 (the browser notes it); nothing else went wrong.
    assert [e for e in errors if "400" not in e] == []
    await context.close()
