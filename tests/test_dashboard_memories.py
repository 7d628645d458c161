"""The memories page: tabs with counts, row numbers, paging, search, inline edit, versions."""

from __future__ import annotations

from typing import Any

from pawwake.memory.search import FALLBACK_CODES
from pawwake.services import services_of
from tests.dashboard_memories_support import (
    FIRST_ID,
    embedding_settings,
    first_ids,
    notice,
    page_of,
    post,
    rows,
    signed_in,
    soup,
    tab_counts,
)
from tests.dashboard_support import dashboard_client, htmx, login, same_origin
from tests.embedding_server import serve_embeddings
from tests.memory_support import create, row, sql, supersede
from tests.memory_support import rows as db_rows


async def seed(client: Any) -> dict[str, int]:
    """Three fragments, two events and one core memory, one fragment archived."""
    await first_ids(client)
    made = {}
    for key, content, fields in (
            ("cat", "我的猫叫小橘，是一只三岁的橘猫", {"importance": 8}),
            ("coffee", "喜欢喝美式咖啡，不加糖也不加奶", {"importance": 4}),
            ("rust", "Learning Rust on weekends", {}),
            ("trip", "四月去京都看樱花", {"layer": 2, "title": "京都", "event_date": "2026-04-05"}),
            ("wedding", "好朋友阿杰九月办婚礼", {"layer": 2, "importance": 7}),
            ("name", "用户的名字叫林晓", {"layer": 3, "importance": 10,
                                    "remind_at": "2026-12-01T09:30:00+08:00"})):
        made[key] = (await create(client, content, **fields))["id"]
    await sql(client, "UPDATE memories SET is_active = false, archived_at = now() WHERE id = %s",
              (made["rust"],))
    return made


async def test_signed_out_visitors_are_sent_to_the_login(make_client: Any) -> None:
    client = await dashboard_client(make_client, JOB_WORKERS=0)
    response = await client.get("/dashboard/memories?status=archived", allow_redirects=False)
    assert response.status == 303
    assert response.headers["Location"].startswith("/dashboard/login?next=")
    response = await client.get("/dashboard/memories", headers=htmx(client),
                                allow_redirects=False)
    assert response.status == 401
    assert response.headers["HX-Redirect"].startswith("/dashboard/login")
    for path in ("/dashboard/memories/action", "/dashboard/memories/bulk",
                 "/dashboard/memories/edit", "/dashboard/import/text"):
        response = await client.post(path, data={"id": "1"}, headers=same_origin(client),
                                     allow_redirects=False)
        assert response.status == 303, path
        assert "reason=expired" in response.headers["Location"]


async def test_cross_origin_writes_are_refused(make_client: Any) -> None:
    client = await signed_in(make_client)
    made = await create(client, "不能被别的网站归档的记忆")
    for path, data in (("/dashboard/memories/action", {"op": "archive", "id": made["id"]}),
                       ("/dashboard/memories/bulk", {"action": "archive", "ids": made["id"]}),
                       ("/dashboard/memories/cleanup", {"days": "0", "confirmed": "1"}),
                       ("/dashboard/memories/backfill", {}),
                       ("/dashboard/export/repair", {"confirmed": "1"}),
                       ("/dashboard/memories/organise", {"ids": made["id"]}),
                       ("/dashboard/memories/drafts", {"confirm": "all"}),
                       ("/dashboard/memories/merge", {"ids": made["id"], "content": "x"}),
                       ("/dashboard/memories/revert", {"id": made["id"]}),
                       ("/dashboard/memories/promote", {"id": made["id"]}),
                       ("/dashboard/import/text", {"text": "偷偷导入", "skip_scoring": "1"})):
        response = await client.post(path, data=data, headers={
            "Origin": "https://evil.example", "HX-Request": "true"})
        assert response.status == 403, path
    assert (await row(client, made["id"]))["is_active"] is True
    assert len(await db_rows(client)) == 1


async def test_tabs_count_by_status_and_layer_and_rows_are_numbered(make_client: Any) -> None:
    client = await signed_in(make_client)
    made = await seed(client)
    page = await page_of(client)
    assert tab_counts(page) == {"active": 5, "archived": 1, "layer:all": 5, "layer:1": 2,
                                "layer:2": 2, "layer:3": 1}
    shown = rows(page)
    assert [r["n"] for r in shown] == [1, 2, 3, 4, 5]
    assert shown[0]["content"] == "用户的名字叫林晓"  # newest first
    assert {r["id"] for r in shown} == {made[k] for k in ("cat", "coffee", "trip", "wedding",
                                                          "name")}
    # Ids live in form values only: never in the visible text.
    text = page.get_text(" ")
    assert not any(str(memory_id) in text for memory_id in made.values())
    assert str(FIRST_ID) not in text
    core = page.select_one(".memory-row:has([data-layer='3'])")
    assert "提醒 2026-12-01 09:30" in core.select_one("[data-reminder]").get_text()
    trip = next(r for r in shown if r["content"] == "四月去京都看樱花")
    assert trip["title"] == "京都" and trip["layer"] == 2
    assert "事件日期 2026-04-05" in page.select_one(
        ".memory-row:has([data-title])").get_text(" ")

    events = await page_of(client, layer="2")
    assert {r["content"] for r in rows(events)} == {"四月去京都看樱花", "好朋友阿杰九月办婚礼"}
    assert events.select_one('[data-layer-tab="2"]')["aria-current"] == "page"
    archived = await page_of(client, status="archived")
    assert [(r["n"], r["content"]) for r in rows(archived)] == [(1, "Learning Rust on weekends")]
    assert archived.select_one("[data-action=restore]") is not None
    assert archived.select_one("#memory-q") is None  # search covers active memories


async def test_paging_keeps_numbering_across_pages(make_client: Any) -> None:
    client = await signed_in(make_client)
    for number in range(35):
        await create(client, f"第 {number} 条记忆 memory number {number}")
    first = await page_of(client)
    assert [r["n"] for r in rows(first)] == list(range(1, 31))
    assert rows(first)[0]["content"] == "第 34 条记忆 memory number 34"
    assert first.select_one("[data-page]").get_text(strip=True) == "第 1 / 2 页"
    next_url = first.select_one(".pager a[rel=next]")["href"]
    assert next_url == "/dashboard/memories?status=active&page=2"
    second = soup(await (await client.get(next_url)).text())
    assert [r["n"] for r in rows(second)] == [31, 32, 33, 34, 35]
    assert rows(second)[-1]["content"] == "第 0 条记忆 memory number 0"
    # A page past the end shows the last page instead of nothing.
    assert [r["n"] for r in rows(await page_of(client, page="9"))] == [31, 32, 33, 34, 35]


async def test_htmx_gets_the_region_and_bad_views_get_400(make_client: Any) -> None:
    client = await signed_in(make_client)
    await create(client, "一条记忆")
    response = await client.get("/dashboard/memories?status=archived", headers=htmx(client))
    assert response.status == 200
    assert response.headers["Vary"] == "HX-Request"
    body = await response.text()
    assert "<html" not in body and body.lstrip().startswith("<section id=\"memories-main\"")
    for query in ("status=deleted", "layer=4", "page=0", "page=x"):
        response = await client.get(f"/dashboard/memories?{query}")
        assert response.status == 400, query
        assert soup(await response.text()).select_one("[role=alert]") is not None


async def test_keyword_filter_and_semantic_search_show_scores_and_the_real_mode(
        make_client: Any, aiohttp_server: Any) -> None:
    fake = await serve_embeddings(aiohttp_server)
    client = await signed_in(make_client, **embedding_settings(fake))
    fake.fail_after = 0  # the provider is down while the memories are written
    await seed(client)
    fake.fail_after = None
    response = await post(client, "/dashboard/memories/search",
                          {"q": "咖啡", "mode": "keyword", "status": "active", "layer": ""})
    assert response.status == 200
    page = soup(await response.text())
    assert page.select_one(".search-summary")["data-search-mode"] == "keyword"
    assert page.select_one("[data-fallback]") is None  # keywords were asked for
    found = rows(page)
    assert [r["content"] for r in found] == ["喜欢喝美式咖啡，不加糖也不加奶"]
    assert float(page.select_one("[data-score]")["data-score"]) > 0
    assert page.select_one("#view-state input[name=q]")["value"] == "咖啡"

    # No vector exists yet: the semantic search says it fell back to keywords, and why.
    response = await post(client, "/dashboard/memories/search",
                          {"q": "猫", "mode": "semantic", "status": "active"})
    page = soup(await response.text())
    assert page.select_one(".search-summary")["data-search-mode"] == "keyword"
    assert "补算" in page.select_one("[data-fallback]").get_text()

    app = client.server.app
    await client.post("/api/admin/backfill-memory-embeddings")
    await services_of(app).jobs.run_until_idle()
    response = await post(client, "/dashboard/memories/search",
                          {"q": "我的猫叫什么", "mode": "semantic", "status": "active"})
    page = soup(await response.text())
    assert page.select_one(".search-summary")["data-search-mode"] == "hybrid"
    assert page.select_one("[data-fallback]") is None
    assert rows(page)[0]["content"] == "我的猫叫小橘，是一只三岁的橘猫"
    assert "语义" in page.select_one("[data-score-parts]").get_text()

    # The plain form (no htmx) renders the whole page with the results.
    response = await post(client, "/dashboard/memories/search",
                          {"q": "咖啡", "mode": "keyword"}, hx=False)
    page = soup(await response.text())
    assert page.select_one("h1").get_text(strip=True) == "记忆管理"
    assert [r["content"] for r in rows(page)] == ["喜欢喝美式咖啡，不加糖也不加奶"]


async def test_semantic_search_says_when_vectors_are_off(make_client: Any) -> None:
    client = await signed_in(make_client, MEMORY_VECTOR_ENABLED=False)
    await create(client, "喜欢喝美式咖啡")
    page = soup(await (await post(client, "/dashboard/memories/search",
                                  {"q": "咖啡", "mode": "semantic"})).text())
    assert "MEMORY_VECTOR_ENABLED=false" in page.select_one("[data-fallback]").get_text()
    assert len(rows(page)) == 1


async def test_inline_edit_saves_and_rerenders_and_refusals_sit_by_their_field(
        make_client: Any) -> None:
    client = await signed_in(make_client)
    made = await seed(client)
    cat = made["cat"]
    view = {"status": "active", "layer": "", "page": "1"}
    response = await client.get("/dashboard/memories/edit", headers=htmx(client),
                                params={"id": str(cat), "n": "4", **view})
    editor = soup(await response.text())
    assert editor.select_one("textarea[name=content]").get_text() == "我的猫叫小橘，是一只三岁的橘猫"
    assert editor.select_one("input[name=importance]")["value"] == "8"
    assert editor.select_one("select[name=to_layer] option[selected]")["value"] == "1"

    response = await post(client, "/dashboard/memories/edit", {
        **view, "id": str(cat), "n": "4", "content": "我的猫叫小橘，今年四岁了",
        "title": "小橘", "importance": "9", "to_layer": "3"})
    assert response.status == 200
    fragment = soup(await response.text())
    [shown] = rows(fragment)
    assert shown == {**shown, "n": 4, "content": "我的猫叫小橘，今年四岁了", "title": "小橘",
                     "importance": 9, "layer": 3}
    assert "第 4 条已保存" in shown["message"].get_text()
    stored = await row(client, cat)
    assert (stored["content"], stored["title"], stored["importance"], stored["layer"]) == (
        "我的猫叫小橘，今年四岁了", "小橘", 9, 3)

    for field, value, text in (("importance", "11", "1 到 10"), ("importance", "很重要", "1 到 10"),
                               ("content", "   ", "不能为空"), ("to_layer", "7", "层级")):
        data = {**view, "id": str(cat), "n": "4", "content": "改不了", "importance": "5",
                "to_layer": "1", field: value}
        response = await post(client, "/dashboard/memories/edit", data)
        assert response.status == 400, field
        fragment = soup(await response.text())
        error_field = "layer" if field == "to_layer" else field
        assert text in fragment.select_one(f'[data-error="{error_field}"]').get_text()
        # What was typed stays in the editor.
        assert fragment.select_one("textarea[name=content]").get_text() == (
            value if field == "content" else "改不了")
    assert (await row(client, cat))["content"] == "我的猫叫小橘，今年四岁了"

    # Without htmx: an error renders the whole page with the editor open, status 400.
    response = await post(client, "/dashboard/memories/edit", {
        **view, "id": str(cat), "n": "4", "content": "", "importance": "5", "to_layer": "1"},
        hx=False)
    assert response.status == 400
    page = soup(await response.text())
    assert page.select_one("h1") is not None
    assert page.select_one(".memory-row.is-editing [data-error=content]") is not None
    response = await post(client, "/dashboard/memories/edit", {
        **view, "id": str(cat), "n": "4", "content": "我的猫叫小橘", "title": "",
        "importance": "9", "to_layer": "3"}, hx=False)
    assert response.status == 200
    assert notice(soup(await response.text())) == ("notice", "第 4 条已保存。")
    assert (await row(client, cat))["title"] is None


async def test_editor_opens_by_row_number_without_script(make_client: Any) -> None:
    client = await signed_in(make_client)
    await seed(client)
    page = await page_of(client, edit="2")
    editing = page.select(".memory-row.is-editing")
    assert len(editing) == 1
    assert editing[0]["data-row"] == "2"
    assert editing[0].select_one("textarea").get_text() == "好朋友阿杰九月办婚礼"
    link = page.select_one('.memory-row[data-row="3"] a[data-action=edit]')
    assert link["href"] == "/dashboard/memories?status=active&edit=3"


async def test_version_chain_view_and_undo_supersede(make_client: Any) -> None:
    client = await signed_in(make_client)
    old = (await create(client, "住在徐汇区"))["id"]
    new = (await create(client, "搬家了，现在住在静安区"))["id"]
    await supersede(client, old, new)
    response = await client.get("/dashboard/memories/versions", headers=htmx(client),
                                params={"id": str(new), "n": "1", "status": "active"})
    panel = soup(await response.text())
    versions = [(v["data-version"], v["data-state"], v.select_one(".version-content").get_text())
                for v in panel.select("[data-version]")]
    assert versions == [("1", "replaced", "住在徐汇区"), ("2", "current", "搬家了，现在住在静安区")]
    undo = panel.select_one("form:has([data-action=undo-supersede])")
    assert undo.select_one("input[name=id]")["value"] == str(new)

    # The replaced row (archived tab) cannot be restored directly...
    archived = await page_of(client, status="archived")
    assert archived.select_one("[data-superseded]") is not None
    assert archived.select_one("[data-action=restore]") is None
    # ...and the chain cannot be deleted away.
    response = await post(client, "/dashboard/memories/action", {
        "status": "archived", "op": "delete", "id": str(old), "n": "1", "confirmed": "1"})
    assert response.status == 409
    assert "版本链" in soup(await response.text()).select_one("[data-row-result]").get_text()

    response = await post(client, "/dashboard/memories/undo-supersede", {
        "status": "active", "id": str(new)})
    assert response.status == 200
    page = soup(await response.text())
    assert "已撤销替代" in notice(page)[1]
    assert [r["content"] for r in rows(page)] == ["住在徐汇区"]
    assert (await row(client, old))["is_active"] is True
    assert (await row(client, new))["is_active"] is False
    # Doing it again is refused clearly.
    response = await post(client, "/dashboard/memories/undo-supersede", {
        "status": "active", "id": str(new)})
    assert response.status == 409
    assert notice(soup(await response.text()))[0] == "alert"


async def test_versions_of_a_lone_memory_and_without_script(make_client: Any) -> None:
    client = await signed_in(make_client)
    made = await create(client, "独自一条")
    response = await client.get("/dashboard/memories/versions", headers=htmx(client),
                                params={"id": str(made["id"]), "n": "1"})
    assert soup(await response.text()).select_one("[data-versions-single]") is not None
    page = await page_of(client, versions="1")
    assert page.select_one('.memory-row[data-row="1"] [data-versions-single]') is not None
    response = await client.get("/dashboard/memories/versions",
                                params={"id": str(made["id"]), "n": "1"},
                                allow_redirects=False)
    assert response.status == 303
    assert response.headers["Location"] == "/dashboard/memories?status=active&versions=1"


async def test_a_missing_row_is_a_clear_404(make_client: Any) -> None:
    client = await signed_in(make_client)
    response = await client.get("/dashboard/memories/edit", headers=htmx(client),
                                params={"id": "424242", "n": "1"})
    assert response.status == 404
    assert "已不存在" in await response.text()
    response = await post(client, "/dashboard/memories/action",
                          {"op": "archive", "id": "abc", "n": "1"})
    assert response.status == 404


async def test_english_page(make_client: Any) -> None:
    client = await signed_in(make_client)
    await seed(client)
    await client.post("/dashboard/language", data={"lang": "en", "next": "/dashboard/memories"},
                      headers=same_origin(client))
    page = await page_of(client)
    assert page.select_one("h1").get_text(strip=True) == "Memories"
    assert page.select_one('[data-layer-tab="2"]').get_text(" ", strip=True) == "Event 2"
    assert page.select_one("[data-action=archive]").get_text(strip=True) == "Archive"
    assert page.select_one("#backfill h2").get_text(strip=True) == "Embedding backfill"


async def test_without_a_database_the_page_explains(make_client: Any) -> None:
    client = await dashboard_client(make_client, DATABASE_ENABLED=False)
    assert (await login(client)).status == 303
    response = await client.get("/dashboard/memories")
    assert response.status == 503
    assert "DATABASE_ENABLED=false" in await response.text()


def test_every_message_the_memory_pages_build_exists_in_both_languages() -> None:
    from pawwake.dashboard.i18n import STRINGS
    from pawwake.dashboard.io import import_page
    from pawwake.dashboard.memories import actions as memories_actions
    from pawwake.dashboard.memories import backfill as backfill_panel

    keys_built = [
        *(f"refusal.{code}" for code in memories_actions.REFUSALS),
        *(f"skip.{reason}" for reason in ("not_found", "already_archived", "not_archived",
                                          "superseded", "version_chain_member",
                                          "merge_source", "unchanged")),
        *(f"bulk.done_{action}" for action in memories_actions.BULK_ACTIONS),
        *(f"memories.done_{op}" for op in memories_actions.ROW_OPS),
        *backfill_panel.STATUS_KEYS.values(), *import_page.CONFLICT_KEYS.values(),
        *(f"versions.state_{state}" for state in ("current", "replaced", "archived")),
        *(f"memories.status_{status}" for status in ("active", "archived")),
        *(f"memories.invalid_{field}" for field in ("content", "importance", "layer", "title")),
        *(f"memories.fallback_{why}" for why in (*FALLBACK_CODES, "other")),
        *(f"memories.bad_{what}" for what in ("status", "layer", "page", "mode")),
    ]
    for lang in ("zh", "en"):
        missing = [key for key in keys_built if key not in STRINGS[lang]]
        assert missing == [], lang
