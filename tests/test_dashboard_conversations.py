"""Dashboard conversation and token usage pages, driven through real forms and parsed HTML."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from bs4 import BeautifulSoup

from pawwake.dashboard.i18n import STRINGS
from pawwake.dashboard.i18n import STRINGS as CONVERSATION_STRINGS
from pawwake.db.pool import cursor, execute, fetch_all
from pawwake.services import services_of
from tests.dashboard_support import dashboard_client, login, same_origin, soup

SEED = [
    {"session_id": "kyoto", "messages": [
        {"role": "user", "content": "下个月去京都旅行，清水寺那天怎么安排",
         "created_at": "2026-01-01T10:00:00Z"},
        {"role": "assistant", "content": "早上七点到清水寺，中午去二年坂吃汤豆腐。",
         "created_at": "2026-01-01T10:00:05Z"}]},
    {"session_id": "cat", "messages": [
        {"role": "user", "content": "My cat stopped eating her kibble",
         "created_at": "2026-01-02T09:00:00Z"},
        {"role": "assistant", "content": "Try a new flavour or see a vet.",
         "created_at": "2026-01-02T09:00:03Z"}]},
]


def pool_of(client: Any) -> Any:
    return services_of(client.server.app).database.pool


@pytest.fixture
async def dash(make_client: Any) -> Any:
    client = await dashboard_client(make_client, JOB_WORKERS=0,
                                    CONVERSATION_RECALL_ENABLED=True)
    assert (await login(client)).status == 303
    resp = await client.post("/api/conversations/import", json=SEED)
    assert resp.status == 201, await resp.text()
    return client


async def page(client: Any, path: str, status: int = 200, **params: Any) -> BeautifulSoup:
    resp = await client.get(path, params=params)
    assert resp.status == status, await resp.text()
    return soup(await resp.text())


async def post(client: Any, path: str, data: Any, status: int = 200) -> BeautifulSoup:
    resp = await client.post(path, data=data, headers=same_origin(client))
    assert resp.status == status, await resp.text()
    return soup(await resp.text())


def sessions_listed(html: BeautifulSoup) -> list[str]:
    return [row["data-session"] for row in html.select("tr[data-session]")]


def message_texts(html: BeautifulSoup) -> list[str]:
    return [m.select_one("[data-content]").get_text() for m in html.select("article")]


def test_catalog_is_complete_in_both_languages() -> None:
    assert set(CONVERSATION_STRINGS["zh"]) == set(CONVERSATION_STRINGS["en"])
    for lang in ("zh", "en"):
        for key, text in CONVERSATION_STRINGS[lang].items():
            assert text.strip() and STRINGS[lang][key] == text


async def test_list_shows_sessions_in_chinese_with_row_numbers(dash: Any) -> None:
    html = await page(dash, "/dashboard/conversations")
    assert html.h1.get_text() == "对话记录"
    assert sessions_listed(html) == ["cat", "kyoto"]
    first = html.select("tr[data-session]")[0]
    cells = [td.get_text(strip=True) for td in first.select("td")]
    assert cells[1] == "1" and "My cat stopped eating her kibble" in cells
    nav = [a.get_text(strip=True) for a in html.select("nav.mainnav a")]
    assert "对话记录" in nav and "用量" in nav
    assert not html.select("script:not([src])")  # CSP: no inline scripts


async def test_search_by_phrase_uses_post_and_finds_the_session(dash: Any) -> None:
    html = await post(dash, "/dashboard/conversations/search", {"q": "二年坂吃汤豆腐"})
    assert sessions_listed(html) == ["kyoto"]
    assert html.select_one("#conv-q")["value"] == "二年坂吃汤豆腐"
    html = await post(dash, "/dashboard/conversations/search", {"q": "no such words"})
    assert sessions_listed(html) == [] and html.select_one("[data-empty]")


async def test_paging_splits_long_lists(dash: Any) -> None:
    rows = [{"session_id": f"s{n:02d}", "role": "user", "content": f"message {n}",
             "created_at": f"2026-03-01T10:{n:02d}:00Z"} for n in range(25)]
    assert (await dash.post("/api/conversations/import", json=rows)).status == 201
    first = await page(dash, "/dashboard/conversations")
    assert len(sessions_listed(first)) == 20
    next_link = first.select_one("a[data-page='conv.next']")
    second = await page(dash, next_link["href"])
    assert len(sessions_listed(second)) == 7
    assert not set(sessions_listed(first)) & set(sessions_listed(second))


async def test_edit_delete_restore_a_message(dash: Any) -> None:
    html = await page(dash, "/dashboard/conversations/view", session="kyoto")
    form = html.select("article")[1].select_one("details form")
    data = {i["name"]: i.get("value", "") for i in form.select("input")}
    data.update(content="早上八点到清水寺。", action="save")
    resp = await dash.post(form["action"], data=data, headers=same_origin(dash),
                           allow_redirects=False)
    assert resp.status == 303
    html = await page(dash, resp.headers["Location"])
    assert message_texts(html)[1] == "早上八点到清水寺。"
    assert "第 2 条消息已保存" in html.select_one("[data-notice]").get_text()

    delete = html.select("article")[1].select_one("button[data-action='delete-message']")
    data = {i["name"]: i.get("value", "") for i in delete.find_parent("form").select("input")}
    html = await post(dash, "/dashboard/conversations/message", {**data, "action": "delete"})
    assert html.select("article")[1].select_one("button[data-action='restore-message']")
    async with cursor(pool_of(dash)) as cur:
        live = await fetch_all(cur, "SELECT content FROM conversations WHERE session_id ="
                               " 'kyoto' AND deleted_at IS NULL")
    assert [r["content"] for r in live] == ["下个月去京都旅行，清水寺那天怎么安排"]
    html = await post(dash, "/dashboard/conversations/message", {**data, "action": "restore"})
    assert not html.select(".is-deleted")
    empty = await post(dash, "/dashboard/conversations/message",
                       {**data, "action": "save", "content": "  "}, status=400)
    assert "消息内容不能为空" in empty.get_text()


async def test_trash_and_restore_a_session_from_its_page(dash: Any) -> None:
    async with cursor(pool_of(dash)) as cur:
        before = await fetch_all(cur, "SELECT * FROM conversations ORDER BY id")
    html = await post(dash, "/dashboard/conversations/session",
                      {"session": "kyoto", "action": "trash"})
    assert sessions_listed(html) == ["cat"]
    trash = await page(dash, "/dashboard/conversations", trash="1")
    assert sessions_listed(trash) == ["kyoto"]
    html = await page(dash, "/dashboard/conversations/view", session="kyoto")
    assert html.select_one("[data-in-trash]")
    html = await post(dash, "/dashboard/conversations/session",
                      {"session": "kyoto", "action": "restore"})
    assert not html.select(".is-deleted")
    async with cursor(pool_of(dash)) as cur:
        assert await fetch_all(cur, "SELECT * FROM conversations ORDER BY id") == before


async def test_bulk_merge_trash_and_purge(dash: Any) -> None:
    async with cursor(pool_of(dash)) as cur:
        await execute(cur, "INSERT INTO token_usage (session_id, total_tokens) VALUES"
                           " ('cat', 40), ('kyoto', 60)")
    html = await post(dash, "/dashboard/conversations/bulk",
                      [("session", "cat"), ("session", "kyoto"), ("target", "kyoto"),
                       ("action", "merge")])
    assert sessions_listed(html) == ["kyoto"]
    assert "100" in html.select_one("tr[data-session='kyoto']").get_text()
    refused = await post(dash, "/dashboard/conversations/bulk",
                         [("session", "kyoto"), ("action", "purge"), ("trash", "1")], 409)
    assert refused.select_one(".alert, .error, main")
    await post(dash, "/dashboard/conversations/bulk", [("session", "kyoto"), ("action", "trash")])
    restored = await post(dash, "/dashboard/conversations/bulk",
                          [("session", "kyoto"), ("action", "restore"), ("trash", "1")])
    assert sessions_listed(restored) == [] and "已恢复：4 条消息" in restored.get_text()
    await post(dash, "/dashboard/conversations/bulk", [("session", "kyoto"), ("action", "trash")])
    html = await post(dash, "/dashboard/conversations/bulk",
                      [("session", "kyoto"), ("action", "purge"), ("trash", "1")])
    assert sessions_listed(html) == []
    async with cursor(pool_of(dash)) as cur:
        assert await fetch_all(cur, "SELECT id FROM conversations") == []
        assert await fetch_all(cur, "SELECT id FROM token_usage") == []
    nothing = await post(dash, "/dashboard/conversations/bulk", {"action": "trash"}, 400)
    assert "请先选择会话" in nothing.get_text()


async def test_unknown_session_is_a_friendly_404(dash: Any) -> None:
    html = await page(dash, "/dashboard/conversations/view", 404, session="ghost")
    assert "不存在" in html.get_text()


async def test_writes_need_the_same_origin(dash: Any) -> None:
    resp = await dash.post("/dashboard/conversations/session",
                           data={"session": "kyoto", "action": "trash"},
                           headers={"Origin": "https://evil.example"})
    assert resp.status == 403
    async with cursor(pool_of(dash)) as cur:
        rows = await fetch_all(cur, "SELECT id FROM conversations WHERE deleted_at"
                               " IS NOT NULL")
    assert rows == []


async def test_usage_page_chart_and_tables(dash: Any) -> None:
    today = datetime.now(UTC).replace(hour=12)
    for usage_type, tokens, when in [("chat", 300, today), ("extract", 100, today),
                                     ("summary", 50, today - timedelta(days=1)),
                                     ("consolidate", 20, today - timedelta(days=40))]:
        async with cursor(pool_of(dash)) as cur:
            await execute(cur,
                          "INSERT INTO token_usage (session_id, total_tokens, usage_type,"
                          " created_at) VALUES ('kyoto', %s, %s, %s)", (tokens, usage_type, when))
    resp = await dash.get("/dashboard/usage", headers={"Cookie": "pawwake_lang=en"})
    html = soup(await resp.text())
    assert resp.status == 200 and html.h1.get_text() == "Token usage"
    bars = html.select("svg.usage-chart g[data-day]")
    assert len(bars) == 30
    today_bar = html.select_one(f"g[data-day='{today.date().isoformat()}']")
    assert today_bar["data-total"] == "400"
    kinds = [r["data-kind"] for r in today_bar.select("rect[data-kind]")]
    assert kinds == ["chat", "extract"]
    heights = [float(r["height"]) for r in today_bar.select("rect[data-kind]")]
    assert heights[0] == 3 * heights[1]
    days = html.select("table[data-table='days'] tbody tr")
    assert [tr["data-day"] for tr in days] == [
        today.date().isoformat(), (today - timedelta(days=1)).date().isoformat()]
    sessions = html.select("table[data-table='sessions'] tbody tr")
    cells = [td.get_text(strip=True) for td in sessions[0].select("th, td")]
    assert cells[:6] == ["kyoto", "300", "50", "100", "20", "470"]


async def test_usage_page_without_records(make_client: Any) -> None:
    client = await dashboard_client(make_client, JOB_WORKERS=0)
    assert (await login(client)).status == 303
    html = await page(client, "/dashboard/usage")
    assert html.select_one("[data-empty]").get_text() == "还没有 Token 用量记录。"
