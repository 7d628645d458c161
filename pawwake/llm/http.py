"""The one shared aiohttp ClientSession for every upstream call."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
from aiohttp import web

from pawwake import keys


def upstream_timeout(settings: object) -> aiohttp.ClientTimeout:
    """No total limit (long generations must finish); a dead peer is noticed by the socket read
    timeout instead."""
    return aiohttp.ClientTimeout(total=None,
                                 sock_connect=settings.UPSTREAM_CONNECT_TIMEOUT,  # type: ignore[index]
                                 sock_read=settings.UPSTREAM_READ_TIMEOUT)  # type: ignore[index]


async def http_client_ctx(app: web.Application) -> AsyncIterator[None]:
    connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300, enable_cleanup_closed=True)
    session = aiohttp.ClientSession(connector=connector, auto_decompress=False,
                                    timeout=upstream_timeout(app[keys.SETTINGS]))
    app[keys.HTTP] = session
    yield
    await session.close()
