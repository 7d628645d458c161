"""The try-it page in a real browser at 1366 and 390 px: a reply streams in beside the panel of
what was injected, a second message carries the first exchange, and the memories carried then
show in the conversation view and on the memory's own page."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from pawwake.db.pool import transaction
from pawwake.services import services_of
from tests.conditions import until
from tests.dashboard_support import PASSWORD, SECRET
from tests.memory_support import create
from tests.test_memory_injection import MEMORY_ON, add_memory

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="session")]


async def signed_in(browser: Any, base: str, width: int, path: str,
                    wait_ms: float | None = 10_000) -> tuple[Any, Any, list]:
    """A fresh browser context signed in at ``path``: (context, page, console errors)."""
    context = await browser.new_context(viewport={"width": width, "height": 900})
    if wait_ms is not None:  # how long a step may wait (None: Playwright's own 30 s)
        context.set_default_timeout(wait_ms)
    page = await context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    await page.goto(base + path)
    await page.fill("#password", PASSWORD)
    await page.click("form.login-form button[type=submit]")
    await page.wait_for_url(base + path)
    return context, page, errors


async def overflow(page: Any) -> int:
    return await page.evaluate("document.documentElement.scrollWidth - window.innerWidth")


@pytest.mark.parametrize("width", [1366, 390])
async def test_try_it_streams_with_its_injection_panel(browser: Any, gateway: Any,
                                                       upstream: Any, tmp_path: Path,
                                                       width: int) -> None:
    client = await gateway(persona="你是小爪。", DASHBOARD_PASSWORD=PASSWORD,
                           SESSION_SECRET=SECRET, **MEMORY_ON)
    memory = await add_memory(client, "用户的猫叫小橘", event_date="2026-02-17")
    async with transaction(services_of(client.server.app).database.pool) as cur:
        await cur.execute("INSERT INTO conversations (session_id, role, content)"
                          " VALUES ('origin', 'user', '我家猫叫小橘') RETURNING id")
        source = (await cur.fetchone())[0]
        await cur.execute("UPDATE memories SET source_message_ids = %s WHERE id = %s",
                          ([source], memory))
    base = str(client.make_url("/")).rstrip("/")
    context, page, errors = await signed_in(browser, base, width, "/dashboard/try")
    assert await page.inner_text("h1") == "试聊"
    assert await page.locator("#tryit-injected [data-injection]").count() == 0

    upstream.reply_text("小橘可能是换季了，多喝水。", pieces=5)
    await page.fill("input[name=session]", f"try-{width}")
    await page.fill("textarea[name=message]", "小橘最近胃口不好怎么办")
    await page.click("[data-tryit-send]")
    await page.wait_for_selector("[data-tryit-reply=done]")
    assert page.url == base + "/dashboard/try"  # the script read the stream; no navigation
    assert "小橘可能是换季了，多喝水。" in await page.inner_text("[data-tryit-reply=done]")
    item = page.locator(f"#tryit-injected [data-memory='{memory}']")
    assert "用户的猫叫小橘" in await item.inner_text()
    assert float(await item.locator("[data-relevance]").inner_text()) > 0
    assert await page.locator("#tryit-injected [data-injection-kind=persona]").count() == 1
    assert await page.input_value("textarea[name=message]") == ""
    assert not await page.is_visible("[data-tryit-error]")
    assert await overflow(page) <= 0
    await page.screenshot(path=str(tmp_path / f"tryit-{width}.png"), full_page=True)

    # The second message carries the first exchange (plain mode: the client sends history).
    upstream.reply_text("不客气。")
    await page.fill("textarea[name=message]", "谢谢")
    await page.click("[data-tryit-send]")
    await page.wait_for_selector("li[data-tryit-reply=done] >> nth=1")
    sent = [m["content"] for m in upstream.requests[-1].body["messages"]
            if m["role"] != "system"]
    assert sent == ["小橘最近胃口不好怎么办", "小橘可能是换季了，多喝水。", "谢谢"]

    # The conversation view shows what the first reply carried, linking to the memory ...
    await page.goto(base + f"/dashboard/conversations/view?session=try-{width}")
    carried = page.locator("[data-turn-injected]").first
    assert "本轮带入的记忆" in await carried.inner_text()
    await carried.locator(f"[data-injected-memory='{memory}'] a").click()
    await page.wait_for_url(base + f"/dashboard/memories/{memory}")
    # ... and the memory's page says how often it was used and where it came from.
    assert await page.get_attribute("[data-memory-usage]", "data-memory-usage") == "1"
    assert await page.locator(f"[data-source-message='{source}']").count() == 1
    assert await overflow(page) <= 0
    await page.screenshot(path=str(tmp_path / f"memory-{width}.png"), full_page=True)

    await page.goto(base + "/dashboard/try")
    await page.click("button[name=lang][value=en]")
    await page.wait_for_selector("html[lang=en]")
    assert await page.inner_text("h1") == "Try it"
    assert errors == []
    await context.close()


@pytest.mark.parametrize("width", [1366, 390])
async def test_a_near_miss_is_shown_with_its_reason(browser: Any, gateway: Any, upstream: Any,
                                                    tmp_path: Path, width: int) -> None:
    """The memory a question is about, kept out by the floor: the panel names it next to
    what was injected, with its relevance and the floor, in both languages."""
    client = await gateway(persona="你是小爪。", DASHBOARD_PASSWORD=PASSWORD,
                           SESSION_SECRET=SECRET, MEMORY_ENABLED=True,
                           EMBEDDING_PROVIDER="local", JOB_WORKERS=0, MEMORY_EXTRACT_INTERVAL=0,
                           MEMORY_INJECT_MIN_RELEVANCE=1.0, QUERY_EMBEDDING_TIMEOUT=60.0,
                           QUERY_EMBEDDING_MAX_WAIT=0.0)  # a loaded host: still hybrid
    dog = (await create(client, "用户的狗叫豆豆，是一只柯基"))["id"]
    await create(client, "用户住在杭州")
    await until(lambda: services_of(client.server.app).tasks.pending == 0)  # vectors in
    base = str(client.make_url("/")).rstrip("/")
    context, page, errors = await signed_in(browser, base, width, "/dashboard/try")
    upstream.reply_text("豆豆是什么品种我不太确定。")
    await page.fill("input[name=session]", f"why-{width}")
    await page.fill("textarea[name=message]", "我的狗豆豆是什么品种？")
    await page.click("[data-tryit-send]")
    await page.wait_for_selector("[data-tryit-reply=done]")
    miss = page.locator(f"#tryit-injected [data-near-miss='{dog}']")
    assert await miss.get_attribute("data-reason") == "below_floor"
    assert await miss.is_visible()
    why = await miss.locator("[data-why]").inner_text()
    assert re.search(r"相关度 [01]\.\d{3} 低于注入门槛 1\.000", why), why
    assert "豆豆" in await miss.inner_text()
    assert await page.locator("#tryit-injected [data-memory]").count() == 0
    assert await overflow(page) <= 0
    await page.screenshot(path=str(tmp_path / f"near-miss-{width}.png"), full_page=True)

    await page.click("button[name=lang][value=en]")
    await page.wait_for_selector("html[lang=en]")
    assert await page.locator("[data-tryit-reply=done]").count() == 0
    upstream.reply_text("Not sure.")
    await page.fill("textarea[name=message]", "豆豆是什么品种的狗？")
    await page.click("[data-tryit-send]")
    await page.wait_for_selector("[data-tryit-reply=done]")  # the page was reloaded in English
    miss = page.locator(f"#tryit-injected [data-near-miss='{dog}'] [data-why]")
    assert "below the floor 1.000" in await miss.inner_text()
    assert await overflow(page) <= 0
    assert errors == []
    await context.close()
