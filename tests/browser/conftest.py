"""Browser fixtures: Debian's chromium driven by Playwright's async API."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        chromium = await playwright.chromium.launch(executable_path=CHROMIUM,
                                                    args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            await chromium.close()
