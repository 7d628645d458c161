""""Test connection" on the settings page in a real browser: the typed address and key are
tried, the answer appears in the group, and nothing is saved."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pawwake.app import create_app
from pawwake.services import services_of
from tests.dashboard_support import PASSWORD, SECRET

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="session")]

TYPED_KEY = "sk-typed-in-the-browser-abcdef"


async def test_test_connection_tries_the_typed_provider_without_saving(
        browser: Any, aiohttp_server: Any, make_settings: Any, upstream: Any,
        tmp_path: Path) -> None:
    server = await aiohttp_server(create_app(make_settings(
        DASHBOARD_PASSWORD=PASSWORD, SESSION_SECRET=SECRET, JOB_WORKERS=0)))
    base = str(server.make_url("/")).rstrip("/")
    page = await (await browser.new_context(viewport={"width": 1280, "height": 900})).new_page()
    await page.goto(base + "/dashboard/login")
    await page.fill("#password", PASSWORD)
    await page.click("form.login-form button[type=submit]")
    await page.wait_for_url(base + "/dashboard")
    await page.goto(base + "/dashboard/settings")
    before = services_of(server.app).config.current()["API_BASE_URL"]
    await page.fill("#f-API_BASE_URL", str(upstream.server.make_url("/openrouter/api/v1")))
    await page.fill("#f-API_KEY", TYPED_KEY)
    await page.click("#group-basic [data-test-connection]")
    await page.wait_for_selector('#group-basic [data-probe-result] [data-result="ok"]')
    shown = await page.inner_text("#group-basic [data-probe-result]")
    assert "127.0.0.1" in shown and TYPED_KEY not in await page.content()
    assert upstream.requests[-1].headers["Authorization"] == f"Bearer {TYPED_KEY}"
    assert services_of(server.app).config.current()["API_BASE_URL"] == before
    await page.locator("#group-basic").screenshot(path=str(tmp_path / "settings-probe.png"))
