"""Enter in the dashboard's memory search box runs the highlighted search (semantic), the
same as clicking it; the quiet filter button runs only when clicked."""

from __future__ import annotations

from typing import Any

import pytest

from pawwake.services import services_of
from tests.browser.test_memories_browser import sign_in, start_server
from tests.memory_fixtures import insert_memory

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="session")]


async def test_enter_runs_the_highlighted_semantic_search(
        browser: Any, aiohttp_server: Any, make_settings: Any) -> None:
    server = await start_server(aiohttp_server, make_settings)
    await insert_memory(services_of(server.app).database.pool, "我的猫叫小橘")
    base = str(server.make_url("/")).rstrip("/")
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    await sign_in(page, base)
    highlighted = await page.get_attribute(".memory-search .button-primary", "data-search")
    assert highlighted == "semantic"

    await page.fill("#memory-q", "猫")
    await page.press("#memory-q", "Enter")
    await page.wait_for_selector(".search-summary")
    # No vector exists yet, so a semantic search says it fell back to keywords: the notice
    # shows that semantic search was asked for; a keyword filter shows none.
    assert await page.is_visible("[data-fallback]")
    assert await page.input_value("#memory-q") == "猫"

    await page.click("button[data-search=keyword]")
    await page.wait_for_selector(".search-summary:not(:has([data-fallback]))")
    assert not await page.is_visible("[data-fallback]")
    await context.close()
