"""The four memory search weights as sliders (四维权重滑块): moved with the keyboard, the value
shown beside them, saved like any setting; without JavaScript they are number inputs."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from pawwake.app import create_app
from pawwake.settings import BY_NAME
from tests.dashboard_support import PASSWORD, SECRET

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="session")]

WEIGHTS = ["MEMORY_HW_KEYWORD", "MEMORY_HW_SEMANTIC", "MEMORY_HW_IMPORTANCE",
           "MEMORY_HW_RECENCY"]


async def logged_in_page(browser: Any, base: str, *, javascript: bool) -> Any:
    context = await browser.new_context(viewport={"width": 1280, "height": 900},
                                        java_script_enabled=javascript)
    page = await context.new_page()
    await page.goto(base + "/dashboard/login")
    await page.fill("#password", PASSWORD)
    await page.click("form.login-form button[type=submit]")
    await page.wait_for_url(base + "/dashboard")
    await page.goto(base + "/dashboard/settings")
    return page


async def saved_settings(base: str) -> dict[str, Any]:
    async with aiohttp.ClientSession() as http, http.get(base + "/api/settings") as response:
        return {item["name"]: item for item in (await response.json())["settings"]}


async def test_weights_are_keyboard_sliders_with_their_value_shown(
        browser: Any, aiohttp_server: Any, make_settings: Any) -> None:
    server = await aiohttp_server(create_app(make_settings(
        DASHBOARD_PASSWORD=PASSWORD, SESSION_SECRET=SECRET)))
    base = str(server.make_url("/")).rstrip("/")
    page = await logged_in_page(browser, base, javascript=True)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))

    for name in WEIGHTS:
        slider = page.locator(f"#f-{name}")
        assert await slider.get_attribute("type") == "range"
        label = page.locator(f'label[for="f-{name}"]')
        assert await label.count() == 1  # the slider keeps its accessible name
        output = page.locator(f"output#o-{name}")
        assert await output.get_attribute("for") == f"f-{name}"
        assert await output.inner_text() == await slider.input_value()
    start = BY_NAME["MEMORY_HW_KEYWORD"].default
    assert await page.inner_text("#o-MEMORY_HW_KEYWORD") == f"{start:g}"
    moved = f"{start + 0.03:.2f}"

    # Keyboard only: focus the slider, three steps up.
    await page.focus("#f-MEMORY_HW_KEYWORD")
    for _ in range(3):
        await page.keyboard.press("ArrowRight")
    assert await page.input_value("#f-MEMORY_HW_KEYWORD") == moved
    assert await page.inner_text("#o-MEMORY_HW_KEYWORD") == moved
    await page.focus("#f-MEMORY_HW_RECENCY")
    await page.keyboard.press("Home")
    assert await page.inner_text("#o-MEMORY_HW_RECENCY") == "0"

    await page.click("#group-vector button[type=submit]")
    await page.wait_for_selector('#group-vector [data-result="saved"]')
    saved = await saved_settings(base)
    assert saved["MEMORY_HW_KEYWORD"]["value"] == float(moved)
    assert saved["MEMORY_HW_RECENCY"]["value"] == 0
    assert saved["MEMORY_HW_SEMANTIC"]["saved"] is False  # untouched: not pinned

    # The group came back from the server (htmx swap): still sliders, showing saved values.
    assert await page.get_attribute("#f-MEMORY_HW_KEYWORD", "type") == "range"
    assert await page.inner_text("#o-MEMORY_HW_KEYWORD") == moved
    assert await page.locator("#group-vector output.slider-value").count() == 4
    assert errors == []


async def test_without_javascript_the_weights_are_number_inputs(
        browser: Any, aiohttp_server: Any, make_settings: Any) -> None:
    server = await aiohttp_server(create_app(make_settings(
        DASHBOARD_PASSWORD=PASSWORD, SESSION_SECRET=SECRET)))
    base = str(server.make_url("/")).rstrip("/")
    page = await logged_in_page(browser, base, javascript=False)
    for name in WEIGHTS:
        assert await page.get_attribute(f"#f-{name}", "type") == "number"
    assert await page.locator("output.slider-value").count() == 0
    await page.fill("#f-MEMORY_HW_SEMANTIC", "0.4")
    await page.click("#group-vector button[type=submit]")
    await page.wait_for_load_state()
    saved = await saved_settings(base)
    assert saved["MEMORY_HW_SEMANTIC"]["value"] == 0.4
