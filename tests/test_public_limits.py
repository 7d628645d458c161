"""What a request without a key can cost: public routes take kilobytes, and no route inflates a
compressed request body (a gzip bomb of 64 KB would expand to 64 MB in memory)."""

from __future__ import annotations

import asyncio
import functools
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from pawwake.dashboard import public_form
from tests.dashboard_support import dashboard_client, login, same_origin
from tests.gateway_support import GATEWAY_KEY, chat_body

MEGABYTE = 1024 * 1024
# Peak resident memory a refused bomb may add to the whole test process. The inflated body
# would be hundreds of MB; what is left is aiohttp's own read buffers.
RSS_ALLOWANCE_MB = 24
FORM = "application/x-www-form-urlencoded"


@functools.lru_cache(maxsize=1)
def gzip_bomb() -> bytes:
    """A gzip stream of 64 MB of one repeated byte: about 64 KB on the wire, twice the
    largest body any route takes (MAX_REQUEST_MB)."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b"a" * MEGABYTE
    parts = [compressor.compress(block) for _ in range(64)]
    parts.append(compressor.flush())
    return b"".join(parts)


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/self/status")


def _reset_peak_rss() -> None:
    """Linux's ``clear_refs`` 5: VmHWM starts again from the current resident size."""
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")


async def peak_rss_growth_mb(action: Callable[[], Awaitable[Any]]) -> float:
    """How far this process's peak resident memory rose above its level before ``action``."""
    _reset_peak_rss()
    before = _status_kb("VmRSS")
    await action()
    return (_status_kb("VmHWM") - before) / 1024


async def in_pieces(data: bytes, size: int = 64 * 1024) -> AsyncIterator[bytes]:
    """A body sent chunked, without Content-Length."""
    for start in range(0, len(data), size):
        yield data[start:start + size]


@pytest.fixture
async def dashboard(make_client: Any) -> Any:
    return await dashboard_client(make_client, JOB_WORKERS=0)


PUBLIC_FORMS = [("/dashboard/login", {"password": "x"}), ("/dashboard/language", {"lang": "en"})]


@pytest.mark.parametrize(("path", "_fields"), PUBLIC_FORMS)
async def test_a_gzip_bomb_on_a_public_form_is_refused_without_inflating(
        dashboard: Any, path: str, _fields: dict[str, str]) -> None:
    statuses: list[int] = []

    async def send() -> None:
        response = await dashboard.post(path, data=gzip_bomb(), headers=same_origin(
            dashboard, **{"Content-Encoding": "gzip", "Content-Type": FORM}),
            allow_redirects=False)
        statuses.append(response.status)
        text = await response.text()
        assert "Content-Encoding" in text or "编码" in text, text[:300]
        # one line, no rendered page: a refusal anyone may ask for in a flood costs nothing
        assert response.content_type == "text/plain" and "\n" not in text.strip()

    growth = await peak_rss_growth_mb(send)
    assert statuses == [415]
    assert growth < RSS_ALLOWANCE_MB, f"peak RSS rose {growth:.0f} MB"


@pytest.mark.parametrize(("path", "fields"), PUBLIC_FORMS)
async def test_public_forms_take_kilobytes(dashboard: Any, path: str,
                                           fields: dict[str, str]) -> None:
    padded = {**fields, "next": "/dashboard/" + "a" * (64 * 1024)}
    response = await dashboard.post(path, data=padded, headers=same_origin(dashboard),
                                    allow_redirects=False)
    assert response.status == 413, (await response.text())[:300]
    # Without Content-Length (chunked) the limit holds as the body is read.
    encoded = "&".join(f"{k}={v}" for k, v in padded.items()).encode()
    response = await dashboard.post(path, data=in_pieces(encoded), headers=same_origin(
        dashboard, **{"Content-Type": FORM}), allow_redirects=False)
    assert response.status == 413, (await response.text())[:300]


async def test_a_public_form_trickled_in_is_cut_off(dashboard: Any,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Slowloris: a body sent a byte at a time does not hold the connection for as long as the
    sender likes (the deadline is shortened here; it is 10 s)."""
    monkeypatch.setattr(public_form, "PUBLIC_FORM_SECONDS", 0.3)

    async def trickle() -> AsyncIterator[bytes]:
        yield b"password="
        await asyncio.sleep(30)  # never finishes within the test
        yield b"x"

    async with asyncio.timeout(10):
        response = await dashboard.post("/dashboard/login", data=trickle(), headers=same_origin(
            dashboard, **{"Content-Type": FORM}), allow_redirects=False)
    assert response.status == 408


async def test_a_multipart_login_is_refused(dashboard: Any) -> None:
    """The public forms are ours and urlencoded: a multipart body (files, many parts) is not
    read at all."""
    response = await dashboard.post(
        "/dashboard/login", data=b"--b\r\n\r\nx\r\n--b--\r\n",
        headers=same_origin(dashboard, **{"Content-Type": "multipart/form-data; boundary=b"}),
        allow_redirects=False)
    assert response.status == 415


async def test_login_and_language_still_work(dashboard: Any) -> None:
    assert (await login(dashboard)).status == 303
    response = await dashboard.post("/dashboard/language", data={"lang": "en",
                                                                  "next": "/dashboard"},
                                    headers=same_origin(dashboard), allow_redirects=False)
    assert response.status == 303


async def test_a_compressed_body_on_a_dashboard_page_is_refused(dashboard: Any) -> None:
    assert (await login(dashboard)).status == 303
    response = await dashboard.post("/dashboard/settings", data=zlib.compress(b"_group=basic"),
                                    headers=same_origin(dashboard, **{
                                        "Content-Encoding": "deflate", "Content-Type": FORM}),
                                    allow_redirects=False)
    assert response.status == 415


PROGRAM_ROUTES = ["/v1/chat/completions", "/v1/messages", "/api/memories",
                  "/api/conversations/turn", "/mcp"]


@pytest.mark.parametrize("path", PROGRAM_ROUTES)
@pytest.mark.parametrize("with_key", [True, False])
async def test_program_routes_refuse_compressed_bodies(make_client: Any, path: str,
                                                       with_key: bool) -> None:
    client = await make_client(GATEWAY_SECRET=GATEWAY_KEY, JOB_WORKERS=0)
    headers = {"Content-Encoding": "gzip", "Content-Type": "application/json"}
    if with_key:
        headers["Authorization"] = f"Bearer {GATEWAY_KEY}"
    statuses: list[int] = []

    async def send() -> None:
        response = await client.post(path, data=gzip_bomb(), headers=headers)
        statuses.append(response.status)
        body = await response.json()
        assert "error" in body
        assert response.headers["Accept-Encoding"] == "identity"

    growth = await peak_rss_growth_mb(send)
    assert statuses == [415]
    assert growth < RSS_ALLOWANCE_MB, f"peak RSS rose {growth:.0f} MB"


async def test_identity_encoding_is_plain(make_client: Any, upstream: Any) -> None:
    client = await make_client(JOB_WORKERS=0)
    response = await client.post("/v1/chat/completions", json=chat_body("identity body"),
                                 headers={"Content-Encoding": "identity"})
    assert response.status == 200, await response.text()
    assert upstream.requests[-1].body["messages"][-1]["content"] == "identity body"
