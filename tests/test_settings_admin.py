"""Where the provider keys go is an admin's decision: the gateway key every chat client carries
cannot move them (the base URLs, the keys themselves), only a dashboard session or ADMIN_SECRET
can. Every URL setting is a usable http(s) URL and the default model is not empty, however the
value arrives: the API, the dashboard, the environment at start."""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

import pytest
from aiohttp import web

from pawwake.services import services_of
from pawwake.settings import SETTINGS
from tests.dashboard_support import dashboard_client, htmx, login
from tests.gateway_support import GATEWAY_KEY, chat_body
from tests.settings_support import stored_settings
from tests.test_shutdown import ROOT

ADMIN = "admin-secret-for-routing-000001"
CLIENT = {"X-Gateway-Key": GATEWAY_KEY}
AS_ADMIN = {**CLIENT, "X-Admin-Key": ADMIN}
UPSTREAM_KEY = "sk-upstream-test-key-0123456789"
ROUTING = {"API_BASE_URL": "http://attacker.test/v1",
           "RESPONSES_BASE_URL": "http://attacker.test/v1",
           "MESSAGES_BASE_URL": "http://attacker.test/v1",
           "EMBEDDING_BASE_URL": "http://attacker.test/v1",
           "API_KEY": "sk-attackers-own-key-000000",
           "MESSAGES_API_KEY": "sk-attackers-own-key-000000",
           "EMBEDDING_API_KEY": "sk-attackers-own-key-000000"}
NOT_URLS = ["hello world", "ftp://x", "", "http://", "https://user:pass@host.example/v1",
            "//host.example/v1"]


@pytest.fixture
async def attacker(aiohttp_server: Any) -> list[dict[str, str]]:
    """A server that records whatever reaches it (it must get nothing)."""
    seen: list[dict[str, str]] = []

    async def record(request: web.Request) -> web.Response:
        seen.append(dict(request.headers))
        return web.json_response({"error": "gotcha"}, status=500)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", record)
    server = await aiohttp_server(app)
    seen.append({"base": str(server.make_url("/v1"))})
    return seen


@pytest.mark.parametrize("name", sorted(ROUTING))
async def test_the_client_key_cannot_move_the_provider_key(
        make_client: Any, upstream: Any, attacker: list[dict[str, str]], database_url: str,
        name: str) -> None:
    client = await make_client(GATEWAY_SECRET=GATEWAY_KEY, ADMIN_SECRET=ADMIN, JOB_WORKERS=0)
    value = attacker[0]["base"] if name.endswith("_URL") else ROUTING[name]
    response = await client.put("/api/settings", json={name: value}, headers=CLIENT)
    body = await response.json()
    assert response.status == 403, body
    assert body["error"]["code"] == "admin_only"
    assert body["error"]["field"] == name
    assert "X-Admin-Key" in body["error"]["message"]
    assert stored_settings(database_url) == {}
    response = await client.post("/v1/chat/completions", json=chat_body(), headers=CLIENT)
    assert response.status == 200
    assert upstream.requests[-1].headers["Authorization"] == f"Bearer {UPSTREAM_KEY}"
    assert attacker[1:] == []


async def test_the_admin_key_may_and_a_wrong_one_may_not(make_client: Any, upstream: Any,
                                                         database_url: str) -> None:
    client = await make_client(GATEWAY_SECRET=GATEWAY_KEY, ADMIN_SECRET=ADMIN)
    wrong = await client.put("/api/settings", json={"API_BASE_URL": "http://x.test/v1"},
                             headers={**CLIENT, "X-Admin-Key": ADMIN[:-1] + "2"})
    assert wrong.status == 403
    moved = await client.put("/api/settings", json={"API_BASE_URL": upstream.base_url + "/",
                                                    "API_KEY": "sk-new-provider-key-abcdef"},
                             headers=AS_ADMIN)
    assert moved.status == 200, await moved.text()
    assert sorted((await moved.json())["updated"]) == ["API_BASE_URL", "API_KEY"]
    assert services_of(client.app).config.current()["API_KEY"] == "sk-new-provider-key-abcdef"


async def test_without_an_admin_key_only_the_dashboard_moves_them(make_client: Any,
                                                                  upstream: Any) -> None:
    client = await dashboard_client(make_client, GATEWAY_SECRET=GATEWAY_KEY)
    response = await client.put("/api/settings", json={"API_BASE_URL": "http://x.test/v1"},
                                headers={**CLIENT, "X-Admin-Key": ""})
    assert response.status == 403
    assert "dashboard" in (await response.json())["error"]["message"]
    assert (await login(client)).status == 303
    saved = await client.post("/dashboard/settings", headers=htmx(client), data={
        "_group": "basic", "API_BASE_URL": upstream.base_url + "/", "API_KEY": "••••6789"})
    assert saved.status == 200, await saved.text()
    assert services_of(client.app).config.current()["API_BASE_URL"] == upstream.base_url + "/"


async def test_unchanged_routing_values_sent_back_are_no_change(make_client: Any) -> None:
    """A client that PUTs back what GET gave it (the mask, the URL as shown) changes nothing
    and is not refused."""
    client = await make_client(GATEWAY_SECRET=GATEWAY_KEY)
    view = {item["name"]: item["value"]
            for item in (await (await client.get("/api/settings", headers=CLIENT)).json())[
                "settings"]}
    response = await client.put("/api/settings", headers=CLIENT, json={
        "API_BASE_URL": view["API_BASE_URL"], "API_KEY": view["API_KEY"],
        "DEFAULT_MODEL": "vendor/other"})
    assert response.status == 200, await response.text()
    assert (await response.json())["updated"] == ["DEFAULT_MODEL"]


@pytest.mark.parametrize("name", ["API_BASE_URL", "EMBEDDING_BASE_URL", "MESSAGES_BASE_URL",
                                  "RESPONSES_BASE_URL"])
@pytest.mark.parametrize("value", NOT_URLS)
async def test_every_url_setting_takes_only_a_usable_url(make_client: Any, database_url: str,
                                                         name: str, value: str) -> None:
    client = await make_client(GATEWAY_SECRET=GATEWAY_KEY, ADMIN_SECRET=ADMIN)
    response = await client.put("/api/settings", json={name: value}, headers=AS_ADMIN)
    body = await response.json()
    if value == "" and name in ("MESSAGES_BASE_URL", "RESPONSES_BASE_URL"):
        assert response.status == 200, body  # empty: derived from API_BASE_URL, as documented
        return
    assert response.status == 400, body
    assert body["error"]["code"] == "invalid_setting"
    assert body["error"]["field"] == name
    assert name in body["error"]["message"]
    assert stored_settings(database_url) == {}


async def test_the_default_model_is_not_empty(make_client: Any, database_url: str) -> None:
    client = await dashboard_client(make_client)
    response = await client.put("/api/settings", json={"DEFAULT_MODEL": "  "})
    assert response.status == 400
    assert (await response.json())["error"]["field"] == "DEFAULT_MODEL"
    assert (await login(client)).status == 303
    page = await client.post("/dashboard/settings", headers=htmx(client),
                             data={"_group": "basic", "DEFAULT_MODEL": ""})
    assert page.status == 400
    assert stored_settings(database_url) == {}


async def test_the_dashboard_names_a_bad_url(make_client: Any, database_url: str) -> None:
    client = await dashboard_client(make_client)
    assert (await login(client)).status == 303
    response = await client.post("/dashboard/settings", headers=htmx(client), data={
        "_group": "basic", "API_BASE_URL": "ftp://x", "API_KEY": "••••6789"})
    assert response.status == 400
    text = await response.text()
    assert "API_BASE_URL" in text and "http" in text
    assert stored_settings(database_url) == {}


def start_env(**values: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {s.name for s in SETTINGS}}
    env.update({"DATABASE_ENABLED": "false", **values})
    return env


@pytest.mark.parametrize(("values", "named"), [
    ({"API_BASE_URL": "hello world"}, "API_BASE_URL"),
    ({"EMBEDDING_BASE_URL": "ftp://x"}, "EMBEDDING_BASE_URL"),
    ({"DEFAULT_MODEL": ""}, "DEFAULT_MODEL"),
    ({"GATEWAY_SECRET": "same-secret-0123456789", "ADMIN_SECRET": "same-secret-0123456789"},
     "ADMIN_SECRET"),
])
async def test_a_bad_environment_value_stops_the_start(values: dict[str, str],
                                                       named: str) -> None:
    """Refused loudly at start rather than serving chats that all fail: a deploy with a bad
    value fails where its log is read, and a host keeps the previous deploy running."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "pawwake.py", "--port", "1", cwd=ROOT, env=start_env(**values),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    async with asyncio.timeout(60):
        output, _ = await process.communicate()
    text = output.decode(errors="replace")
    assert process.returncode == 2, text
    assert named in text and "Traceback" not in text
