"""GET/PUT /api/settings: masked secrets, strict validation, saved values that stick."""

from __future__ import annotations

from typing import Any

import pytest
from bs4 import BeautifulSoup

from pawwake.services import services_of
from tests.dashboard_support import dashboard_client, login
from tests.settings_support import by_name, stored_settings

UPSTREAM_KEY = "sk-upstream-test-key-0123456789"
GATEWAY = "gateway-secret-for-programs-0001"
KEYED = {"X-Gateway-Key": GATEWAY}
ADMIN = "admin-secret-for-routing-000001"
AS_ADMIN = {"X-Admin-Key": ADMIN}


async def test_get_lists_every_setting_with_secrets_masked(make_client: Any,
                                                           database_url: str) -> None:
    client = await make_client(GATEWAY_SECRET=GATEWAY)
    response = await client.get("/api/settings", headers=KEYED)
    assert response.status == 200
    text = await response.text()
    assert UPSTREAM_KEY not in text and GATEWAY not in text and database_url not in text
    settings = by_name(await response.json())
    assert settings["API_KEY"]["value"] == "••••6789"
    assert settings["API_KEY"]["is_set"] is True
    assert settings["GATEWAY_SECRET"]["value"] is None
    assert settings["GATEWAY_SECRET"]["is_set"] is True
    assert settings["DEFAULT_MODEL"]["value"] == "test/model-a"
    assert settings["PORT"]["hot"] is False
    assert (await response.json())["groups"][0] == "basic"


@pytest.mark.parametrize("changes", [
    {"DEFAULT_MODEL": "ok/model", "NO_SUCH_SETTING": 1},
    {"DEFAULT_MODEL": "ok/model", "MAX_MEMORIES_INJECT": "ten"},
    {"DEFAULT_MODEL": "ok/model", "MAX_MEMORIES_INJECT": True},
    {"DEFAULT_MODEL": "ok/model", "MEMORY_ENABLED": "maybe"},
    {"DEFAULT_MODEL": "ok/model", "CACHE_TTL": "2h"},
    {"DEFAULT_MODEL": "ok/model", "MIN_SCORE_THRESHOLD": 7},
    {"DEFAULT_MODEL": 42},
    {"DEFAULT_MODEL": "ok/model", "PORT": 9000},
])
async def test_put_rejects_bad_changes_and_stores_nothing(make_client: Any, database_url: str,
                                                          changes: dict[str, Any]) -> None:
    client = await make_client()
    response = await client.put("/api/settings", json=changes)
    assert response.status == 400
    error = (await response.json())["error"]
    assert error["code"] == "invalid_setting"
    assert error["message"]
    assert stored_settings(database_url) == {}
    assert services_of(client.app).config.current()["DEFAULT_MODEL"] == "test/model-a"


@pytest.mark.parametrize("body", [b"[1, 2]", b'"DEFAULT_MODEL"', b"null", b"{not json"])
async def test_put_needs_a_json_object(make_client: Any, body: bytes) -> None:
    client = await make_client()
    response = await client.put("/api/settings", data=body,
                                headers={"Content-Type": "application/json"})
    assert response.status == 400
    assert (await response.json())["error"]["code"] in ("invalid_body", "invalid_json")


async def test_masked_secret_sent_back_keeps_the_old_value(make_client: Any,
                                                           database_url: str) -> None:
    client = await make_client(ADMIN_SECRET=ADMIN)
    masked = by_name(await (await client.get("/api/settings")).json())["API_KEY"]["value"]
    response = await client.put("/api/settings",
                                json={"API_KEY": masked, "DEFAULT_MODEL": "kept/secret"})
    assert response.status == 200
    body = await response.json()
    assert body["updated"] == ["DEFAULT_MODEL"]
    assert by_name(body)["API_KEY"]["value"] == masked
    assert services_of(client.app).config.current()["API_KEY"] == UPSTREAM_KEY
    assert stored_settings(database_url) == {"DEFAULT_MODEL": "kept/secret"}

    response = await client.put("/api/settings", json={"API_KEY": "sk-brand-new-key-abcdef"},
                                headers=AS_ADMIN)  # a provider key: an admin's change
    assert response.status == 200
    assert by_name(await response.json())["API_KEY"]["value"] == "••••cdef"
    assert services_of(client.app).config.current()["API_KEY"] == "sk-brand-new-key-abcdef"

    wrong_mask = await client.put("/api/settings", json={"API_KEY": "••••zzzz"},
                                  headers=AS_ADMIN)
    assert wrong_mask.status == 400


async def test_saved_value_applies_on_the_next_request_and_after_a_restart(
        make_client: Any, database_url: str) -> None:
    client = await dashboard_client(make_client)
    response = await client.put("/api/settings", json={"DEFAULT_MODEL": "vendor/saved-model",
                                                       "MAX_MEMORIES_INJECT": 4})
    assert response.status == 200
    assert (await response.json())["updated"] == ["DEFAULT_MODEL", "MAX_MEMORIES_INJECT"]

    # The very next request, through another path that reads the settings in force.
    assert (await login(client)).status == 303
    page = BeautifulSoup(await (await client.get("/dashboard")).text(), "html.parser")
    assert page.select_one('[data-fact="default-model"]').get_text(strip=True) == \
        "vendor/saved-model"

    # A second gateway process on the same database starts with the saved values.
    restarted = await make_client()
    settings = by_name(await (await restarted.get("/api/settings")).json())
    assert settings["DEFAULT_MODEL"]["value"] == "vendor/saved-model"
    assert settings["DEFAULT_MODEL"]["saved"] is True
    assert settings["MAX_MEMORIES_INJECT"]["value"] == 4
    assert services_of(restarted.app).config.current()["DEFAULT_MODEL"] == "vendor/saved-model"


async def test_settings_api_requires_the_gateway_key_when_set(make_client: Any) -> None:
    client = await make_client(GATEWAY_SECRET=GATEWAY)
    assert (await client.get("/api/settings")).status == 401
    assert (await client.put("/api/settings", json={"DEFAULT_MODEL": "x/y"})).status == 401
    response = await client.put("/api/settings", json={"DEFAULT_MODEL": "x/y"},
                                headers={"Authorization": f"Bearer {GATEWAY}"})
    assert response.status == 200
    assert services_of(client.app).config.current()["DEFAULT_MODEL"] == "x/y"


async def test_settings_api_works_without_a_database(make_client: Any) -> None:
    client = await make_client(DATABASE_ENABLED=False)
    response = await client.put("/api/settings", json={"FORCE_STREAM": True})
    assert response.status == 200
    assert by_name(await response.json())["FORCE_STREAM"]["value"] is True


async def test_a_persona_is_bounded_with_a_clear_error(make_client: Any,
                                                      database_url: str) -> None:
    from pawwake.settings import BY_NAME, Settings
    from pawwake.settings.entry import SettingError

    limit = BY_NAME["SYSTEM_PROMPT"].max_chars
    assert limit is not None
    client = await make_client()
    response = await client.put("/api/settings", json={"SYSTEM_PROMPT": "猫" * (limit + 1)})
    assert response.status == 400
    error = (await response.json())["error"]
    assert error["code"] == "invalid_setting" and "SYSTEM_PROMPT" in error["message"]
    assert f"{limit:,}" in error["message"] or str(limit) in error["message"]
    assert stored_settings(database_url) == {}
    ok = await client.put("/api/settings", json={"SYSTEM_PROMPT": "猫" * limit})
    assert ok.status == 200, await ok.text()
    with pytest.raises(SettingError):  # the environment is held to the same bound
        Settings.from_env({"SYSTEM_PROMPT": "x" * (limit + 1)})
