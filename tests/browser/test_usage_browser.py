"""The dashboard in chromium at 1366 and 390 px: the usage chart and its ranges over several
days and two models with cost summed, local times on every page that shows one, and no page
wider than a phone's screen."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from pawwake.app import create_app
from pawwake.db.pool import cursor, execute
from pawwake.services import services_of
from tests.dashboard_support import PASSWORD, SECRET

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="session")]

ZONE = timezone(timedelta(hours=8))
LONG_SESSION = "openwebui-" + "c0ffee" * 8  # an id with no break opportunity
WIDTHS = [1366, 390]
# Besides every page in the navigation (read from the page, so a new page is covered too):
# the pages opened from lists and buttons.
MORE_PAGES = [f"/conversations/view?session={LONG_SESSION}", "/usage?days=90",
              "/memories/organise", "/memories/backfill"]

WIDTH_OF_PAGE = "() => [document.documentElement.scrollWidth, window.innerWidth]"
# Which elements stick out past the right edge (named in the failure message).
OVERFLOWING = """() => [...document.querySelectorAll('body *')]
  .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)
  .filter(e => ![...document.querySelectorAll('.table-wrap, .chart-wrap')].some(w => w !== e && w.contains(e)))
  .concat([...document.querySelectorAll('body *')].filter(e => e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflowX === 'visible'))
  .slice(0, 6).map(e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right))"""


def at_local(days_ago: int, hour: int, minute: int) -> datetime:
    """A UTC instant given as a local (UTC+8) wall time ``days_ago`` days back."""
    today = datetime.now(UTC).astimezone(ZONE).date() - timedelta(days=days_ago)
    return datetime(today.year, today.month, today.day, hour, minute, tzinfo=ZONE).astimezone(UTC)


# A message written at 06:50 local is still "yesterday 22:50" in UTC: the page must not say so.
MESSAGE_AT = at_local(1, 6, 50)
LOCAL_SHOWN = MESSAGE_AT.astimezone(ZONE).strftime("%Y-%m-%d %H:%M")
UTC_SHOWN = MESSAGE_AT.strftime("%Y-%m-%d %H:%M")


async def seed(pool: Any) -> None:
    for session, minutes in ((LONG_SESSION, 0), ("kyoto", 3)):
        for role, text in (("user", "下个月去京都旅行，清水寺那天怎么安排"),
                           ("assistant", "早上七点到清水寺，中午去二年坂吃汤豆腐。")):
            async with cursor(pool) as cur:
                await execute(cur, "INSERT INTO conversations (session_id, role, content, model,"
                              " created_at) VALUES (%s, %s, %s, 'test/model-a', %s)",
                              (session, role, text, MESSAGE_AT + timedelta(minutes=minutes)))
    usage = [  # (days ago, local hour, model, kind, input, output, cost)
        (0, 9, "test/model-a", "chat", 1200, 300, 0.0012),
        (1, 6, "test/model-b", "chat", 800, 200, 0.0034),
        (1, 23, "test/model-a", "extract", 400, 100, None),
        (3, 12, "test/model-b", "summary", 600, 150, None),
        (12, 12, "test/model-a", "chat", 50, 50, None),
        (45, 12, "test/model-a", "chat", 70, 30, None)]
    for days_ago, hour, model, kind, prompt, completion, cost in usage:
        async with cursor(pool) as cur:
            await execute(cur, "INSERT INTO token_usage (session_id, model, prompt_tokens,"
                          " completion_tokens, total_tokens, usage_type, cost, created_at)"
                          " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                          ("kyoto", model, prompt, completion, prompt + completion, kind, cost,
                           at_local(days_ago, hour, 0)))
    async with cursor(pool) as cur:
        await execute(cur, "INSERT INTO memories (content, importance, created_at) VALUES"
                      " (%s, 7, %s), ('用户对花生过敏', 9, %s)",
                      ("用户的猫叫小橘，" * 20 + "https://example.com/" + "a" * 80, MESSAGE_AT,
                       MESSAGE_AT))
        await execute(cur, "INSERT INTO jobs (kind, status, last_error, attempts, created_at,"
                      " updated_at) VALUES ('extract', 'failed', 'UpstreamError', 5, %s, %s)",
                      (MESSAGE_AT, MESSAGE_AT))


@pytest_asyncio.fixture(loop_scope="session")  # the browser's loop (see conftest.py)
async def dashboard(aiohttp_server: Any, make_settings: Any, upstream: Any) -> str:
    # Partition mode on: the threads page lists threads (with it off, it only explains).
    app = create_app(make_settings(DASHBOARD_PASSWORD=PASSWORD, SESSION_SECRET=SECRET,
                                   TIMEZONE_HOURS=8, JOB_WORKERS=0,
                                   CACHE_PARTITION_ENABLED=True))
    server = await aiohttp_server(app)
    await services_of(app).database.wait_ready()
    await seed(services_of(app).database.pool)
    return str(server.make_url("/dashboard")).rstrip("/")


async def logged_in(browser: Any, base: str, width: int, lang: str = "zh") -> Any:
    context = await browser.new_context(viewport={"width": width, "height": 900})
    page = await context.new_page()
    await page.goto(base + "/login")
    await page.fill("#password", PASSWORD)
    await page.click("form.login-form button[type=submit]")
    await page.wait_for_url(base)
    if lang != "zh":
        await context.add_cookies([{"name": "pawwake_lang", "value": lang,
                                    "url": base.rsplit("/dashboard", 1)[0]}])
    return page


@pytest.mark.parametrize("width", WIDTHS)
async def test_usage_chart_ranges_and_cost(browser: Any, dashboard: str, width: int,
                                           tmp_path: Path) -> None:
    page = await logged_in(browser, dashboard, width, "en")
    await page.goto(dashboard + "/usage")
    assert await page.locator("svg.usage-chart g.day").count() == 30
    figure = page.locator("[data-figure='cost']")
    assert await figure.inner_text() == "$0.0046"
    assert await page.locator("[data-figure='total']").inner_text() == "3,850"
    yesterday = at_local(1, 12, 0).astimezone(ZONE).date().isoformat()
    day = page.locator(f"g.day[data-day='{yesterday}']")
    assert await day.locator("rect[data-kind]").count() == 2  # chat and extraction, stacked
    title = await day.locator("title").text_content()
    assert "Chat: 1,000" in title and "Extraction: 500" in title and "Total: 1,500" in title
    labels = await page.locator("text.x-label").all_text_contents()
    assert labels[-1] == datetime.now(UTC).astimezone(ZONE).strftime("%m-%d")
    assert (await page.locator("g.axis-y text").all_text_contents())[0] == "0"
    # hovering a day marks its column (the <title> gives the numbers as a tooltip)
    hit = day.locator("rect.hit")
    before = await hit.evaluate("e => getComputedStyle(e).fill")
    await day.hover()
    assert await hit.evaluate("e => getComputedStyle(e).fill") != before
    models = await page.locator("table[data-table='models'] tbody tr").evaluate_all(
        "rows => rows.map(r => [r.dataset.model, r.querySelector('[data-cost]').innerText])")
    assert models == [["test/model-a", "$0.0012"], ["test/model-b", "$0.0034"]]
    await page.screenshot(path=str(tmp_path / f"usage-{width}.png"), full_page=True)

    await page.click("[data-range='7']")
    await page.wait_for_url("**/usage?days=7")
    assert await page.locator("svg.usage-chart g.day").count() == 7
    assert await page.locator("[data-figure='calls']").inner_text() == "4"
    await page.click("[data-range='90']")
    await page.wait_for_url("**/usage?days=90")
    assert await page.locator("svg.usage-chart g.day").count() == 90
    assert await page.locator("[data-figure='calls']").inner_text() == "6"
    async with page.expect_download() as info:
        await page.click("[data-csv]")
    download = await info.value
    assert download.suggested_filename.startswith("pawwake-usage-90d-")
    await page.context.close()


@pytest.mark.parametrize("width", WIDTHS)
async def test_times_are_local_on_every_page(browser: Any, dashboard: str, width: int) -> None:
    page = await logged_in(browser, dashboard, width)
    for path in ("/conversations", f"/conversations/view?session={LONG_SESSION}", "/threads",
                 "/jobs", "/usage"):
        await page.goto(dashboard + path)
        text = await page.inner_text("main")
        assert LOCAL_SHOWN[:10] in text, path
        assert UTC_SHOWN not in text, f"{path} shows UTC time {UTC_SHOWN}"
        if path != "/usage":  # usage shows the last use, a later time of the same session
            assert LOCAL_SHOWN in text, path
    await page.goto(dashboard + "/memories")  # memories show the local day they were noted
    text = await page.inner_text("main")
    assert LOCAL_SHOWN[:10] in text and UTC_SHOWN[:10] not in text
    await page.context.close()


@pytest.mark.parametrize("lang", ["zh", "en"])
async def test_no_page_is_wider_than_a_phone(browser: Any, dashboard: str, lang: str,
                                             tmp_path: Path) -> None:
    page = await logged_in(browser, dashboard, 390, lang)
    too_wide = {}
    nav = await page.eval_on_selector_all("nav.mainnav a", "links => links.map(a => a.pathname)")
    assert len(nav) >= 9
    # the navigation is folded into a menu that opens on a tap
    assert not await page.locator("nav.mainnav a").first.is_visible()
    await page.click(".nav-toggle-label")
    assert await page.locator("nav.mainnav a").nth(len(nav) - 1).is_visible()
    for path in [link.removeprefix("/dashboard") for link in nav] + MORE_PAGES:
        response = await page.goto(dashboard + path)
        assert response is not None and response.status == 200, path
        scroll, inner = await page.evaluate(WIDTH_OF_PAGE)
        if path == "/conversations":  # ids keep a readable width, not a letter a line
            cell = await page.locator(f"tr[data-session='{LONG_SESSION}'] .conv-session"
                                      ).bounding_box()
            assert cell is not None and cell["width"] >= 150
        if scroll > inner:
            too_wide[path] = (scroll, await page.evaluate(OVERFLOWING))
            await page.screenshot(path=str(tmp_path / f"wide{path.replace('/', '-')}.png"))
    await page.context.close()
    login = await (await browser.new_context(viewport={"width": 390, "height": 900})).new_page()
    await login.goto(dashboard + "/login")
    scroll, inner = await login.evaluate(WIDTH_OF_PAGE)
    if scroll > inner:
        too_wide["/login"] = (scroll, [])
    assert not too_wide, too_wide
