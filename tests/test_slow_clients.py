"""Slow clients (pawwake/slow_clients.py): headers and bodies that trickle in get a 408 and the
connection closed; the gateway's own site and app, over a real socket."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from pawwake.app import create_app
from pawwake.settings import Settings
from pawwake.slow_clients import GuardedSite
from tests.conditions import WAIT_SECONDS

STATIC = Path(__file__).resolve().parent.parent / "static"

HEADER_SECONDS = 1.0
TRICKLE_SECONDS = 0.2  # between two bytes: well inside any deadline, so only the total counts


@asynccontextmanager
async def gateway(make_settings: Callable[..., Settings], **overrides: Any
                  ) -> AsyncIterator[int]:
    """The real app behind the production site; yields its port."""
    runner = web.AppRunner(create_app(make_settings(**overrides)), handler_cancellation=True)
    await runner.setup()
    site = GuardedSite(runner, "127.0.0.1", 0, header_seconds=HEADER_SECONDS)
    try:
        await site.start()
        yield site.port
    finally:
        await runner.cleanup()


async def trickle(writer: asyncio.StreamWriter, reader: asyncio.StreamReader, data: bytes
                  ) -> bytes:
    """Send ``data`` a byte at a time until the server answers; returns all it sent back
    (up to its close). Fails if it never answers."""
    answer = asyncio.ensure_future(reader.read())
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_SECONDS
    for byte in data:
        if answer.done():
            break
        writer.write(bytes([byte]))
        await asyncio.wait([answer], timeout=TRICKLE_SECONDS)
    else:
        await asyncio.wait([answer], timeout=deadline - loop.time())
    assert answer.done(), "the server never answered"
    return answer.result()


def status_and_body(raw: bytes) -> tuple[int, dict[str, Any]]:
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


ENDLESS_HEADERS = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"X-Slow: " + b"a" * 10_000


async def test_headers_that_trickle_get_a_408_and_the_connection_closed(
        make_settings: Callable[..., Settings]) -> None:
    async with gateway(make_settings) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            raw = await trickle(writer, reader, ENDLESS_HEADERS)
        finally:
            writer.close()
    status, body = status_and_body(raw)
    assert status == 408
    assert body["error"]["code"] == "request_timeout"
    assert "REQUEST_HEADER_TIMEOUT" in body["error"]["message"]
    assert reader.at_eof()  # closed after the answer


async def test_an_idle_keep_alive_connection_is_not_a_slow_one_and_each_request_is_timed(
        make_settings: Callable[..., Settings]) -> None:
    """Two requests on one connection, an idle gap longer than the header deadline between:
    both answered; then a third whose headers trickle gets its 408 (the clock is per request)."""
    async with gateway(make_settings) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            for _ in range(2):
                writer.write(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                head = await reader.readuntil(b"\r\n\r\n")
                assert head.startswith(b"HTTP/1.1 200"), head
                length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                                  if line.lower().startswith(b"content-length")))
                await reader.readexactly(length)
                await asyncio.sleep(HEADER_SECONDS * 1.5)  # idle: not counted
            raw = await trickle(writer, reader, ENDLESS_HEADERS)
        finally:
            writer.close()
    assert status_and_body(raw)[0] == 408


async def test_a_body_that_trickles_gets_a_408_in_the_routes_error_shape(
        make_settings: Callable[..., Settings]) -> None:
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * 500}]})
    request = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
               b"Content-Type: application/json\r\n"
               + f"Content-Length: {len(body)}\r\n\r\n".encode())
    async with gateway(make_settings, REQUEST_BODY_TIMEOUT=1) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(request)  # the headers at once, then the body a byte at a time
            raw = await trickle(writer, reader, body.encode())
        finally:
            writer.close()
    status, answer = status_and_body(raw)
    assert status == 408
    assert answer["error"]["code"] == "request_timeout"  # OpenAI's envelope on /v1
    assert answer["error"]["type"] == "invalid_request_error"
    assert "REQUEST_BODY_TIMEOUT" in answer["error"]["message"]
    assert reader.at_eof()


async def test_a_static_file_and_a_chat_pass_through_the_guard(
        make_settings: Callable[..., Settings]) -> None:
    """Ordinary traffic on the production site: a file sent with sendfile, keep-alive reuse
    and a streamed chat (the guard sits between every byte and aiohttp's protocol)."""
    async with gateway(make_settings) as port, aiohttp.ClientSession() as session:
        base = f"http://127.0.0.1:{port}"
        for _ in range(2):
            async with session.get(f"{base}/static/vendor/htmx.min.js") as response:
                assert response.status == 200
                assert len(await response.read()) == (STATIC / "vendor/htmx.min.js").stat().st_size
        body = {"model": "test/model-a", "stream": True,
                "messages": [{"role": "user", "content": "hello"}]}
        async with session.post(f"{base}/v1/chat/completions", json=body) as response:
            assert response.status == 200
            assert b"data: [DONE]" in await response.read()


def _answer_then_more_bytes(port: int, opening: bytes, quiet: float) -> tuple[bytes, str]:
    """Send ``opening``, stay silent past the deadline and read the answer to its end; then go
    on sending for a moment, as a client still uploading does. Returns the answer and what
    became of those bytes. A plain blocking socket: the kernel's view, no client library's."""
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT_SECONDS) as client:
        client.sendall(opening)
        time.sleep(quiet)
        answer = b""
        while chunk := client.recv(65536):
            answer += chunk
        try:
            for _ in range(30):
                client.sendall(b"x")
                time.sleep(0.01)
        except OSError as exc:
            return answer, type(exc).__name__
        return answer, "taken"


async def test_a_refused_connection_lingers_so_the_408_is_not_lost_to_a_reset(
        make_settings: Callable[..., Settings]) -> None:
    """After a 408 the server half-closes and reads on for a moment. Closed at once, a client
    byte in flight at that moment makes the kernel reset the connection, and a client that has
    not yet read the 408 loses it (a client still trickling always has one in flight
    sooner or later). Here the bytes that follow the answer show whether the server still
    reads."""
    body_head = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                 b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
    async with gateway(make_settings, REQUEST_BODY_TIMEOUT=1) as port:
        body = await asyncio.to_thread(_answer_then_more_bytes, port, body_head, 1.3)
        header = await asyncio.to_thread(_answer_then_more_bytes, port, ENDLESS_HEADERS[:40],
                                         HEADER_SECONDS + 0.3)
    for answer, late_bytes in (body, header):
        assert status_and_body(answer)[1]["error"]["code"] == "request_timeout"
        assert late_bytes == "taken"
