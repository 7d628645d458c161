"""Helpers for the turn durability tests: a production-style server (no handler
cancellation), raw stream reads that stop at a marker, and stored-row queries."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
from aiohttp import web

from pawwake.db.pool import cursor, fetch_all
from pawwake.services import services_of

FINISH = b'"finish_reason": "stop"'
DONE = b"[DONE]"


@asynccontextmanager
async def production_server(app: web.Application) -> AsyncIterator[str]:
    """Serve ``app`` as ``run_app`` does (handlers are not cancelled when a client goes);
    yields the base URL."""
    runner = web.AppRunner(app)
    await runner.setup()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    site = web.SockSite(runner, sock)
    await site.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def read_until(response: aiohttp.ClientResponse, marker: bytes) -> bytes:
    """Read a stream until ``marker`` arrived (or the stream ended)."""
    seen = b""
    while marker not in seen:
        chunk = await response.content.readany()
        if not chunk:
            break
        seen += chunk
    return seen


async def stop_at(session: aiohttp.ClientSession, url: str, body: dict[str, Any],
                  marker: bytes, headers: dict[str, str] | None = None) -> bytes:
    """Post a chat, read until ``marker``, then hang up (as a one-shot script does)."""
    response = await session.post(url + "/v1/chat/completions", json=body,
                                  headers=headers or {})
    try:
        return await read_until(response, marker)
    finally:
        response.close()


async def turn_rows(app: web.Application, session_id: str | None = None
                    ) -> list[dict[str, Any]]:
    sql = ("SELECT id, session_id, role, content, metadata, turn_id FROM conversations"
           " WHERE deleted_at IS NULL")
    params: tuple[Any, ...] = ()
    if session_id is not None:
        sql += " AND session_id = %s"
        params = (session_id,)
    async with cursor(services_of(app).database.pool) as cur:
        return await fetch_all(cur, sql + " ORDER BY created_at, id", params)


async def usage_count(app: web.Application) -> int:
    async with cursor(services_of(app).database.pool) as cur:
        rows = await fetch_all(cur, "SELECT count(*) AS n FROM token_usage")
    return rows[0]["n"]
