"""The dashboard in a real browser: log in, change settings, see them used, switch language."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest

from pawwake.app import create_app
from tests.dashboard_support import PASSWORD, SECRET

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="session")]

PROMPT = "你是小爪，一只温柔的猫。\n回答简短。"

# Draws two different characters with the page's own fonts: missing glyphs ("tofu") would
# come out as identical boxes, real Chinese glyphs differ.
GLYPHS_DIFFER = """() => {
  const family = getComputedStyle(document.body).fontFamily;
  const draw = (text) => {
    const canvas = document.createElement("canvas");
    canvas.width = 64; canvas.height = 64;
    const ctx = canvas.getContext("2d");
    ctx.font = "48px " + family;
    ctx.fillText(text, 4, 52);
    return canvas.toDataURL();
  };
  return draw("爪") !== draw("迹") && draw("爪") !== draw("");
}"""


async def test_log_in_change_settings_and_switch_language(
        browser: Any, aiohttp_server: Any, make_settings: Any, upstream: Any,
        tmp_path: Path) -> None:
    upstream.models = ["test/model-a", "test/model-b", "vendor/other"]
    server = await aiohttp_server(create_app(make_settings(
        DASHBOARD_PASSWORD=PASSWORD, SESSION_SECRET=SECRET)))
    base = str(server.make_url("/")).rstrip("/")
    shots = tmp_path / "screenshots"
    shots.mkdir()

    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    console_errors: list[str] = []
    page.on("console", lambda message: console_errors.append(message.text)
            if message.type == "error" else None)
    await page.goto(base + "/dashboard")
    assert page.url.startswith(base + "/dashboard/login")
    assert await page.evaluate(GLYPHS_DIFFER), "Chinese text renders as boxes"
    await page.screenshot(path=str(shots / "login-zh.png"), full_page=True)

    await page.fill("#password", "wrong-password")
    await page.click("form.login-form button[type=submit]")
    await page.wait_for_selector("[role=alert]")
    assert "密码不正确" in await page.inner_text("[role=alert]")

    await page.fill("#password", PASSWORD)
    await page.click("form.login-form button[type=submit]")
    await page.wait_for_url(base + "/dashboard")
    assert await page.inner_text("h1") == "运行状态"
    await page.screenshot(path=str(shots / "status-zh.png"), full_page=True)

    await page.click("nav.mainnav >> text=设置")
    await page.wait_for_url(base + "/dashboard/settings")
    await page.wait_for_selector('[data-models="ok"]')
    options = await page.eval_on_selector_all("#model-options option", "els => els.map(e => e.value)")
    assert options == ["test/model-a", "test/model-b", "vendor/other"]

    await page.fill("#f-DEFAULT_MODEL", "test/model-b")
    await page.click("#group-basic button.button-primary[type=submit]")
    await page.wait_for_selector('#group-basic [data-result="saved"]')

    await page.fill("#f-SYSTEM_PROMPT", PROMPT)
    assert await page.inner_text("#count-SYSTEM_PROMPT") == str(len(PROMPT))
    await page.click("#group-advanced button[type=submit]")
    await page.wait_for_selector('#group-advanced [data-result="saved"]')
    assert await page.input_value("#f-SYSTEM_PROMPT") == PROMPT
    await page.screenshot(path=str(shots / "settings-saved-zh.png"), full_page=True)

    await page.fill("#settings-filter", "stream")
    assert await page.is_hidden('[data-setting="DEFAULT_MODEL"]')
    assert await page.is_visible('[data-setting="FORCE_STREAM"]')
    await page.fill("#settings-filter", "")

    async with aiohttp.ClientSession() as http:
        async with http.get(base + "/api/settings") as response:
            saved = {item["name"]: item["value"] for item in (await response.json())["settings"]}
        assert saved["DEFAULT_MODEL"] == "test/model-b"
        assert saved["SYSTEM_PROMPT"] == PROMPT
        # Applied: the next chat request carries the new model and persona upstream.
        async with http.post(base + "/v1/chat/completions", json={
                "messages": [{"role": "user", "content": "你好"}]}) as response:
            assert response.status == 200
            await response.read()
    sent = upstream.requests[-1].body
    assert sent["model"] == "test/model-b"
    assert any(message["role"] == "system" and PROMPT in message["content"]
               for message in sent["messages"])

    await page.click(".lang-switch button[value=en]")
    await page.wait_for_url(base + "/dashboard/settings")
    assert await page.inner_text("h1") == "Settings"
    assert await page.inner_text("#group-basic h2") == "Connection"
    await page.screenshot(path=str(shots / "settings-en.png"), full_page=True)
    await page.click(".lang-switch button[value=zh]")
    await page.wait_for_selector("html[lang=zh-CN]")
    # Only the deliberate wrong password shows up (as a failed 401 load); no script or CSP errors.
    assert [e for e in console_errors if "401" not in e] == []

    phone = await browser.new_context(viewport={"width": 390, "height": 844},
                                      storage_state=await context.storage_state())
    small = await phone.new_page()
    await small.goto(base + "/dashboard/settings")
    assert await small.inner_text("h1") == "设置"
    await small.screenshot(path=str(shots / "settings-phone-zh.png"), full_page=True)
    await phone.close()
    await context.close()
    for name in ("login-zh", "status-zh", "settings-saved-zh", "settings-en",
                 "settings-phone-zh"):
        assert (shots / f"{name}.png").stat().st_size > 10_000, name
