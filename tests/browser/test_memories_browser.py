"""The memories page in a real browser: backfill with a live progress bar, semantic search,
inline edit, archive and restore, bulk actions, then import and export."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pawwake.app import create_app
from pawwake.db.pool import cursor, fetch_all
from pawwake.services import services_of
from tests.consolidation_support import add, answer, group
from tests.dashboard_support import PASSWORD, SECRET
from tests.memory_fixtures import insert_fixture, insert_memory

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="session")]

EXTRA_MEMORIES = 30  # enough rows for the backfill to be seen running


async def start_server(aiohttp_server: Any, make_settings: Any, **overrides: Any) -> Any:
    settings = make_settings(DASHBOARD_PASSWORD=PASSWORD, SESSION_SECRET=SECRET,
                             EMBEDDING_PROVIDER="local", **overrides)
    return await aiohttp_server(create_app(settings))


async def sign_in(page: Any, base: str) -> None:
    await page.goto(base + "/dashboard/memories")
    await page.fill("#password", PASSWORD)
    await page.click("form.login-form button[type=submit]")
    await page.wait_for_url(base + "/dashboard/memories")


async def shoot(page: Any, path: str, *, full: bool = False) -> None:
    """A screenshot that leaves the page alone: hiding the caret would write inline styles,
    which the dashboard's CSP then reports when htmx settles the swapped inputs."""
    await page.screenshot(path=path, full_page=full, caret="initial")


async def test_search_edit_archive_restore_and_backfill(
        browser: Any, aiohttp_server: Any, make_settings: Any, tmp_path: Path) -> None:
    server = await start_server(aiohttp_server, make_settings)
    pool = services_of(server.app).database.pool
    ids = await insert_fixture(pool)
    for number in range(EXTRA_MEMORIES):
        await insert_memory(pool, f"第 {number} 条测试记录：周末去公园散步，看到了{number % 7}只鸽子",
                            importance=2, created_days_ago=40 + number)
    total = len(ids) + EXTRA_MEMORIES
    base = str(server.make_url("/")).rstrip("/")
    shots = tmp_path / "screenshots"
    shots.mkdir()

    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    console_errors: list[str] = []
    page.on("console", lambda message: console_errors.append(
        f"{message.text} @ {message.location}") if message.type == "error" else None)
    await sign_in(page, base)
    assert await page.inner_text("h1") == "记忆管理"
    counts = await page.eval_on_selector_all(
        ".layer-tabs [data-count]", "els => els.map(e => e.textContent.trim())")
    assert counts == [str(total), str(total), "0", "0"]
    numbers = await page.eval_on_selector_all(
        ".memory-row [data-row-number]", "els => els.map(e => e.textContent.trim())")
    assert numbers == [str(n) for n in range(1, 31)]
    await shoot(page, str(shots / "memories-zh.png"))

    # Before any vector exists a semantic search says that it fell back to keywords.
    await page.fill("#memory-q", "过年")
    await page.click("button[data-search=semantic]")
    await page.wait_for_selector(".search-summary")
    assert await page.get_attribute(".search-summary", "data-search-mode") == "keyword"
    assert await page.is_visible("[data-fallback]")

    # Backfill: the bar polls itself until every memory has a vector.
    assert await page.inner_text("[data-backfill-progress]") == f"0 / {total}"
    await page.click("#backfill button[data-action=backfill]")
    await page.wait_for_selector('#backfill[data-backfill-status="running"], '
                                 '#backfill[data-backfill-status="queued"]')
    await shoot(page, str(shots / "backfill-running-zh.png"))
    seen: list[str] = []
    while True:
        await page.wait_for_timeout(300)
        status = await page.get_attribute("#backfill", "data-backfill-status")
        seen.append(await page.inner_text("[data-backfill-progress]"))
        if status == "done":
            break
        assert status in ("queued", "running"), status
    assert await page.inner_text("[data-backfill-progress]") == f"{total} / {total}"
    assert await page.get_attribute("#backfill progress", "value") == str(total)
    await shoot(page, str(shots / "backfill-done-zh.png"))

    # Semantic search now really uses the vectors: 过年 finds the Spring Festival memory.
    await page.fill("#memory-q", "过年")
    await page.click("button[data-search=semantic]")
    await page.wait_for_selector('.search-summary[data-search-mode="hybrid"]')
    first = page.locator(".memory-row").first
    assert "春节" in await first.locator("[data-content]").inner_text()
    assert await first.locator("[data-score]").count() == 1
    assert not await page.is_visible("[data-fallback]")
    await shoot(page, str(shots / "semantic-search-zh.png"), full=True)

    # Inline edit of the found row: a refused value is explained next to its field.
    await first.locator("[data-action=edit]").click()
    editor = page.locator(".memory-row.is-editing")
    await editor.locator("textarea[name=content]").fill("")
    await editor.locator("[data-action=save]").click()
    await page.wait_for_selector('.memory-row [data-error="content"]')
    assert "内容不能为空" in await page.inner_text('[data-error="content"]')
    await editor.locator("textarea[name=content]").fill("春节回老家陪爸妈吃年夜饭，还要给外婆拜年")
    await editor.locator("input[name=importance]").fill("9")
    await editor.locator("input[name=title]").fill("过年")
    await editor.locator("[data-action=save]").click()
    await page.wait_for_selector(".memory-row [data-row-result=notice]")
    saved = page.locator(".memory-row", has_text="还要给外婆拜年")
    assert await saved.locator("[data-title]").inner_text() == "过年"
    assert await saved.locator("[data-importance]").get_attribute("data-importance") == "9"
    await shoot(page, str(shots / "edited-zh.png"), full=True)
    async with cursor(pool) as cur:
        stored = await fetch_all(cur, "SELECT content, importance, title FROM memories"
                                      " WHERE id = %s", (ids["spring_festival"],))
    assert stored == [{"content": "春节回老家陪爸妈吃年夜饭，还要给外婆拜年", "importance": 9,
                       "title": "过年"}]

    # Archive it from the search results; it leaves the active list.
    await saved.locator("[data-action=archive]").click()
    await page.wait_for_selector("[data-result=notice]")
    assert await page.locator(".memory-row", has_text="还要给外婆拜年").count() == 0
    assert await page.inner_text('[data-status-tab="archived"] [data-count]') == "1"

    # Restore it from the archived tab.
    await page.click('[data-status-tab="archived"]')
    await page.wait_for_url(base + "/dashboard/memories?status=archived")
    archived = page.locator(".memory-row", has_text="还要给外婆拜年")
    await archived.wait_for()
    await shoot(page, str(shots / "archived-zh.png"), full=True)
    await archived.locator("[data-action=restore]").click()
    await page.wait_for_selector("[data-result=notice]")
    assert await page.locator(".memory-row").count() == 0
    assert await page.inner_text('[data-status-tab="archived"] [data-count]') == "0"
    async with cursor(pool) as cur:
        active = await fetch_all(cur, "SELECT is_active FROM memories WHERE id = %s",
                                 (ids["spring_festival"],))
    assert active == [{"is_active": True}]

    # The refused edit shows up as a failed 400 load (htmx logs it too); nothing else failed.
    unexpected = [e for e in console_errors if "400" not in e and "Response Status Error" not in e]
    assert unexpected == [], console_errors
    await context.close()
    for name in ("memories-zh", "backfill-running-zh", "backfill-done-zh",
                 "semantic-search-zh", "edited-zh", "archived-zh"):
        assert (shots / f"{name}.png").stat().st_size > 10_000, name
    (tmp_path / "progress.json").write_text(json.dumps(seen, ensure_ascii=False))


async def test_bulk_bar_confirm_dialog_import_and_export(
        browser: Any, aiohttp_server: Any, make_settings: Any, tmp_path: Path) -> None:
    server = await start_server(aiohttp_server, make_settings, MEMORY_VECTOR_ENABLED=False)
    pool = services_of(server.app).database.pool
    for number in range(5):
        await insert_memory(pool, f"批量操作的记忆 {number}", created_days_ago=number)
    base = str(server.make_url("/")).rstrip("/")
    shots = tmp_path / "screenshots"
    shots.mkdir()
    context = await browser.new_context(viewport={"width": 1280, "height": 900},
                                        accept_downloads=True)
    page = await context.new_page()
    console_errors: list[str] = []
    page.on("console", lambda message: console_errors.append(message.text)
            if message.type == "error" else None)
    await sign_in(page, base)

    # The floating bar appears with a selection and reports what the action really did.
    assert not await page.is_visible("[data-bulk-bar]")
    await page.check('.memory-row[data-row="1"] [data-row-select]')
    await page.check('.memory-row[data-row="2"] [data-row-select]')
    assert await page.is_visible("[data-bulk-bar]")
    assert await page.inner_text("[data-bulk-count]") == "已选 2 条"
    await shoot(page, str(shots / "bulk-bar-zh.png"))
    await page.click("[data-bulk-bar] button[value=archive]")
    await page.wait_for_selector("[data-result=notice]")
    assert await page.inner_text("[data-result=notice]") == "已归档 2 条"
    assert await page.inner_text('[data-status-tab="active"] [data-count]') == "3"
    assert not await page.is_visible("[data-bulk-bar]")

    # Permanent delete asks in a dialog first; cancelling keeps everything.
    await page.click('[data-status-tab="archived"]')
    await page.wait_for_selector('#memories-main[data-status="archived"]')
    await page.check("[data-select-all]")
    assert await page.inner_text("[data-bulk-count]") == "已选 2 条"
    await page.click("[data-bulk-bar] button[value=delete]")
    await page.wait_for_selector("#memory-confirm[open]")
    assert "永久删除" in await page.inner_text("#memory-confirm .dialog-text")
    await shoot(page, str(shots / "confirm-dialog-zh.png"))
    await page.click("#memory-confirm [data-dialog-cancel]")
    assert await page.locator(".memory-row").count() == 2
    await page.click("[data-bulk-bar] button[value=delete]")
    await page.click("#memory-confirm [data-dialog-ok]")
    await page.wait_for_selector("[data-result=notice]")
    assert await page.inner_text("[data-result=notice]") == "已永久删除 2 条"
    async with cursor(pool) as cur:
        assert len(await fetch_all(cur, "SELECT id FROM memories")) == 3

    # Import: plain text, then a backup with its preview and confirmation.
    await page.click("nav.mainnav >> text=导入记忆")
    await page.wait_for_url(base + "/dashboard/import")
    await page.fill("#import-text-area", "我的猫叫小橘\n妈妈的生日是十月十二号")
    await page.check("input[name=skip_scoring]")
    await page.click("[data-action=import-text]")
    await page.wait_for_selector("#import-text [data-import-report]")
    assert await page.inner_text('#import-text [data-report="imported"]') == "2"
    document = {"schema_version": 3, "memories": [
        {"backup_id": 1, "content": "我的猫叫小橘", "layer": 1},
        {"backup_id": 2, "content": "冬天学会了滑雪", "layer": 2, "title": "滑雪"}]}
    backup_file = tmp_path / "backup.json"
    backup_file.write_text(json.dumps(document, ensure_ascii=False))
    await page.set_input_files("#import-backup-file", str(backup_file))
    await page.click("[data-action=preview]")
    await page.wait_for_selector('[data-backup-report="preview"]')
    assert await page.inner_text('#import-backup [data-report="imported"]') == "1"
    assert await page.inner_text('#import-backup [data-report="skipped"]') == "1"
    await shoot(page, str(shots / "import-preview-zh.png"), full=True)
    await page.click("[data-action=confirm-import]")
    await page.wait_for_selector('[data-backup-report="done"]')
    async with cursor(pool) as cur:
        contents = {row["content"] for row in await fetch_all(cur, "SELECT content FROM memories")}
    assert {"我的猫叫小橘", "妈妈的生日是十月十二号", "冬天学会了滑雪"} <= contents

    # Export: the download is a real file with every memory.
    await page.click("nav.mainnav >> text=导出备份")
    await page.wait_for_url(base + "/dashboard/export")
    async with page.expect_download() as waiting:
        await page.click("[data-action=download]")
    download = await waiting.value
    assert download.suggested_filename.startswith("pawwake-memories-")
    saved = tmp_path / download.suggested_filename
    await download.save_as(str(saved))
    exported = json.loads(saved.read_text())
    assert len(exported["memories"]) == len(contents)
    await shoot(page, str(shots / "export-zh.png"))

    # English, and a phone-sized screen.
    await page.goto(base + "/dashboard/memories")
    await page.click(".lang-switch button[value=en]")
    await page.wait_for_selector("html[lang=en]")
    assert await page.inner_text("h1") == "Memories"
    await shoot(page, str(shots / "memories-en.png"))
    phone = await browser.new_context(viewport={"width": 390, "height": 844},
                                      storage_state=await context.storage_state())
    small = await phone.new_page()
    await small.goto(base + "/dashboard/memories")
    await shoot(small, str(shots / "memories-phone-en.png"), full=True)
    await phone.close()
    assert console_errors == []
    await context.close()
    for name in ("bulk-bar-zh", "confirm-dialog-zh", "import-preview-zh", "export-zh",
                 "memories-en", "memories-phone-en"):
        assert (shots / f"{name}.png").stat().st_size > 10_000, name


async def test_organise_a_day_edit_confirm_see_sources_and_revert(
        browser: Any, aiohttp_server: Any, make_settings: Any, upstream: Any,
        tmp_path: Path) -> None:
    server = await start_server(aiohttp_server, make_settings, MEMORY_MODEL="test/memory",
                                TIMEZONE_HOURS=8, MEMORY_VECTOR_ENABLED=False)
    app_client = SimpleNamespace(server=server)  # what the consolidation helpers read
    day = "2025-03-01"
    texts = ["周六和阿杰去公园野餐", "野餐带了三明治和西瓜", "回家路上下起了小雨"]
    ids = [await add(app_client, text, at=f"{day}T0{n + 1}:00:00+08:00")
           for n, text in enumerate(texts)]
    await add(app_client, "第二天的事，不在这次整理里", at="2025-03-02T09:00:00+08:00")
    answer(upstream, [group("周六和阿杰在公园野餐，带了三明治和西瓜，回家路上下起小雨",
                            [1, 2, 3], title="公园野餐", importance=7)])
    base = str(server.make_url("/")).rstrip("/")
    shots = tmp_path / "screenshots"
    shots.mkdir()
    context = await browser.new_context(viewport={"width": 1280, "height": 1000})
    page = await context.new_page()
    console_errors: list[str] = []
    page.on("console", lambda message: console_errors.append(message.text)
            if message.type == "error" else None)
    await sign_in(page, base)

    # Organise one day: the panel polls itself until the drafts are there.
    await page.fill("#organise-from", day)
    await page.fill("#organise-to", day)
    await page.click("[data-action=organise]")
    await page.wait_for_selector('#consolidation[data-consolidation-status="done"]')
    draft = page.locator('[data-draft="1"]')
    assert await draft.get_attribute("data-state") == "ready"
    assert await draft.locator("input[name=title-1]").input_value() == "公园野餐"
    await draft.locator(".draft-sources summary").click()
    assert await draft.locator("[data-draft-source]").count() == 3
    await shoot(page, str(shots / "drafts-zh.png"), full=True)
    prompt = upstream.requests[-1].body["messages"][0]["content"]
    assert all(text in prompt for text in texts) and "第二天的事" not in prompt

    # Edit the draft, then confirm it.
    await draft.locator("input[name=title-1]").fill("野餐")
    await draft.locator("textarea[name=content-1]").fill("和阿杰在公园野餐，回家时下了小雨")
    await draft.locator("[data-action=confirm-draft]").click()
    await page.wait_for_selector('[data-draft="1"][data-state="confirmed"]')
    event = page.locator(".memory-row", has_text="和阿杰在公园野餐，回家时下了小雨")
    await event.wait_for()
    assert await event.locator("[data-layer]").get_attribute("data-layer") == "2"
    assert await event.locator("[data-title]").inner_text() == "野餐"
    assert await event.locator("[data-merged]").inner_text() == "由 3 条合并"
    async with cursor(services_of(server.app).database.pool) as cur:
        stored = await fetch_all(cur,
                                 "SELECT id, is_active FROM memories WHERE id = ANY(%s)", (ids,))
    assert [r["is_active"] for r in stored] == [False, False, False]

    # The event's sources, then the revert (after the confirmation dialog).
    await event.locator("[data-action=sources]").click()
    await page.wait_for_selector("[data-sources] [data-source]")
    sources = await page.eval_on_selector_all(
        "[data-sources] .version-content", "els => els.map(e => e.textContent)")
    assert sources == texts
    await shoot(page, str(shots / "event-sources-zh.png"), full=True)
    await page.click("[data-sources] [data-action=revert]")
    await page.wait_for_selector("#memory-confirm[open]")
    await page.click("#memory-confirm [data-dialog-ok]")
    await page.wait_for_selector("[data-result=notice]")
    assert "3 条来源已恢复" in await page.inner_text("[data-result=notice]")
    assert await page.locator(".memory-row", has_text="回家时下了小雨").count() == 0
    for text in texts:
        assert await page.locator(".memory-row", has_text=text).count() == 1
    async with cursor(services_of(server.app).database.pool) as cur:
        stored = await fetch_all(cur,
                                 "SELECT is_active FROM memories WHERE id = ANY(%s)", (ids,))
    assert [r["is_active"] for r in stored] == [True, True, True]

    # A manual merge from the action bar opens a dialog with the joined texts.
    await page.check('.memory-row:has-text("野餐带了三明治和西瓜") [data-row-select]')
    await page.check('.memory-row:has-text("周六和阿杰去公园野餐") [data-row-select]')
    await page.click("[data-bulk-bar] [data-action=merge]")
    await page.wait_for_selector("#merge-slot dialog[open]")
    await shoot(page, str(shots / "merge-dialog-zh.png"))
    await page.fill("#merge-content", "周六野餐，带了三明治和西瓜")
    await page.click("[data-action=merge-submit]")
    await page.wait_for_selector("[data-result=notice]:has-text('已合并 2 条记忆')")
    assert await page.locator("#merge-slot dialog").count() == 0
    assert await page.locator(".memory-row", has_text="周六野餐，带了三明治和西瓜").count() == 1
    await shoot(page, str(shots / "after-merge-zh.png"), full=True)
    assert console_errors == []
    await context.close()
    for name in ("drafts-zh", "event-sources-zh", "merge-dialog-zh", "after-merge-zh"):
        assert (shots / f"{name}.png").stat().st_size > 10_000, name
