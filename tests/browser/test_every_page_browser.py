"""Every dashboard page at a phone's 390x844 and a laptop's 1280x900, in both languages, over
realistic data (long session ids, twenty failing jobs, a month of usage): nothing wider than the
screen, every action inside it, a one-row header on the laptop, times labelled with their zone.

Set ``PAWWAKE_SCREENSHOTS`` to a folder to keep a screenshot of every page there."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from pawwake.app import create_app
from pawwake.services import services_of
from tests.browser.dashboard_data import (
    CLAUDE_SESSION,
    JOB_ERRORS,
    LONG_SESSION,
    VIEWPORTS,
    ZONE_LABEL,
    logged_in,
    seed_dashboard,
)
from tests.dashboard_support import PASSWORD, SECRET

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="session")]

PAGES = ["", "/try", "/memories", "/import", "/export", "/conversations",
         f"/conversations/view?session={LONG_SESSION}", "/threads", "/usage", "/usage?days=90",
         "/jobs", "/settings", "/memories/organise", "/memories/backfill"]
# Pages that show a time: each must say which zone it is in.
TIMED = {"", "/memories", "/conversations", f"/conversations/view?session={LONG_SESSION}",
         "/threads", "/usage", "/jobs"}

# Elements that reach past the right edge of the screen, except those clipped to nothing
# (visually hidden text).
OUTSIDE = """() => [...document.querySelectorAll('body *')].filter(e => {
  const r = e.getBoundingClientRect();
  return r.width > 1 && r.height > 1 && (r.right > innerWidth + 1 || r.left < -1);
}).slice(0, 8).map(e => e.tagName.toLowerCase() + '.' + [...e.classList].join('.')
  + (e.dataset.action ? '[' + e.dataset.action + ']' : '') + ' ' + Math.round(e.getBoundingClientRect().right))"""
# Controls a person presses, as boxes (hidden ones have no box).
CONTROLS = """() => [...document.querySelectorAll('main button, main a[data-action], main [data-action]')]
  .filter(e => e.getClientRects().length && getComputedStyle(e).visibility !== 'hidden')
  .map(e => { const r = e.getBoundingClientRect();
              return [e.dataset.action || e.textContent.trim().slice(0, 20), r.left, r.right]; })"""


@pytest_asyncio.fixture(loop_scope="session")  # the browser's loop (see conftest.py)
async def dashboard(aiohttp_server: Any, make_settings: Any) -> str:
    app = create_app(make_settings(DASHBOARD_PASSWORD=PASSWORD, SESSION_SECRET=SECRET,
                                   TIMEZONE_HOURS=8, JOB_WORKERS=0, MEMORY_ENABLED=True,
                                   CACHE_PARTITION_ENABLED=True,
                                   PARTITION_SESSION_ID=CLAUDE_SESSION))
    server = await aiohttp_server(app)
    await services_of(app).database.wait_ready()
    await seed_dashboard(services_of(app).database.pool)
    return str(server.make_url("/dashboard")).rstrip("/")


def shot_path(name: str) -> Path | None:
    folder = os.environ.get("PAWWAKE_SCREENSHOTS")
    if not folder:
        return None
    Path(folder).mkdir(parents=True, exist_ok=True)
    return Path(folder) / f"{name}.png"


# The top bar's parts that must share its one row: the brand, the links (on a laptop) or the
# menu button (on a phone), the language switch and sign-out.
TOP_BAR_ROW = """() => [...document.querySelectorAll(
    '.topbar > .brand, .mainnav li, .nav-toggle-label, .lang-switch, .logout-button')]
  .filter(e => e.getClientRects().length)
  .map(e => { const r = e.getBoundingClientRect(); return [e.className || e.tagName, r.top, r.bottom]; })"""
ONE_LINE = "els => els.map(e => e.getClientRects().length === 1)"


async def header_problems(page: Any) -> list[str]:
    header = await page.locator("header.topbar").bounding_box()
    assert header is not None
    parts = await page.evaluate(TOP_BAR_ROW)
    found = [] if header["height"] <= 64 else [f"{header['height']:.0f} px tall"]
    lowest_top = min(top for _, top, _ in parts)
    found += [f"{name} on a second row" for name, top, _ in parts if top > lowest_top + 24]
    return found


async def page_problems(page: Any, path: str, lang: str) -> dict[str, Any]:
    """What this page does wrong, besides fitting the screen, in the shown language."""
    found: dict[str, Any] = {}
    if path == "/jobs":
        errors = await page.locator("[data-field=error] .job-error").all_inner_texts()
        if len(errors) != 20 or (lang == "zh" and any(
                not any("\u4e00" <= ch <= "\u9fff" for ch in text) for text in errors)):
            found["job errors"] = errors
        raw = await page.locator("[data-field=error] .raw-error code").all_text_contents()
        if set(raw) != {error.strip() for _, _, error in JOB_ERRORS}:  # whole, behind a toggle
            found["raw errors"] = raw
    if path.startswith("/usage"):
        today = page.locator("svg.usage-chart g.day").last
        box = await today.bounding_box()
        width = page.viewport_size["width"]
        if box is None or box["x"] < 0 or box["x"] + box["width"] > width:
            found["today's bar"] = box
        if not "".join(await page.locator(".usage-axis .axis-unit").all_text_contents()):
            found["y unit"] = "missing"
        if await page.locator("[data-range-dates] .nowrap").evaluate_all(ONE_LINE) != [True]:
            found["date range"] = "breaks across lines"
    if path == "/conversations":
        rows = page.locator("tr[data-session]")
        opens = page.locator("tr[data-session] a[data-action=open]:visible")
        if await opens.count() != await rows.count() or not await rows.count():
            found["open links"] = (await opens.count(), await rows.count())
    return found


@pytest.mark.parametrize("device", list(VIEWPORTS))
async def test_every_page_fits_its_screen(browser: Any, dashboard: str, device: str) -> None:
    """Both languages (one browser context each) over the same data."""
    viewport = VIEWPORTS[device]
    problems: dict[str, Any] = {}
    for lang in ("zh", "en"):
        page = await logged_in(browser, dashboard, viewport, lang)
        for path in PAGES:
            problems.update({f"{lang} {path} {what}": found for what, found in
                             (await problems_of(page, dashboard, path, lang)).items()})
        await page.context.close()
    assert not problems, problems


async def problems_of(page: Any, dashboard: str, path: str, lang: str) -> dict[str, Any]:
    response = await page.goto(dashboard + path)
    assert response is not None and response.status == 200, path
    width = page.viewport_size["width"]
    name = f"{'phone' if width < 600 else 'laptop'}-{lang}" + (
        path.split("?")[0].replace("/", "-") or "-status") + ("-90" if "days=90" in path else "")
    target = shot_path(name)
    if target is not None:
        await page.screenshot(path=str(target), full_page=True)
        await page.screenshot(path=str(target.with_suffix(".top.png")))
    found: dict[str, Any] = {}
    scroll = await page.evaluate("() => document.documentElement.scrollWidth")
    outside = await page.evaluate(OUTSIDE)
    if scroll > width or outside:
        found["too wide"] = {"page width": scroll, "outside": outside}
    stray = [c for c in await page.evaluate(CONTROLS) if c[2] > width + 1 or c[1] < -1]
    if stray:
        found["controls off screen"] = stray[:6]
    if path in TIMED and ZONE_LABEL not in await page.inner_text("main"):
        found["zone"] = f"no {ZONE_LABEL} on the page"
    if header := await header_problems(page):
        found["header"] = header
    found.update(await page_problems(page, path, lang))
    return found
