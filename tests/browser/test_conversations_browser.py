"""The conversations page in a real browser: find a past conversation by a phrase, open it,
edit a message, move the session to the trash and restore it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pawwake.app import create_app
from pawwake.conversations import manage as service
from pawwake.db.pool import cursor, fetch_all
from pawwake.services import services_of
from tests.browser.test_tryit_browser import signed_in
from tests.dashboard_support import PASSWORD, SECRET

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="session")]

SEED = [
    {"session_id": f"chat-{n:02d}", "messages": [
        {"role": "user", "content": f"第 {n} 次聊天：今天天气怎么样",
         "created_at": f"2026-02-{n + 1:02d}T09:00:00Z"},
        {"role": "assistant", "content": "晴天，适合出门散步。",
         "created_at": f"2026-02-{n + 1:02d}T09:00:04Z"}]}
    for n in range(25)
] + [
    {"session_id": "kyoto-trip", "messages": [
        {"role": "user", "content": "下个月去京都旅行，清水寺那天怎么安排",
         "created_at": "2026-01-05T10:00:00Z"},
        {"role": "assistant", "content": "早上七点到清水寺，中午去二年坂吃汤豆腐。",
         "created_at": "2026-01-05T10:00:05Z"}]},
]


async def test_find_open_edit_trash_and_restore(browser: Any, aiohttp_server: Any,
                                                make_settings: Any, tmp_path: Path) -> None:
    settings = make_settings(DASHBOARD_PASSWORD=PASSWORD, SESSION_SECRET=SECRET, JOB_WORKERS=0,
                             CONVERSATION_RECALL_ENABLED=True)
    server = await aiohttp_server(create_app(settings))
    await service.import_conversations(services_of(server.app).recall, SEED,
                                         settings=services_of(server.app).config.current())
    pool = services_of(server.app).database.pool
    base = str(server.make_url("/")).rstrip("/")

    context, page, console_errors = await signed_in(browser, base, 1280, "/dashboard/conversations",
                                                    wait_ms=None)
    assert await page.inner_text("h1") == "对话记录"
    # The old conversation is not on the first page of 26 sessions ...
    assert await page.locator("tr[data-session='kyoto-trip']").count() == 0

    # ... but a phrase from it finds it.
    await page.fill("#conv-q", "二年坂吃汤豆腐")
    await page.click("button[data-action='search']")
    await page.wait_for_url(base + "/dashboard/conversations/search")
    rows = page.locator("tr[data-session]")
    assert await rows.count() == 1
    await page.screenshot(path=str(tmp_path / "conversations-search.png"), caret="initial")
    await page.click("tr[data-session='kyoto-trip'] a[data-action='open']")
    await page.wait_for_url("**/conversations/view?session=kyoto-trip")
    assert "下个月去京都旅行" in await page.inner_text("article[data-number='1']")

    reply = page.locator("article[data-number='2']")
    await reply.locator("summary[data-action='edit-message']").click()
    await reply.locator("textarea").fill("早上八点到清水寺，再去伏见稻荷。")
    await page.screenshot(path=str(tmp_path / "conversation-edit.png"), caret="initial")
    await reply.locator("button[data-action='save-message']").click()
    await page.wait_for_selector("[data-notice]")
    assert "第 2 条消息已保存" in await page.inner_text("[data-notice]")
    assert (await page.inner_text("article[data-number='2'] [data-content]")
            == "早上八点到清水寺，再去伏见稻荷。")
    async with cursor(pool) as cur:
        stored = await fetch_all(cur, "SELECT content FROM conversations WHERE session_id ="
                                      " 'kyoto-trip' ORDER BY created_at")
    assert stored[1]["content"] == "早上八点到清水寺，再去伏见稻荷。"
    async with cursor(pool) as cur:
        before = await fetch_all(cur, "SELECT * FROM conversations ORDER BY id")

    await page.click("button[data-action='trash-session']")
    await page.wait_for_url("**/dashboard/conversations?done=trashed*")
    assert "已移入回收站：2 条消息" in await page.inner_text("[data-notice]")
    assert await page.locator("tr[data-session='kyoto-trip']").count() == 0
    await page.click("a[data-tab='trash']")
    await page.wait_for_url("**/dashboard/conversations?trash=1")
    assert [await r.get_attribute("data-session")
            for r in await page.locator("tr[data-session]").all()] == ["kyoto-trip"]

    await page.click("tr[data-session='kyoto-trip'] a[data-action='open']")
    await page.wait_for_selector("[data-in-trash]")
    await page.click("button[data-action='restore-session']")
    await page.wait_for_selector("[data-notice]")
    assert "已恢复：2 条消息" in await page.inner_text("[data-notice]")
    assert await page.locator("article.is-deleted").count() == 0
    async with cursor(pool) as cur:
        assert await fetch_all(cur, "SELECT * FROM conversations ORDER BY id") == before

    # Found again by the edited words.
    await page.goto(base + "/dashboard/conversations")
    await page.fill("#conv-q", "伏见稻荷")
    await page.click("button[data-action='search']")
    await page.wait_for_url(base + "/dashboard/conversations/search")
    assert [await r.get_attribute("data-session")
            for r in await page.locator("tr[data-session]").all()] == ["kyoto-trip"]
    assert console_errors == []
    await context.close()
