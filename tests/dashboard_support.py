"""Helpers for dashboard tests: a configured client, same-origin headers, reading the cookie."""

from __future__ import annotations

import json
from collections.abc import Callable
from http.cookies import SimpleCookie
from typing import Any

from aiohttp import ClientResponse
from aiohttp.test_utils import TestClient
from bs4 import BeautifulSoup

from pawwake.dashboard.security import SESSION_COOKIE, session_fernet

PASSWORD = "paw-prints-in-the-snow"
SECRET = "test-session-secret-0123456789-abcdefghij"


async def dashboard_client(make_client: Callable[..., Any], **overrides: Any) -> TestClient:
    values = {"DASHBOARD_PASSWORD": PASSWORD, "SESSION_SECRET": SECRET, **overrides}
    return await make_client(**values)


async def logged_in(make_client: Callable[..., Any], **overrides: Any) -> TestClient:
    """A dashboard client after a successful login."""
    client = await dashboard_client(make_client, **overrides)
    assert (await login(client)).status == 303
    return client


def soup(text: str) -> BeautifulSoup:
    return BeautifulSoup(text, "html.parser")


def own_origin(client: TestClient) -> str:
    return str(client.make_url("/")).rstrip("/")


def same_origin(client: TestClient, **extra: str) -> dict[str, str]:
    return {"Origin": own_origin(client), **extra}


def htmx(client: TestClient, **extra: str) -> dict[str, str]:
    return same_origin(client, **{"HX-Request": "true", **extra})


async def login(client: TestClient, password: str = PASSWORD, **headers: str) -> ClientResponse:
    return await client.post("/dashboard/login", data={"password": password},
                             headers=same_origin(client, **headers), allow_redirects=False)


def set_cookie(response: ClientResponse, name: str = SESSION_COOKIE) -> SimpleCookie:
    """The response's Set-Cookie header for ``name``, parsed (flags included)."""
    for header in response.headers.getall("Set-Cookie", []):
        cookie: SimpleCookie = SimpleCookie()
        cookie.load(header)
        if name in cookie:
            return cookie
    raise AssertionError(f"no Set-Cookie for {name}: {response.headers.getall('Set-Cookie', [])}")


def session_payload(cookie_value: str, secret: str = SECRET) -> dict[str, Any]:
    """Decrypt a session cookie the way the server does."""
    return json.loads(session_fernet(secret).decrypt(cookie_value.encode()))["session"]
