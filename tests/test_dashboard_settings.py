"""The settings page: every setting grouped, the right controls, saving with htmx or a form."""

from __future__ import annotations

from typing import Any

from pawwake.services import services_of
from pawwake.settings import GROUPS, SETTINGS
from tests.dashboard_support import htmx, logged_in, same_origin, soup
from tests.settings_support import stored_settings

UPSTREAM_KEY = "sk-upstream-test-key-0123456789"  # API_KEY in the test settings


async def test_every_setting_is_shown_in_its_group_in_order(make_client: Any) -> None:
    client = await logged_in(make_client)
    page = soup(await (await client.get("/dashboard/settings")).text())
    groups = page.select("[data-settings-group]")
    assert [g["id"] for g in groups] == [f"group-{name}" for name in GROUPS]
    for setting in SETTINGS:
        row = page.select_one(f'#group-{setting.group} [data-setting="{setting.name}"]')
        assert row is not None, setting.name
        assert row.select_one(".setting-help").get_text() == setting.help_zh
    shown = [row["data-setting"] for row in page.select("[data-setting]")]
    assert sorted(shown) == sorted(s.name for s in SETTINGS)


async def test_each_kind_of_setting_has_the_right_control(make_client: Any,
                                                         database_url: str) -> None:
    client = await logged_in(make_client)
    text = await (await client.get("/dashboard/settings")).text()
    page = soup(text)

    def control(name: str) -> Any:
        return page.select_one(f'[data-setting="{name}"] .setting-control')

    assert control("MEMORY_ENABLED").select_one("input[type=checkbox][name=MEMORY_ENABLED]")
    assert control("CACHE_TTL").select_one("select[name=CACHE_TTL] option[selected]")["value"] == "5m"
    number = control("MAX_MEMORIES_INJECT").select_one("input[type=number]")
    assert (number["min"], number["max"], number["value"]) == ("0", "100", "15")
    assert control("SYSTEM_PROMPT").select_one("textarea[name=SYSTEM_PROMPT]") is not None
    picker = control("DEFAULT_MODEL").select_one("input[list=model-options]")
    assert picker["value"] == "test/model-a"
    secret = control("API_KEY").select_one("input[type=password][name=API_KEY]")
    assert secret["value"] == "••••6789"
    assert UPSTREAM_KEY not in text and database_url not in text
    readonly = control("PORT")
    assert readonly.select_one("input, select, textarea") is None
    assert "环境" in readonly.get_text()
    assert control("DATABASE_URL").select_one("output").get_text(strip=True) == "已设置"


async def test_htmx_save_applies_at_once_and_stores_only_changes(make_client: Any,
                                                                 database_url: str) -> None:
    client = await logged_in(make_client)
    config = services_of(client.app).config
    form = {"_group": "basic", "API_KEY": "••••6789", "API_BASE_URL":
            config.current()["API_BASE_URL"], "DEFAULT_MODEL": "vendor/new-model"}
    response = await client.post("/dashboard/settings", data=form, headers=htmx(client))
    assert response.status == 200
    fragment = soup(await response.text())
    assert fragment.select_one("section#group-basic") is not None
    assert fragment.select_one("html") is None
    assert fragment.select_one('[data-result="saved"]').get_text(strip=True) == \
        "已保存，下一次请求即生效。"
    assert fragment.select_one('[data-setting="DEFAULT_MODEL"] input')["value"] == \
        "vendor/new-model"
    assert config.current()["DEFAULT_MODEL"] == "vendor/new-model"
    assert config.current()["API_KEY"] == UPSTREAM_KEY
    assert stored_settings(database_url) == {"DEFAULT_MODEL": "vendor/new-model"}


async def test_checkbox_off_and_multiline_prompt_are_saved(make_client: Any) -> None:
    client = await logged_in(make_client, MEMORY_ENABLED=True)
    config = services_of(client.app).config
    prompt = "你是小爪。\r\n说话温柔。"
    response = await client.post("/dashboard/settings", headers=htmx(client), data=[
        ("_group", "memory"), ("MEMORY_ENABLED", "false")])
    assert response.status == 200
    assert config.current()["MEMORY_ENABLED"] is False
    response = await client.post("/dashboard/settings", headers=htmx(client), data=[
        ("_group", "advanced"), ("FORCE_STREAM", "false"), ("FORCE_STREAM", "true"),
        ("SYSTEM_PROMPT", prompt)])
    assert response.status == 200
    assert config.current()["FORCE_STREAM"] is True
    assert config.current()["SYSTEM_PROMPT"] == "你是小爪。\n说话温柔。"
    page = soup(await response.text())
    assert page.select_one("[data-char-count]").get_text() == str(len("你是小爪。\n说话温柔。"))


async def test_bad_value_shows_the_error_and_stores_nothing(make_client: Any,
                                                           database_url: str) -> None:
    client = await logged_in(make_client)
    config = services_of(client.app).config
    response = await client.post("/dashboard/settings", headers=htmx(client), data={
        "_group": "memory", "MAX_MEMORIES_INJECT": "many", "MEMORY_MODEL": "x/extract"})
    assert response.status == 400
    fragment = soup(await response.text())
    error = fragment.select_one('[data-setting="MAX_MEMORIES_INJECT"] .field-error')
    assert "请填写数字" in error.get_text()
    assert fragment.select_one('[data-setting="MAX_MEMORIES_INJECT"] input')["value"] == "many"
    assert "未保存" in fragment.select_one('[data-result="error"]').get_text()
    assert config.current()["MEMORY_MODEL"] == ""
    assert stored_settings(database_url) == {}


async def test_every_bad_field_of_a_group_is_marked_at_once(make_client: Any,
                                                            database_url: str) -> None:
    client = await logged_in(make_client)
    response = await client.post("/dashboard/settings", headers=htmx(client), data={
        "_group": "memory", "MAX_MEMORIES_INJECT": "many", "MEMORY_SEEN_TTL_HOURS": "-3",
        "MEMORY_MAX_TOKENS": "12.5", "MEMORY_MODEL": "x/extract"})
    assert response.status == 400
    fragment = soup(await response.text())
    marked = {row["data-setting"] for row in fragment.select(".setting.has-error")}
    assert marked == {"MAX_MEMORIES_INJECT", "MEMORY_SEEN_TTL_HOURS", "MEMORY_MAX_TOKENS"}
    for name in marked:
        assert fragment.select_one(f'[data-setting="{name}"] .field-error')
    summary = fragment.select_one('[data-result="error"]').get_text()
    assert all(name in summary for name in marked) and "MEMORY_MODEL" not in summary
    # nothing of the group is stored, the good field neither, and every value typed is kept
    assert fragment.select_one('[data-setting="MEMORY_MODEL"] input')["value"] == "x/extract"
    assert fragment.select_one('[data-setting="MEMORY_SEEN_TTL_HOURS"] input')["value"] == "-3"
    assert stored_settings(database_url) == {}


async def test_unknown_or_environment_only_field_is_refused(make_client: Any) -> None:
    client = await logged_in(make_client)
    unknown = await client.post("/dashboard/settings", headers=htmx(client),
                                data={"_group": "basic", "NOT_A_SETTING": "1"})
    assert unknown.status == 400
    assert "NOT_A_SETTING: 没有这个设置" in await unknown.text()
    env_only = await client.post("/dashboard/settings", headers=htmx(client),
                                 data={"_group": "basic", "PORT": "9999"})
    assert env_only.status == 400
    assert "PORT" in await env_only.text()
    assert services_of(client.app).config.current()["PORT"] == 8000
    no_group = await client.post("/dashboard/settings", headers=htmx(client),
                                 data={"_group": "nope"})
    assert no_group.status == 400


async def test_plain_form_post_redirects_back_with_a_message(make_client: Any) -> None:
    client = await logged_in(make_client)
    response = await client.post("/dashboard/settings", headers=same_origin(client),
                                 data={"_group": "partition", "CACHE_TTL": "1h"},
                                 allow_redirects=False)
    assert response.status == 303
    assert response.headers["Location"] == "/dashboard/settings?saved=partition#group-partition"
    page = soup(await (await client.get(response.headers["Location"])).text())
    assert page.select_one('#group-partition [data-result="saved"]') is not None
    assert page.select_one("select[name=CACHE_TTL] option[selected]")["value"] == "1h"


async def test_model_picker_options_come_from_the_provider(make_client: Any, upstream: Any
                                                           ) -> None:
    upstream.models = ["vendor/alpha", "vendor/beta", "vendor/gamma"]
    client = await logged_in(make_client)
    settings_page = soup(await (await client.get("/dashboard/settings")).text())
    catalog = settings_page.select_one("#model-catalog")
    assert catalog["hx-get"] == "/dashboard/models" and catalog["hx-trigger"] == "load"
    response = await client.get(catalog["hx-get"], headers=htmx(client))
    assert response.status == 200
    fragment = soup(await response.text())
    assert [o["value"] for o in fragment.select("datalist#model-options option")] == [
        "vendor/alpha", "vendor/beta", "vendor/gamma"]
    assert "3" in fragment.select_one('[data-models="ok"]').get_text()


async def test_model_picker_reports_a_provider_failure(make_client: Any, upstream: Any) -> None:
    client = await logged_in(make_client,
                             API_BASE_URL=str(upstream.server.make_url("/missing/v1")))
    response = await client.get("/dashboard/models", headers=htmx(client))
    assert response.status == 502
    text = await response.text()
    assert "HTTP 404" in text
    assert UPSTREAM_KEY not in text
    page = await client.get("/dashboard/models")
    assert page.status == 502 and "<table" not in await page.text()
