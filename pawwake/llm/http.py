"""The one shared aiohttp ClientSession for every upstream call."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import aiohttp

from pawwake.settings import Settings


class HttpClient:
    """The one shared client, reachable before it exists: aiohttp can only create it inside
    the running loop, so what is built with the app holds this and asks for ``session`` once
    ``open_http_client`` has opened it."""

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("the HTTP client opens with the app; it is not open now")
        return self._session

    def open(self, session: aiohttp.ClientSession) -> None:
        self._session = session


def upstream_timeout(settings: Settings) -> aiohttp.ClientTimeout:
    """No total limit (long generations must finish); a dead peer is noticed by the socket read
    timeout instead."""
    return aiohttp.ClientTimeout(total=None,
                                 sock_connect=settings.UPSTREAM_CONNECT_TIMEOUT,
                                 sock_read=settings.UPSTREAM_READ_TIMEOUT)


@asynccontextmanager
async def open_http_client(settings: Settings,
                           use: Callable[[aiohttp.ClientSession], None]) -> AsyncIterator[None]:
    """Open the client (inside the running loop, as aiohttp requires), hand it to ``use``,
    close it after."""
    connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300, enable_cleanup_closed=True)
    session = aiohttp.ClientSession(connector=connector, auto_decompress=False,
                                    timeout=upstream_timeout(settings))
    use(session)
    yield
    await session.close()
