"""Browser fixtures: Debian's chromium driven by Playwright's async API.

One chromium serves every browser test of a run (starting Playwright's driver and the browser
took about a second a test); each test gets fresh browser contexts, closed after it, so no
cookie, storage or page outlives its test. Playwright's objects belong to the event loop that
made them, so the browser tests (``pytestmark`` in each file) and the async fixtures they use
run on pytest-asyncio's session loop: the fixtures below are the shared ones again, bound to
that loop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest_asyncio
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from pawwake.app import create_app
from pawwake.settings import Settings
from tests.fake_upstream import FakeUpstream, on_loopback

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def shared_chromium() -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        chromium = await playwright.chromium.launch(executable_path=CHROMIUM,
                                                    args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            await chromium.close()


@pytest_asyncio.fixture(loop_scope="session")
async def browser(shared_chromium: Any) -> AsyncIterator[Any]:
    """The run's chromium; the contexts a test opens are closed when it ends."""
    before = set(shared_chromium.contexts)
    try:
        yield shared_chromium
    finally:
        for context in shared_chromium.contexts:
            if context not in before:
                await context.close()


@pytest_asyncio.fixture(loop_scope="session")
async def aiohttp_server() -> AsyncIterator[Callable[..., Any]]:
    """pytest-aiohttp's ``aiohttp_server`` on the session loop (apps only)."""
    servers: list[TestServer] = []

    async def start(app: web.Application, **kwargs: Any) -> TestServer:
        server = TestServer(app, host="127.0.0.1")
        await server.start_server(**kwargs)
        servers.append(server)
        return server

    yield start
    while servers:
        await servers.pop().close()


@pytest_asyncio.fixture(loop_scope="session")
async def aiohttp_client(aiohttp_server: Callable[..., Any]
                         ) -> AsyncIterator[Callable[..., Any]]:
    """pytest-aiohttp's ``aiohttp_client`` on the session loop (apps only); its server is one
    of ``aiohttp_server``'s, closed with them."""
    clients: list[TestClient[Any, Any]] = []

    async def start(app: web.Application, **kwargs: Any) -> TestClient[Any, Any]:
        client: TestClient[Any, Any] = TestClient(await aiohttp_server(app), **kwargs)
        clients.append(client)
        return client

    yield start
    while clients:
        await clients.pop().close()


@pytest_asyncio.fixture(loop_scope="session")
async def upstream(aiohttp_server: Any) -> FakeUpstream:
    return await on_loopback(FakeUpstream(), aiohttp_server)


@pytest_asyncio.fixture(loop_scope="session")
async def make_client(make_settings: Callable[..., Settings], aiohttp_client: Any
                      ) -> Callable[..., Any]:
    async def start(**overrides: Any) -> TestClient[Any, Any]:
        return await aiohttp_client(create_app(make_settings(**overrides)))

    return start
