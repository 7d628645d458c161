"""The settings page tests a provider before it is saved, and the status page says when the
settings in force cannot work, before a chat fails on them."""

from __future__ import annotations

from typing import Any

from bs4 import BeautifulSoup

from tests.dashboard_support import dashboard_client, htmx, login
from tests.settings_support import stored_settings

UPSTREAM_KEY = "sk-upstream-test-key-0123456789"
TYPED_KEY = "sk-typed-but-not-saved-abcdef"


async def signed_in(make_client: Any, **overrides: Any) -> Any:
    client = await dashboard_client(make_client, JOB_WORKERS=0, **overrides)
    assert (await login(client)).status == 303
    return client


def provider(upstream: Any) -> str:
    """The fake provider's OpenRouter-shaped API: its model list records the key it got."""
    return str(upstream.server.make_url("/openrouter/api/v1"))


def result(text: str) -> Any:
    return BeautifulSoup(text, "html.parser").select_one("[data-probe-result]")


async def test_the_page_offers_a_connection_test(make_client: Any) -> None:
    client = await signed_in(make_client)
    page = BeautifulSoup(await (await client.get("/dashboard/settings")).text(), "html.parser")
    for group in ("basic", "vector"):
        button = page.select_one(f"#group-{group} [data-test-connection]")
        assert button is not None and button["hx-post"] == "/dashboard/settings/test-connection"


async def test_a_typed_provider_is_tested_and_not_saved(make_client: Any, upstream: Any,
                                                        database_url: str) -> None:
    client = await signed_in(make_client)
    response = await client.post("/dashboard/settings/test-connection", headers=htmx(client),
                                 data={"_group": "basic", "API_BASE_URL": provider(upstream),
                                       "API_KEY": TYPED_KEY, "DEFAULT_MODEL": "openai/gpt-5"})
    text = await response.text()
    assert response.status == 200, text
    found = result(text)
    assert found.select_one('[data-result="ok"]') is not None, text
    assert "127.0.0.1" in found.get_text() and "2" in found.get_text()
    assert "openai/gpt-5" in found.get_text()
    assert TYPED_KEY not in text and UPSTREAM_KEY not in text
    assert upstream.requests[-1].path == "/openrouter/api/v1/models"
    assert upstream.requests[-1].headers["Authorization"] == f"Bearer {TYPED_KEY}"
    assert stored_settings(database_url) == {}


async def test_a_masked_key_tests_the_stored_one(make_client: Any, upstream: Any) -> None:
    client = await signed_in(make_client)
    response = await client.post("/dashboard/settings/test-connection", headers=htmx(client),
                                 data={"_group": "basic", "API_BASE_URL": provider(upstream),
                                       "API_KEY": "••••6789"})
    assert response.status == 200
    assert upstream.requests[-1].headers["Authorization"] == f"Bearer {UPSTREAM_KEY}"


async def test_a_refusing_provider_and_a_bad_url_are_said(make_client: Any, upstream: Any,
                                                         database_url: str) -> None:
    client = await signed_in(make_client)
    upstream.models_status = 401
    response = await client.post("/dashboard/settings/test-connection", headers=htmx(client),
                                 data={"_group": "basic", "API_BASE_URL": upstream.base_url,
                                       "API_KEY": TYPED_KEY})
    text = await response.text()
    assert result(text).select_one('[data-result="error"]') is not None
    assert "401" in text and TYPED_KEY not in text
    asked = len(upstream.requests)
    response = await client.post("/dashboard/settings/test-connection", headers=htmx(client),
                                 data={"_group": "basic", "API_BASE_URL": "ftp://x",
                                       "API_KEY": TYPED_KEY})
    assert response.status == 400
    assert "API_BASE_URL" in await response.text()
    assert len(upstream.requests) == asked
    assert stored_settings(database_url) == {}


async def test_the_status_page_says_when_the_configuration_cannot_work(
        make_client: Any) -> None:
    client = await signed_in(make_client, API_KEY="", EMBEDDING_PROVIDER="api",
                             EMBEDDING_API_KEY="",
                             API_BASE_URL="https://openrouter.ai/api/v1")
    page = BeautifulSoup(await (await client.get("/dashboard")).text(), "html.parser")
    line = page.select_one('[data-health="configuration"]')
    assert line["data-state"] == "error"
    named = {item["data-config-problem"] for item in line.select("[data-config-problem]")}
    assert named == {"API_KEY", "EMBEDDING_API_KEY"}


async def test_a_working_configuration_is_ok(make_client: Any) -> None:
    client = await signed_in(make_client)
    page = BeautifulSoup(await (await client.get("/dashboard")).text(), "html.parser")
    assert page.select_one('[data-health="configuration"]')["data-state"] == "ok"
