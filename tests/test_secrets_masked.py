"""Secrets never surface: passwords only as set / not set, provider keys at most by their tail."""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlsplit

import pytest
from bs4 import BeautifulSoup

from pawwake.services import services_of
from pawwake.settings import BY_NAME, SETTINGS
from pawwake.settings.secrets import TAIL_SECRETS, mask_secret, secret_display, secret_form_value
from tests.dashboard_support import dashboard_client, htmx
from tests.dashboard_support import login as login_with
from tests.settings_support import by_name, stored_settings

UPSTREAM_KEY = "sk-Zq8Wv3Kt6Yp1Rm4Hx7Lb2N-6789"
GATEWAY = "Gw3Kp9-Xq7Lz2-Rv5Nt8-Hb4Mc6"
PASSWORD = "Pw7#qZ-Lk2v-Rt9x"  # distinctive, so that no run of it is ordinary page text
SECRET = "Sx4Qm8Kw2Zr6Tn1Vb5Hj9Pd3Lf7Gc0Yu"
SHORT_KEY = "emb-k-0042"  # under 12 characters: not even its tail may show
KEYED = {"X-Gateway-Key": GATEWAY}
PRESENCE_ONLY = ("DASHBOARD_PASSWORD", "SESSION_SECRET", "GATEWAY_SECRET", "DATABASE_URL")


def pieces(secret: str, size: int = 5) -> set[str]:
    """Every run of ``size`` characters of a secret: none of them may appear anywhere."""
    return {secret[i:i + size] for i in range(len(secret) - size + 1)}


def assert_nothing_of(text: str, *secrets: str) -> None:
    for secret in secrets:
        leaked = sorted(p for p in pieces(secret) if p in text)
        assert not leaked, f"parts of a secret are shown: {leaked}"


async def secret_client(make_client: Any, **overrides: Any) -> Any:
    return await dashboard_client(make_client, GATEWAY_SECRET=GATEWAY, DASHBOARD_PASSWORD=PASSWORD,
                                  API_KEY=UPSTREAM_KEY,
                                  SESSION_SECRET=SECRET, EMBEDDING_API_KEY=SHORT_KEY, **overrides)


async def login(client: Any, password: str = PASSWORD) -> Any:
    return await login_with(client, password)


def database_name(database_url: str) -> str:
    return urlsplit(database_url).path.lstrip("/")


async def test_api_shows_passwords_as_set_and_keys_by_their_last_four(
        make_client: Any, database_url: str) -> None:
    client = await secret_client(make_client)
    response = await client.get("/api/settings", headers=KEYED)
    assert response.status == 200
    text = await response.text()
    assert_nothing_of(text, PASSWORD, SECRET, GATEWAY, UPSTREAM_KEY[:-4], SHORT_KEY,
                      database_name(database_url))
    settings = by_name(await response.json())
    for name in PRESENCE_ONLY:
        assert settings[name]["value"] is None, name
        assert settings[name]["is_set"] is True, name
        assert settings[name]["secret"] is True, name
    assert settings["API_KEY"]["value"] == "••••6789"
    assert settings["API_KEY"]["is_set"] is True
    assert settings["EMBEDDING_API_KEY"]["value"] == "••••"
    assert settings["EMBEDDING_API_KEY"]["is_set"] is True


async def test_unset_secrets_say_so(make_client: Any) -> None:
    client = await make_client(API_KEY="", DATABASE_URL="", DATABASE_ENABLED=False)
    settings = by_name(await (await client.get("/api/settings")).json())
    assert settings["API_KEY"] == {**settings["API_KEY"], "value": "", "is_set": False}
    for name in ("DASHBOARD_PASSWORD", "SESSION_SECRET", "GATEWAY_SECRET", "DATABASE_URL"):
        assert (settings[name]["value"], settings[name]["is_set"]) == (None, False), name


async def test_settings_page_shows_no_part_of_any_secret(make_client: Any,
                                                        database_url: str) -> None:
    client = await secret_client(make_client)
    assert (await login(client)).status == 303
    text = await (await client.get("/dashboard/settings")).text()
    assert_nothing_of(text, PASSWORD, SECRET, GATEWAY, UPSTREAM_KEY[:-4], SHORT_KEY,
                      database_name(database_url))
    page = BeautifulSoup(text, "html.parser")
    for name in PRESENCE_ONLY:
        row = page.select_one(f'[data-setting="{name}"]')
        assert row.select_one("input, select, textarea") is None, name
        assert row.select_one("output").get_text(strip=True) == "已设置", name
    key = page.select_one('[data-setting="API_KEY"] input[type=password]')
    assert key["value"] == "••••6789"
    assert "••••6789" in page.select_one('[data-setting="API_KEY"] .hint').get_text()
    short = page.select_one('[data-setting="EMBEDDING_API_KEY"] input[type=password]')
    assert short["value"] == "••••"
    # Every attribute of every element, not only the visible text.
    for element in page.find_all(True):
        assert_nothing_of(" ".join(str(v) for v in element.attrs.values()), PASSWORD, GATEWAY,
                          UPSTREAM_KEY[:-4], SHORT_KEY)


async def test_status_page_and_health_show_no_secret(make_client: Any, database_url: str
                                                     ) -> None:
    client = await secret_client(make_client)
    assert (await login(client)).status == 303
    for path in ("/dashboard", "/dashboard/settings?saved=basic"):
        assert_nothing_of(await (await client.get(path)).text(), PASSWORD, SECRET, GATEWAY,
                          UPSTREAM_KEY[:-4], database_name(database_url))
    assert_nothing_of(await (await client.get("/")).text(), PASSWORD, SECRET, GATEWAY,
                      UPSTREAM_KEY[:-4], database_name(database_url))


async def test_mask_sent_back_keeps_the_key_and_other_masks_are_refused(
        make_client: Any, database_url: str) -> None:
    client = await make_client(API_KEY=UPSTREAM_KEY)
    masked = by_name(await (await client.get("/api/settings")).json())["API_KEY"]["value"]
    response = await client.put("/api/settings", json={"API_KEY": masked,
                                                       "DEFAULT_MODEL": "kept/secret"})
    assert response.status == 200
    assert (await response.json())["updated"] == ["DEFAULT_MODEL"]
    assert services_of(client.app).config.current()["API_KEY"] == UPSTREAM_KEY
    for wrong in ("••••0000", "sk-up****6789", "••••"):
        refused = await client.put("/api/settings", json={"API_KEY": wrong})
        assert refused.status == 400, wrong
        assert "masked" in (await refused.json())["error"]["message"]
    assert services_of(client.app).config.current()["API_KEY"] == UPSTREAM_KEY
    assert stored_settings(database_url) == {"DEFAULT_MODEL": "kept/secret"}


async def test_short_key_mask_sent_back_keeps_it(make_client: Any) -> None:
    client = await make_client(API_KEY=SHORT_KEY)
    response = await client.put("/api/settings", json={"API_KEY": "••••"})
    assert response.status == 200
    assert (await response.json())["updated"] == []
    assert services_of(client.app).config.current()["API_KEY"] == SHORT_KEY


async def test_dashboard_form_keeps_a_key_left_masked(make_client: Any,
                                                      database_url: str) -> None:
    client = await secret_client(make_client)
    assert (await login(client)).status == 303
    config = services_of(client.app).config
    form = {"_group": "vector", "EMBEDDING_API_KEY": "••••", "EMBEDDING_MODEL": "e/model"}
    response = await client.post("/dashboard/settings", data=form, headers=htmx(client))
    assert response.status == 200
    assert config.current()["EMBEDDING_API_KEY"] == SHORT_KEY
    assert stored_settings(database_url) == {"EMBEDDING_MODEL": "e/model"}


@pytest.mark.parametrize("name", ["DASHBOARD_PASSWORD", "SESSION_SECRET", "GATEWAY_SECRET",
                                  "DATABASE_URL"])
async def test_api_refuses_restart_only_secrets(make_client: Any, database_url: str,
                                                name: str) -> None:
    client = await secret_client(make_client)
    before = services_of(client.app).config.current()[name]
    for value in ("a-brand-new-value-for-this-secret-0123456789", before):
        response = await client.put("/api/settings", json={name: value}, headers=KEYED)
        assert response.status == 400
        error = (await response.json())["error"]
        assert error["code"] == "invalid_setting"
        assert name in error["message"] and "environment" in error["message"]
        assert_nothing_of(await response.text(), value)
    assert services_of(client.app).config.current()[name] == before
    assert stored_settings(database_url) == {}


@pytest.mark.parametrize("name", ["GATEWAY_SECRET", "SESSION_SECRET", "DASHBOARD_PASSWORD"])
async def test_dashboard_refuses_restart_only_secrets_even_when_guessed_right(
        make_client: Any, database_url: str, name: str) -> None:
    """A right guess must not answer differently from a wrong one (no oracle)."""
    client = await secret_client(make_client)
    assert (await login(client)).status == 303
    current = services_of(client.app).config.current()[name]
    for guess in (current, "Wg5Tz1Qv8Ns4Jk7Xp2Cm9"):
        response = await client.post("/dashboard/settings", headers=htmx(client),
                                     data={"_group": "basic", name: guess})
        assert response.status == 400, guess
        text = await response.text()
        assert name in text and "只能在环境变量里修改" in text  # the page's language
        assert_nothing_of(text, guess)
    assert stored_settings(database_url) == {}


async def test_a_typed_key_is_not_echoed_back_when_the_form_has_an_error(
        make_client: Any) -> None:
    client = await secret_client(make_client)
    assert (await login(client)).status == 303
    typed = "sk-freshly-typed-provider-key-777"
    response = await client.post("/dashboard/settings", headers=htmx(client), data={
        "_group": "basic", "API_KEY": typed, "PORT": "1"})
    assert response.status == 400
    text = await response.text()
    assert_nothing_of(text, typed)
    assert services_of(client.app).config.current()["API_KEY"] == UPSTREAM_KEY


async def test_logs_carry_no_secret(make_client: Any, caplog: pytest.LogCaptureFixture
                                    ) -> None:
    caplog.set_level(logging.DEBUG)
    client = await secret_client(make_client, ADMIN_SECRET="admin-secret-for-routing-000001")
    assert (await login(client, "wrong-password-attempt-1")).status == 401
    assert (await login(client)).status == 303
    saved = await client.put("/api/settings", json={"API_KEY": "sk-new-provider-key-abcdef"},
                             headers={**KEYED, "X-Admin-Key": "admin-secret-for-routing-000001"})
    assert saved.status == 200
    await client.put("/api/settings", json={"GATEWAY_SECRET": "x" * 40}, headers=KEYED)
    await client.put("/api/settings", json={"API_KEY": "••••9999"}, headers=KEYED)
    text = "\n".join(record.getMessage() for record in caplog.records)
    assert_nothing_of(text, PASSWORD, SECRET, GATEWAY, UPSTREAM_KEY[:-4],
                      "sk-new-provider-key-abcdef", "wrong-password-attempt-1")
    assert BY_NAME["TRUSTED_PROXIES"].hot is False


def test_mask_rules() -> None:
    assert mask_secret("", show_tail=True) == ""
    assert mask_secret("sk-123456789", show_tail=True) == "••••6789"  # 12 characters
    assert mask_secret("sk-12345678", show_tail=True) == "••••"  # 11: nothing of it
    assert mask_secret("sk-123456789012345") == "••••"  # presence only unless asked
    for setting in SETTINGS:
        if setting.secret and setting.name not in TAIL_SECRETS:
            assert secret_display(setting, "a-long-enough-secret-value") is None, setting.name
            assert secret_form_value(setting, "a-long-enough-secret-value") == "••••"
    assert TAIL_SECRETS <= {s.name for s in SETTINGS if s.secret}
