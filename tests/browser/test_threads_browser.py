"""The threads page in a real browser: rotation progress of the active thread, create (with and
without an inherited summary), switch and reload, rename, the summary editor, delete (refused
for the active thread), and the English labels."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pawwake.db.pool import cursor, fetch_all, fetch_one
from pawwake.services import services_of
from tests.browser.test_tryit_browser import signed_in
from tests.dashboard_support import PASSWORD, SECRET
from tests.partition_support import PARTITION, now_turn, say, state_row, system

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="session")]

SUMMARY = "用户计划五月去京都，住在祇园附近，想看清水寺。"
EDITED = "用户五月去京都三天：第一天清水寺，第二天伏见稻荷。"
CREATE = "section[aria-labelledby=threads-create]"
RENAME = "section[aria-labelledby=threads-rename]"


async def fact(page: Any, name: str) -> str:
    return " ".join((await page.inner_text(f"[data-fact='{name}']")).split())


async def thread_rows(page: Any) -> list[str]:
    return [await row.get_attribute("data-thread")
            for row in await page.locator("tr[data-thread]").all()]


async def pills(page: Any, thread: str) -> list[str]:
    return [text.strip() for text in
            await page.locator(f"tr[data-thread='{thread}'] .pill").all_inner_texts()]


async def submit(page: Any, selector: str, done: str) -> str:
    """Press a form button; the page comes back with a notice, whose text is returned."""
    await page.click(selector)
    await page.wait_for_url(f"**/dashboard/threads?done={done}*")
    return await page.inner_text("[data-notice]")


async def stored_state(pool: Any, thread: str) -> list[str] | None:
    async with cursor(pool) as cur:
        row = await fetch_one(cur, "SELECT summary_parts FROM partition_state WHERE thread_id = %s",
                              (thread,))
    return None if row is None else row["summary_parts"]


async def message_counts(pool: Any) -> dict[tuple[str, bool], int]:
    async with cursor(pool) as cur:
        rows = await fetch_all(cur, "SELECT session_id, deleted_at IS NOT NULL AS trashed,"
                                    " count(*) AS n FROM conversations GROUP BY 1, 2")
    return {(r["session_id"], r["trashed"]): r["n"] for r in rows}


async def test_threads_page_end_to_end(browser: Any, gateway: Any, upstream: Any,
                                       tmp_path: Path) -> None:
    client = await gateway(DASHBOARD_PASSWORD=PASSWORD, SESSION_SECRET=SECRET,
                           CACHE_SUMMARY_MODEL="test/summary", **PARTITION)
    pool = services_of(client.server.app).database.pool
    # Five rounds with X = 2: the fifth rotates zone A into a summary; 3 rounds stay live.
    for n in range(1, 5):
        await say(client, upstream, f"第{n}个问题", f"第{n}个回答")
    await say(client, upstream, "第5个问题", "第5个回答", summary=SUMMARY)
    assert (await state_row(client))["rotations"] == 1
    base = str(client.make_url("/")).rstrip("/")
    shots = tmp_path / "screenshots"
    shots.mkdir()

    context, page, console_errors = await signed_in(browser, base, 1280, "/dashboard/threads")

    # The active thread and its rotation progress.
    assert await page.inner_text("h1") == "对话线管理"
    assert await page.get_attribute("nav.mainnav a[aria-current=page]", "href") \
        == "/dashboard/threads"
    assert await fact(page, "active") == "default"
    assert await fact(page, "rounds") == "5"
    assert await fact(page, "zones") == "A 2 · B 1"
    progress = page.locator("[data-fact='until'] progress")
    assert (await progress.get_attribute("value"), await progress.get_attribute("max")) \
        == ("3", "4")
    assert "还差 1 轮" in await fact(page, "until")
    assert await fact(page, "summary") == f"1 段，{len(SUMMARY)} 字"
    assert await thread_rows(page) == ["default"]
    assert await pills(page, "default") == ["当前", "有摘要"]
    assert await page.inner_text("tr[data-thread='default'] td:nth-child(2)") == "10"
    assert await page.locator("tr[data-thread='default'] button").count() == 0
    assert await page.input_value("textarea[data-summary]") == SUMMARY
    await page.screenshot(path=str(shots / "threads-zh.png"), full_page=True)

    # New threads: one inherits the summary, one starts empty.
    await page.fill(CREATE + " input[name=thread]", "旅行")
    await page.select_option(CREATE + " select[name=inherit]", "default")
    assert await submit(page, "[data-action=create]", "created") == "已新建对话线。"
    assert await page.get_attribute("[data-notice]", "class") == "notice"  # not an alert
    assert await pills(page, "旅行") == ["有摘要"]
    assert await stored_state(pool, "旅行") == [SUMMARY]
    await page.fill(CREATE + " input[name=thread]", "空白")
    assert await page.input_value(CREATE + " select[name=inherit]") == ""
    assert await submit(page, "[data-action=create]", "created") == "已新建对话线。"
    assert await pills(page, "空白") == []
    assert await stored_state(pool, "空白") == []
    assert sorted(await thread_rows(page)) == sorted(["default", "旅行", "空白"])
    # A taken id is refused with a message in the page's language.
    await page.fill(CREATE + " input[name=thread]", "旅行")
    async with page.expect_response(lambda r: r.url.endswith("/threads/action")) as answer:
        await page.click("[data-action=create]")
    assert (await answer.value).status == 409
    assert await page.inner_text("[role=alert]") == "对话线 旅行 已存在，请换一个 ID。"
    await page.goto(base + "/dashboard/threads")
    await page.screenshot(path=str(shots / "threads-list-zh.png"), full_page=True)
    # A second tab still shows 旅行 as inactive, with its delete button.
    stale = await context.new_page()
    stale.on("console", lambda message: console_errors.append(message.text)
             if message.type == "error" else None)
    await stale.goto(base + "/dashboard/threads")

    # Switch: the page, a reload, the stored setting and the next chat all agree.
    assert await submit(page, "tr[data-thread='旅行'] [data-action=switch]", "switched") \
        == "已切换对话线。"
    assert await fact(page, "active") == "旅行"
    await page.reload()
    assert await fact(page, "active") == "旅行"
    assert await pills(page, "旅行") == ["当前", "有摘要"]
    assert await page.locator("tr[data-thread='default'] [data-action=switch]").count() == 1
    async with cursor(pool) as cur:
        row = await fetch_one(cur, "SELECT value FROM gateway_config"
                                   " WHERE key = 'PARTITION_SESSION_ID'")
    assert row is not None and row["value"] == "旅行"
    assert await say(client, upstream, "第一天去哪", "先去清水寺") \
        == [system(None, [SUMMARY]), now_turn("第一天去哪")]

    # Deleting the active thread from the stale tab is refused, visibly, and nothing changes.
    async with stale.expect_response(lambda r: r.url.endswith("/threads/action")) as answer:
        await stale.click("tr[data-thread='旅行'] [data-action=delete]")
    assert (await answer.value).status == 409
    await stale.wait_for_load_state()
    assert "这是当前对话线，不能删除" in await stale.inner_text("[role=alert]")
    await stale.screenshot(path=str(shots / "threads-refused-zh.png"), full_page=True)
    await stale.close()
    assert await stored_state(pool, "旅行") == [SUMMARY]
    assert (await message_counts(pool))[("旅行", False)] == 2

    # Rename: the messages, token usage and rotation state move with the thread.
    await page.select_option(RENAME + " select[name=thread]", "default")
    await page.fill(RENAME + " input[name=new_id]", "旧对话")
    assert await submit(page, "[data-action=rename]", "renamed") == "已改名。"
    assert "default" not in await thread_rows(page)
    assert await page.inner_text("tr[data-thread='旧对话'] td:nth-child(2)") == "10"
    counts = await message_counts(pool)
    assert counts[("旧对话", False)] == 10 and ("default", False) not in counts
    async with cursor(pool) as cur:
        usage = await fetch_all(cur, "SELECT DISTINCT session_id FROM token_usage")
    assert "旧对话" in {r["session_id"] for r in usage}
    assert "default" not in {r["session_id"] for r in usage}
    assert (await state_row(client, "旧对话"))["rotations"] == 1
    response = await client.get("/api/partition/threads")
    listed = {t["thread_id"]: t for t in (await response.json())["threads"]}
    assert listed["旧对话"]["messages"] == 10 and listed["旧对话"]["has_summary"]
    assert listed["旅行"]["active"] and "default" not in listed

    # Edit, then clear, the active thread's summary.
    await page.fill("textarea[data-summary]", EDITED)
    assert await submit(page, "[data-action=summary-save]", "summary_saved") == "摘要已保存。"
    assert await page.input_value("textarea[data-summary]") == EDITED
    assert await fact(page, "summary") == f"1 段，{len(EDITED)} 字"
    assert await stored_state(pool, "旅行") == [EDITED]
    assert await submit(page, "[data-action=summary-clear]", "summary_cleared") \
        == "摘要已清空。"
    assert await page.input_value("textarea[data-summary]") == ""
    assert await fact(page, "summary") == "0 段，0 字"
    assert await pills(page, "旅行") == ["当前"]
    assert await stored_state(pool, "旅行") == []
    # The summary of another thread opens from its row.
    await page.click("tr[data-thread='旧对话'] a")
    await page.wait_for_url("**/dashboard/threads?summary=*")
    assert await page.input_value("textarea[data-summary]") == SUMMARY

    # Delete inactive threads: an empty one, and one whose messages go to the trash.
    assert await submit(page, "tr[data-thread='空白'] [data-action=delete]", "deleted") \
        == "已删除对话线，消息已移入对话回收站。"
    assert await submit(page, "tr[data-thread='旧对话'] [data-action=delete]", "deleted") \
        == "已删除对话线，消息已移入对话回收站。"
    assert await thread_rows(page) == ["旅行"]
    assert await stored_state(pool, "空白") is None
    assert await stored_state(pool, "旧对话") is None
    counts = await message_counts(pool)
    assert counts[("旧对话", True)] == 10 and ("旧对话", False) not in counts

    # English labels.
    await page.click(".lang-switch button[value=en]")
    await page.wait_for_selector("html[lang=en]")
    assert await page.inner_text("h1") == "Conversation threads"
    labels = await page.locator("section[aria-labelledby=threads-status] dt").all_inner_texts()
    assert labels == ["Active thread", "Rounds stored", "Rounds in zone A / B",
                      "Next rotation", "Summary"]
    assert "3 rounds to go" in await fact(page, "until")
    assert await pills(page, "旅行") == ["active"]
    assert await page.inner_text("[data-action=create]") == "New thread"
    assert await page.inner_text("[data-action=summary-save]") == "Save summary"
    await page.screenshot(path=str(shots / "threads-en.png"), full_page=True)
    # Only the deliberate refusal shows up (as a failed 409 load); no script or CSP errors.
    assert [e for e in console_errors if "409" not in e] == []
    await context.close()
    for name in ("threads-zh", "threads-list-zh", "threads-refused-zh", "threads-en"):
        assert (shots / f"{name}.png").stat().st_size > 10_000, name
