"""Forwarded headers count only when the direct peer is a proxy named in TRUSTED_PROXIES."""

from __future__ import annotations

from typing import Any

import pytest
from bs4 import BeautifulSoup
from multidict import CIMultiDict

from pawwake.dashboard import dashboard_keys as dkeys
from pawwake.dashboard.security import SESSION_COOKIE
from pawwake.proxies import parse_trusted_proxies, resolve_client, setting_to_trust
from pawwake.services import services_of
from tests.dashboard_support import PASSWORD, dashboard_client, logged_in, login, set_cookie

SAVE = {"_group": "basic", "DEFAULT_MODEL": "proxied/model"}
PROXIED = {"Origin": "https://paw.example.org", "X-Forwarded-Proto": "https",
           "X-Forwarded-Host": "paw.example.org"}


def view(peer: str | None, trusted: str, **headers: str) -> Any:
    return resolve_client(peer, CIMultiDict(headers), parse_trusted_proxies(trusted),
                          scheme="http", host="10.0.0.5:8000")


def test_untrusted_peer_headers_are_ignored() -> None:
    seen = view("203.0.113.9", "", **{"X-Forwarded-For": "198.51.100.1",
                                      "X-Forwarded-Proto": "https",
                                      "X-Forwarded-Host": "evil.example"})
    assert (seen.address, seen.scheme, seen.host) == ("203.0.113.9", "http", "10.0.0.5:8000")
    assert seen.forwarded_ignored is True
    assert view("203.0.113.9", "10.0.0.0/8", Forwarded="for=1.2.3.4;proto=https").scheme == \
        "http"
    assert view("203.0.113.9", "").forwarded_ignored is False


def test_trusted_peer_gives_the_client_behind_it() -> None:
    seen = view("10.21.157.68", "10.0.0.0/8", **{"X-Forwarded-For": "99.61.165.29",
                                                  "X-Forwarded-Proto": "https",
                                                  "X-Forwarded-Host": "paw.example.org"})
    assert (seen.address, seen.scheme, seen.host) == ("99.61.165.29", "https",
                                                      "paw.example.org")
    assert seen.forwarded_ignored is False


def test_the_chain_is_walked_from_the_right_past_trusted_hops_only() -> None:
    # A client-made entry on the left never wins over what the trusted proxies appended.
    chain = {"X-Forwarded-For": "6.6.6.6, 99.61.165.29, 104.22.17.40"}
    assert view("10.1.1.1", "10.0.0.0/8", **chain).address == "104.22.17.40"
    assert view("10.1.1.1", "10.0.0.0/8, 104.16.0.0/12", **chain).address == "99.61.165.29"
    # Appended scheme values: the trusted proxy's own (rightmost) one counts.
    spoofed = view("10.1.1.1", "10.0.0.0/8", **{"X-Forwarded-Proto": "http, https"})
    assert spoofed.scheme == "https"
    garbage = view("10.1.1.1", "10.0.0.0/8", **{"X-Forwarded-Proto": "gopher",
                                                "X-Forwarded-Host": "bad host/x"})
    assert (garbage.scheme, garbage.host) == ("http", "10.0.0.5:8000")


def test_forwarded_header_from_a_trusted_peer() -> None:
    seen = view("127.0.0.1", "127.0.0.1", Forwarded=(
        'for="[2001:db8:cafe::17]:4711";proto=https;host=paw.example.org, for=127.0.0.1'))
    assert (seen.address, seen.scheme, seen.host) == ("2001:db8:cafe::17", "https",
                                                      "paw.example.org")


def test_trusted_proxies_setting_parses_addresses_networks_and_private() -> None:
    proxies = parse_trusted_proxies(" 127.0.0.1, 10.0.0.0/8 ,::1, not-an-ip, 300.1.1.1")
    assert proxies.trusts("127.0.0.1") and proxies.trusts("10.200.3.4")
    assert proxies.trusts("::1")
    assert not proxies.trusts("192.168.1.1") and not proxies.trusts(None)
    assert not proxies.trusts("garbage")
    private = parse_trusted_proxies("private")
    for address in ("10.1.2.3", "172.20.0.1", "192.168.0.9", "127.0.0.1", "fdaa::3"):
        assert private.trusts(address), address
    assert not private.trusts("8.8.8.8")
    assert not parse_trusted_proxies("").trusts("127.0.0.1")


async def test_origin_check_ignores_forwarded_headers_from_an_untrusted_peer(
        make_client: Any, caplog: pytest.LogCaptureFixture) -> None:
    client = await logged_in(make_client)
    response = await client.post("/dashboard/settings", data=SAVE, headers=PROXIED,
                                 allow_redirects=False)
    assert response.status == 403
    assert "not in TRUSTED_PROXIES" in caplog.text  # the log says what to set
    assert services_of(client.app).config.current()["DEFAULT_MODEL"] == "test/model-a"
    forwarded = await client.post("/dashboard/settings", data=SAVE, allow_redirects=False,
                                  headers={"Origin": "https://paw.example.org",
                                           "Forwarded": "proto=https;host=paw.example.org"})
    assert forwarded.status == 403


@pytest.mark.parametrize("trusted", ["127.0.0.1", "127.0.0.0/8", "private"])
async def test_origin_check_honours_a_trusted_proxy(make_client: Any, trusted: str) -> None:
    client = await logged_in(make_client, TRUSTED_PROXIES=trusted)
    response = await client.post("/dashboard/settings", data=SAVE, headers=PROXIED,
                                 allow_redirects=False)
    assert response.status == 303
    assert services_of(client.app).config.current()["DEFAULT_MODEL"] == "proxied/model"
    forwarded = await client.post(
        "/dashboard/settings", data={**SAVE, "DEFAULT_MODEL": "via/forwarded"},
        headers={"Origin": "https://paw.example.org",
                 "Forwarded": "for=198.51.100.3;proto=https;host=paw.example.org"},
        allow_redirects=False)
    assert forwarded.status == 303
    assert services_of(client.app).config.current()["DEFAULT_MODEL"] == "via/forwarded"


async def test_secure_cookie_flag_follows_only_a_trusted_proxy(make_client: Any) -> None:
    untrusted = await dashboard_client(make_client)
    https_origin = "https://" + untrusted.make_url("/").authority
    response = await login(untrusted, **{"X-Forwarded-Proto": "https"})
    assert response.status == 303  # same origin over plain http: the header is ignored
    assert not set_cookie(response)[SESSION_COOKIE]["secure"]
    spoofed = await login(untrusted, **{"X-Forwarded-Proto": "https", "Origin": https_origin})
    assert spoofed.status == 403

    trusted = await dashboard_client(make_client, TRUSTED_PROXIES="127.0.0.1")
    behind_tls = await login(trusted, **{"X-Forwarded-Proto": "https",
                                         "Origin": "https://" + trusted.make_url("/").authority})
    assert behind_tls.status == 303
    assert set_cookie(behind_tls)[SESSION_COOKIE]["secure"] is True


async def test_a_rotating_forwarded_for_does_not_escape_the_lockout(make_client: Any) -> None:
    client = await dashboard_client(make_client)
    throttle = client.app[dkeys.APP][dkeys.LOGIN_THROTTLE]
    throttle.delay_seconds = 0
    for n in range(throttle.max_failures):
        response = await login(client, "guess", **{"X-Forwarded-For": f"198.51.100.{n}"})
        assert response.status == 401
    locked = await login(client, PASSWORD, **{"X-Forwarded-For": "198.51.100.200"})
    assert locked.status == 429


@pytest.mark.parametrize(("lang", "words"), [("zh", "请在部署平台的环境变量里设置"),
                                              ("en", "Set the environment variable")])
async def test_a_login_refused_behind_an_untrusted_proxy_says_what_to_set(
        make_client: Any, lang: str, words: str) -> None:
    client = await dashboard_client(make_client)
    client.session.cookie_jar.update_cookies({"pawwake_lang": lang})
    # What Render's proxy sends: TLS ended there, the browser's origin is https.
    behind_tls = await login(client, **{"X-Forwarded-Proto": "https",
                                        "Origin": "https://" + client.make_url("/").authority})
    assert behind_tls.status == 403
    page = BeautifulSoup(await behind_tls.text(), "html.parser").get_text(" ", strip=True)
    assert f"{words} TRUSTED_PROXIES=private" in page  # the peer, 127.0.0.1, is private
    # A cross-origin post without forwarded headers is refused as before, without the hint.
    cross = await login(client, Origin="https://elsewhere.example")
    assert cross.status == 403
    assert "TRUSTED_PROXIES" not in await cross.text()


def test_the_setting_to_trust_a_peer() -> None:
    assert setting_to_trust("10.201.4.7") == "TRUSTED_PROXIES=private"
    assert setting_to_trust("203.0.113.9") == "TRUSTED_PROXIES=203.0.113.9"
    assert setting_to_trust("[2001:db8::1]:443") == "TRUSTED_PROXIES=2001:db8::1"
