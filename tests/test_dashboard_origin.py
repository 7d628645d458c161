"""Every dashboard write must come from the dashboard's own origin, also behind a proxy."""

from __future__ import annotations

from typing import Any

import pytest

from pawwake.services import services_of
from tests.dashboard_support import PASSWORD, dashboard_client, logged_in, own_origin

SAVE = {"_group": "basic", "DEFAULT_MODEL": "cross/origin-model"}


async def test_cross_origin_write_is_refused(make_client: Any) -> None:
    client = await logged_in(make_client)
    response = await client.post("/dashboard/settings", data=SAVE,
                                 headers={"Origin": "https://evil.example"},
                                 allow_redirects=False)
    assert response.status == 403
    assert "Invalid request origin." in await response.text()
    assert services_of(client.app).config.current()["DEFAULT_MODEL"] == "test/model-a"


@pytest.mark.parametrize("headers", [
    {},  # neither Origin nor Referer
    {"Origin": "null"},
    {"Referer": "https://evil.example/dashboard/settings"},
])
async def test_write_without_a_matching_origin_is_refused(make_client: Any,
                                                          headers: dict[str, str]) -> None:
    client = await logged_in(make_client)
    response = await client.post("/dashboard/settings", data=SAVE, headers=headers,
                                 allow_redirects=False)
    assert response.status == 403


async def test_login_itself_needs_the_same_origin(make_client: Any) -> None:
    client = await dashboard_client(make_client)
    response = await client.post("/dashboard/login", data={"password": PASSWORD},
                                 headers={"Origin": "http://attacker.test"},
                                 allow_redirects=False)
    assert response.status == 403
    assert "Set-Cookie" not in response.headers


async def test_same_origin_write_is_accepted(make_client: Any) -> None:
    client = await logged_in(make_client)
    response = await client.post("/dashboard/settings", data=SAVE,
                                 headers={"Origin": own_origin(client)}, allow_redirects=False)
    assert response.status == 303
    assert services_of(client.app).config.current()["DEFAULT_MODEL"] == "cross/origin-model"


async def test_referer_counts_when_origin_is_absent(make_client: Any) -> None:
    client = await logged_in(make_client)
    response = await client.post(
        "/dashboard/settings", data=SAVE,
        headers={"Referer": own_origin(client) + "/dashboard/settings?x=1"},
        allow_redirects=False)
    assert response.status == 303


async def test_forwarded_proto_and_host_are_honoured_from_a_trusted_proxy(
        make_client: Any) -> None:
    client = await logged_in(make_client, TRUSTED_PROXIES="127.0.0.1")
    authority = client.make_url("/").authority
    # Behind a TLS proxy the browser's origin is https while the app sees plain http.
    refused = await client.post("/dashboard/settings", data=SAVE,
                                headers={"Origin": f"https://{authority}"},
                                allow_redirects=False)
    assert refused.status == 403
    accepted = await client.post(
        "/dashboard/settings", data=SAVE,
        headers={"Origin": f"https://{authority}", "X-Forwarded-Proto": "https"},
        allow_redirects=False)
    assert accepted.status == 303
    proxied = await client.post(
        "/dashboard/settings", data=SAVE,
        headers={"Origin": "https://paw.example.org", "X-Forwarded-Proto": "https",
                 "X-Forwarded-Host": "paw.example.org"},
        allow_redirects=False)
    assert proxied.status == 303
    default_port = await client.post(
        "/dashboard/settings", data=SAVE,
        headers={"Origin": "https://paw.example.org", "X-Forwarded-Proto": "https",
                 "X-Forwarded-Host": "paw.example.org:443"},
        allow_redirects=False)
    assert default_port.status == 303


async def test_htmx_origin_error_is_a_fragment_for_the_flash_area(make_client: Any) -> None:
    client = await logged_in(make_client)
    response = await client.post("/dashboard/settings", data=SAVE,
                                 headers={"Origin": "https://evil.example",
                                          "HX-Request": "true"})
    assert response.status == 403
    assert response.headers["HX-Retarget"] == "#flash"
    text = await response.text()
    assert "Invalid request origin." in text and "<html" not in text
