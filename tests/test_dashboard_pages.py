"""Dashboard pages: layout, language switch, status numbers, errors."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from pawwake import SOURCE_URL, __version__
from pawwake.dashboard.i18n import STRINGS
from pawwake.dashboard.nav import NAV
from pawwake.settings import GROUPS
from tests.admin_sql import run_autocommit
from tests.dashboard_support import dashboard_client, htmx, logged_in, login, same_origin, soup


def test_both_languages_have_the_same_strings() -> None:
    assert set(STRINGS["zh"]) == set(STRINGS["en"])
    for item in NAV:
        assert item.label in STRINGS["zh"]
    for group in GROUPS:
        assert f"group.{group}" in STRINGS["zh"]
    templates = Path(__file__).resolve().parents[1] / "templates"
    for path in templates.rglob("*.html"):
        for key in re.findall(r"\bt\(\s*[\"']([a-z_]+\.[a-z_]+)[\"']", path.read_text()):
            assert key in STRINGS["zh"], f"{path.name}: {key}"


async def test_navigation_lists_only_pages_that_exist(make_client: Any) -> None:
    client = await logged_in(make_client)
    page = soup(await (await client.get("/dashboard")).text())
    links = page.select("nav.mainnav a")
    assert [a.get_text(strip=True) for a in links] == [STRINGS["zh"][item.label] for item in NAV]
    assert {"运行状态", "记忆", "对话记录", "设置"} <= {a.get_text(strip=True) for a in links}
    assert links[0]["href"] == "/dashboard"
    assert links[-1]["href"] == "/dashboard/settings"
    assert links[0].get("aria-current") == "page"
    for link in links:
        assert (await client.get(link["href"])).status == 200


async def test_status_page_shows_what_is_on_and_the_numbers(make_client: Any,
                                                            database_url: str) -> None:
    run_autocommit(database_url, """
        INSERT INTO conversations (session_id, role, content) VALUES
          ('s1', 'user', '你好'), ('s1', 'assistant', '你好呀'), ('s2', 'user', 'hi');
        INSERT INTO conversations (session_id, role, content, deleted_at)
          VALUES ('s3', 'user', 'gone', now());
        INSERT INTO token_usage (session_id, model, prompt_tokens, completion_tokens,
                                 total_tokens)
          VALUES ('s1', 'm', 1200, 34, 1234), ('s2', 'm', 10, 5, 15);
    """)
    client = await logged_in(make_client, CACHE_PARTITION_ENABLED=True)
    response = await client.get("/dashboard")
    assert response.status == 200
    page = soup(await response.text())
    assert page.select_one('[data-fact="version"]').get_text(strip=True) == __version__
    assert page.select_one('[data-fact="database"]').get_text(strip=True) == "外部 PostgreSQL"
    assert page.select_one('[data-fact="vectors"]').get_text(strip=True) == "pgvector"
    switches = {li["data-switch"]: li.get_text(" ", strip=True)
                for li in page.select("[data-switch]")}
    assert switches["status.partition"].endswith("开启")
    assert switches["status.memory"].endswith("关闭")  # the test settings turn memory off
    assert switches["status.recall"].endswith("关闭")

    def count(name: str) -> str:
        return page.select_one(f'[data-count="{name}"] .stat-value').get_text(strip=True)

    assert count("messages") == "3"
    assert count("sessions") == "2"
    assert count("tokens") == "1,249"


@pytest.mark.parametrize(("choice", "shown"), [
    ({"VECTOR_BACKEND": "numpy"}, "numpy"),
    ({"VECTOR_BACKEND": "auto", "VECTOR_INDEX_MAX_ROWS": 3000}, "auto"),
    ({"VECTOR_BACKEND": "auto", "VECTOR_INDEX_MAX_ROWS": 0}, "pgvector"),
])
async def test_status_and_health_name_the_vector_backend_the_settings_choose(
        make_client: Any, choice: dict[str, Any], shown: str) -> None:
    """Not only whether the database has pgvector: a forced numpy index, or the in-process
    index while a table is small, is what searches actually run on."""
    client = await logged_in(make_client, **choice)
    page = soup(await (await client.get("/dashboard")).text())
    assert page.select_one('[data-fact="vectors"]').get_text(strip=True) == \
        STRINGS["zh"][f"vectors.{shown}"]
    assert (await (await client.get("/")).json())["vectors"] == shown


async def test_memories_count_only_when_the_table_exists(make_client: Any,
                                                         database_url: str) -> None:
    run_autocommit(database_url, "DROP TABLE IF EXISTS memories CASCADE")
    client = await logged_in(make_client)
    page = soup(await (await client.get("/dashboard")).text())
    assert page.select_one('[data-count="memories"]') is None
    run_autocommit(database_url, "CREATE TABLE memories (id bigserial PRIMARY KEY, content text,"
                          " is_active boolean NOT NULL DEFAULT true);"
                          "INSERT INTO memories (content, is_active) VALUES"
                          " ('a', true), ('b', true), ('c', false)")
    page = soup(await (await client.get("/dashboard")).text())
    memories = page.select_one('[data-count="memories"]')
    assert memories.select_one(".stat-value").get_text(strip=True) == "3"
    assert "有效 2" in memories.get_text(" ", strip=True)


async def test_status_page_without_a_database(make_client: Any) -> None:
    client = await logged_in(make_client, DATABASE_ENABLED=False)
    page = soup(await (await client.get("/dashboard")).text())
    assert page.select_one('[data-fact="database"]').get_text(strip=True) == "已关闭（纯转发）"
    assert page.select_one("[data-count]") is None
    assert "DATABASE_ENABLED=false" in page.get_text()


async def test_language_switch_to_english_and_back(make_client: Any) -> None:
    client = await logged_in(make_client)
    response = await client.post("/dashboard/language",
                                 data={"lang": "en", "next": "/dashboard/settings"},
                                 headers=same_origin(client), allow_redirects=False)
    assert response.status == 303
    assert response.headers["Location"] == "/dashboard/settings"
    page = soup(await (await client.get("/dashboard/settings")).text())
    assert page.html["lang"] == "en"
    assert page.select_one("h1").get_text(strip=True) == "Settings"
    assert page.select_one("#group-basic h2").get_text(strip=True) == "Connection"
    help_text = page.select_one('[data-setting="DEFAULT_MODEL"] .setting-help').get_text()
    assert help_text == "Default model when a request names none"

    await client.post("/dashboard/language", data={"lang": "zh"}, headers=same_origin(client))
    page = soup(await (await client.get("/dashboard/settings")).text())
    assert page.html["lang"] == "zh-CN"
    assert page.select_one("#group-basic h2").get_text(strip=True) == "基础连接"


async def test_language_switch_works_before_login_and_rejects_unknown(make_client: Any) -> None:
    client = await dashboard_client(make_client)
    await client.post("/dashboard/language", data={"lang": "en", "next": "/dashboard/login"},
                      headers=same_origin(client))
    page = soup(await (await client.get("/dashboard/login")).text())
    assert page.select_one("button[type=submit].button-primary").get_text(strip=True) == "Sign in"
    bad = await client.post("/dashboard/language", data={"lang": "fr"},
                            headers=same_origin(client))
    assert bad.status == 400


async def test_render_sets_vary_and_serves_fragments_to_htmx(make_client: Any) -> None:
    client = await logged_in(make_client)
    full = await client.get("/dashboard/models")
    assert full.headers["Vary"] == "HX-Request"
    assert "<html" in await full.text()
    fragment = await client.get("/dashboard/models", headers=htmx(client))
    assert fragment.headers["Vary"] == "HX-Request"
    text = await fragment.text()
    assert "<html" not in text and '<datalist id="model-options">' in text
    assert fragment.headers["Cache-Control"] == "no-store"
    assert "frame-ancestors 'none'" in fragment.headers["Content-Security-Policy"]


async def test_unknown_dashboard_page_is_a_friendly_404(make_client: Any) -> None:
    client = await logged_in(make_client)
    response = await client.get("/dashboard/no-such-page")
    assert response.status == 404
    assert "页面不存在" in await response.text()
    slash = await client.get("/dashboard/", allow_redirects=False)
    assert slash.status == 308 and slash.headers["Location"] == "/dashboard"


async def test_static_files_are_served_with_a_version(make_client: Any) -> None:
    client = await logged_in(make_client)
    page = soup(await (await client.get("/dashboard")).text())
    scripts = [tag["src"] for tag in page.select("script[src]")]
    assert any(src.startswith("/static/vendor/htmx.min.js?v=") for src in scripts)
    for src in [*scripts, page.select_one("link[rel=stylesheet]")["href"]]:
        response = await client.get(src)
        assert response.status == 200, src
        assert len(await response.read()) > 100


@pytest.mark.parametrize("listed", [
    [{"id": "gpt-4o", "object": "model", "created": 1715367049, "owned_by": "system"}],
    [{"id": "deepseek-chat", "object": "model", "owned_by": "deepseek"}],
    [{"id": "llama3.2:latest", "object": "model", "created": 1731000000,
      "owned_by": "library"}],
    [{"id": "with-context", "context_length": 128000}, {"id": "without-context"}],
])
async def test_the_models_page_lists_models_without_a_context_length(
        make_client: Any, upstream: Any, listed: list[dict[str, Any]]) -> None:
    upstream.model_list = listed  # the provider's own entries
    client = await logged_in(make_client)
    for lang in ("zh", "en"):
        response = await client.get(f"/dashboard/models?lang={lang}")
        assert response.status == 200, await response.text()
        names = [code.get_text() for code in soup(await response.text()).select("td code")]
        assert names == sorted(m["id"] for m in listed)


async def test_every_page_offers_the_source_to_its_users(make_client: Any) -> None:
    """AGPL-3.0 section 13: whoever uses the gateway over the network is offered its source,
    on the sign-in page already and on every page after it."""
    client = await dashboard_client(make_client)
    for path, signed_in in (("/dashboard/login", False), ("/dashboard", True),
                            ("/dashboard/settings", True)):
        if signed_in and path == "/dashboard":
            assert (await login(client)).status == 303
        footer = soup(await (await client.get(path)).text()).select_one("footer")
        link = footer.select_one("a[data-source-link]")
        assert link["href"] == SOURCE_URL, path
        assert link.get_text(strip=True) == "源代码（AGPL-3.0）"
        assert __version__ in footer.get_text()
