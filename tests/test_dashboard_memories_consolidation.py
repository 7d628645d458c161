"""Organising on the memories page: runs, progress, drafts (edit, skip, confirm), manual merge,
sources and revert, core candidates."""

from __future__ import annotations

from typing import Any

from tests.consolidation_support import add, answer, group, run_jobs
from tests.dashboard_memories_support import (
    first_ids,
    form_fields,
    notice,
    page_of,
    post,
    rows,
    signed_in,
    soup,
)
from tests.dashboard_support import htmx
from tests.fake_upstream import FakeUpstream
from tests.memory_support import row, sql
from tests.memory_support import rows as db_rows

SETTINGS = {"TIMEZONE_HOURS": 8, "MEMORY_MODEL": "test/memory", "MEMORY_VECTOR_ENABLED": False}
DAY = "2025-03-01"


async def organiser(make_client: Any) -> Any:
    client = await signed_in(make_client, **SETTINGS)
    await first_ids(client)
    return client


async def picnic(client: Any) -> list[int]:
    """Three fragments written on one local day (UTC+8)."""
    return [await add(client, text, at=f"{DAY}T0{n + 1}:00:00+08:00") for n, text in
            enumerate(["周六和阿杰去公园野餐", "野餐带了三明治和西瓜", "回家路上下起了小雨"])]


async def panel_of(client: Any) -> Any:
    response = await client.get("/dashboard/memories/organise", headers=htmx(client))
    assert response.status == 200
    return soup(await response.text()).select_one("#consolidation")


async def drafts_for_day(client: Any, upstream: FakeUpstream, groups: list[dict[str, Any]]
                         ) -> Any:
    response = await post(client, "/dashboard/memories/organise",
                          {"date_from": DAY, "date_to": DAY, "status": "active"})
    assert response.status == 200, await response.text()
    answer(upstream, groups)
    await run_jobs(client)
    return await panel_of(client)


def drafts_form(panel: Any, **changes: str) -> list[tuple[str, str]]:
    """The drafts form as a browser would send it, with some fields changed."""
    form = panel.select_one("#drafts-form")
    fields = dict(form_fields(form))
    for select in form.select("select"):
        chosen = select.select_one("option[selected]") or select.select_one("option")
        fields[select["name"]] = chosen["value"]
    fields.update(changes)
    return list(fields.items())


async def test_organising_a_day_shows_progress_then_drafts(make_client: Any,
                                                           upstream: FakeUpstream) -> None:
    client = await organiser(make_client)
    page = await page_of(client)
    start_form = page.select_one("[data-organise-form]")
    assert start_form["action"] == "/dashboard/memories/organise"
    assert start_form.select_one("input[name=date_from]")["type"] == "date"
    ids = await picnic(client)

    response = await post(client, "/dashboard/memories/organise",
                          {"date_from": DAY, "date_to": DAY, "status": "active"})
    panel = soup(await response.text()).select_one("#consolidation")
    assert panel["data-consolidation-status"] == "queued"
    assert panel["hx-trigger"] == "every 1s"  # polls while the drafts are made
    assert panel.select_one("progress") is not None
    assert [r["is_active"] for r in await db_rows(client)] == [True, True, True]

    answer(upstream, [group("野餐那天去公园野餐，带了三明治和西瓜", [1, 2], title="公园野餐"),
                      group("回家路上下起了小雨", [3], title="小雨")])
    await run_jobs(client)
    panel = await panel_of(client)
    assert panel["data-consolidation-status"] == "done"
    assert panel.get("hx-trigger") is None
    drafts = panel.select("[data-draft]")
    assert [d["data-state"] for d in drafts] == ["ready", "ready"]
    assert drafts[0].select_one("input[name=title-1]")["value"] == "公园野餐"
    assert drafts[0].select_one("textarea[name=content-1]").get_text() == (
        "野餐那天去公园野餐，带了三明治和西瓜")
    assert [s.get_text(" ", strip=True) for s in drafts[0].select("[data-draft-source]")] == [
        f"碎片 {DAY} 周六和阿杰去公园野餐", f"碎片 {DAY} 野餐带了三明治和西瓜"]
    assert not any(str(i) in panel.get_text(" ") for i in ids)  # ids stay in form values
    assert "周六和阿杰去公园野餐" in upstream.requests[-1].body["messages"][0]["content"]
    assert [r["is_active"] for r in await db_rows(client)] == [True, True, True]


async def test_confirm_one_edited_draft_writes_the_event_and_updates_the_list(
        make_client: Any, upstream: FakeUpstream) -> None:
    client = await organiser(make_client)
    ids = await picnic(client)
    panel = await drafts_for_day(client, upstream, [group("去公园野餐", [1, 2]),
                                                    group("下小雨", [3])])
    fields = drafts_form(panel, **{"title-1": "野餐", "content-1": "和阿杰在公园野餐，吃了三明治和西瓜",
                                   "importance-1": "8", "confirm": "1"})
    response = await post(client, "/dashboard/memories/drafts", fields)
    assert response.status == 200
    answer_html = soup(await response.text())
    panel = answer_html.select_one("#consolidation")
    assert [d["data-state"] for d in panel.select("[data-draft]")] == ["confirmed", "ready"]
    assert "已确认 1 条草稿" in panel.select_one("[data-organise-result]").get_text()
    region = answer_html.select_one("#memories-main")
    assert region["hx-swap-oob"] == "true"
    listed = rows(region)
    assert listed[0]["content"] == "和阿杰在公园野餐，吃了三明治和西瓜"
    assert listed[0]["layer"] == 2 and listed[0]["title"] == "野餐"
    assert answer_html.select_one("#candidates")["hx-swap-oob"] == "true"
    event = (await db_rows(client, "layer = 2"))[0]
    assert (event["content"], event["title"], event["importance"]) == (
        "和阿杰在公园野餐，吃了三明治和西瓜", "野餐", 8)
    assert sorted(event["merged_from"]) == ids[:2]
    assert [(await row(client, i))["is_active"] for i in ids] == [False, False, True]


async def test_confirm_all_leaves_out_skipped_and_core_drafts(make_client: Any,
                                                              upstream: FakeUpstream) -> None:
    client = await organiser(make_client)
    core = await add(client, "对花生过敏", at=f"{DAY}T01:00:00+08:00", layer=3, importance=9)
    plain = [await add(client, f"普通的事 {n}", at=f"{DAY}T0{n + 2}:00:00+08:00")
             for n in range(4)]
    # A selection may hold any layer (a date range only takes fragments and events).
    await post(client, "/dashboard/memories/organise",
               [("ids", str(i)) for i in (core, *plain)])
    answer(upstream, [group("对花生过敏，餐厅里问过", [1, 2]), group("普通的事 A", [3, 4]),
                      group("普通的事 B", [5])])
    await run_jobs(client)
    panel = await panel_of(client)
    drafts = panel.select("[data-draft]")
    assert drafts[0].select_one("[data-includes-core]") is not None
    assert drafts[0].select_one("input[name=core-1]") is not None
    response = await post(client, "/dashboard/memories/drafts",
                          drafts_form(panel, **{"skip-3": "1", "confirm": "all"}))
    panel = soup(await response.text()).select_one("#consolidation")
    assert [d["data-state"] for d in panel.select("[data-draft]")] == [
        "ready", "confirmed", "ready"]
    assert panel.select_one("input[name=skip-3]").has_attr("checked")  # the choice is kept
    assert (await row(client, core))["is_active"] is True

    # The core draft on its own: refused until its box is ticked.
    response = await post(client, "/dashboard/memories/drafts",
                          drafts_form(panel, confirm="1"))
    assert response.status == 409
    panel = soup(await response.text()).select_one("#consolidation")
    assert "勾选" in panel.select_one('[data-draft="1"] [data-draft-result]').get_text()
    response = await post(client, "/dashboard/memories/drafts",
                          drafts_form(panel, **{"confirm": "1", "core-1": "1"}))
    assert response.status == 200
    assert (await row(client, core))["is_active"] is False
    merged = await db_rows(client, "%s = ANY(merged_from)", (core,))
    assert merged[0]["layer"] == 3 and sorted(merged[0]["merged_from"]) == [core, plain[0]]


async def test_a_changed_source_makes_its_draft_stale(make_client: Any,
                                                      upstream: FakeUpstream) -> None:
    client = await organiser(make_client)
    ids = await picnic(client)
    panel = await drafts_for_day(client, upstream, [group("野餐和下雨", [1, 2, 3])])
    await sql(client, "UPDATE memories SET content = '其实去了海边' WHERE id = %s", (ids[1],))
    # The list's view comes from #view-state (htmx includes it): the list stays on its tab.
    response = await post(client, "/dashboard/memories/drafts",
                          [*drafts_form(panel, confirm="1"), ("status", "archived")])
    assert response.status == 409
    answer_html = soup(await response.text())
    assert answer_html.select_one("#memories-main")["data-status"] == "archived"
    panel = answer_html.select_one("#consolidation")
    draft = panel.select_one('[data-draft="1"]')
    assert draft["data-state"] == "stale"
    assert "变化" in draft.select_one("[data-draft-result]").get_text()
    assert await db_rows(client, "layer = 2") == []


async def test_typing_errors_stay_in_the_draft(make_client: Any, upstream: FakeUpstream) -> None:
    client = await organiser(make_client)
    await picnic(client)
    panel = await drafts_for_day(client, upstream, [group("野餐", [1, 2, 3])])
    response = await post(client, "/dashboard/memories/drafts",
                          drafts_form(panel, **{"content-1": "  ", "title-1": "改过的标题",
                                                "confirm": "1"}))
    assert response.status == 400
    draft = soup(await response.text()).select_one('[data-draft="1"]')
    assert "不能为空" in draft.select_one('[data-error="content"]').get_text()
    assert draft.select_one("input[name=title-1]")["value"] == "改过的标题"
    assert await db_rows(client, "layer = 2") == []


async def test_start_refusals_are_explained(make_client: Any, upstream: FakeUpstream) -> None:
    client = await organiser(make_client)
    ids = await picnic(client)
    archived = await add(client, "已归档", active=False)
    cases = (
        ({"ids": [str(ids[0]), str(archived)]}, 400, "已归档"),
        ({"ids": [str(ids[0])]}, 400, "至少勾选 2 条"),
        ({"date_from": "2024-01-01", "date_to": "2024-01-02"}, 400, "没有可以整理"),
        ({"date_from": "2025-03-02", "date_to": "2025-03-01"}, 400, "早于"),
        ({"date_from": "昨天", "date_to": DAY}, 400, "起止日期"),
    )
    for data, status, text in cases:
        fields = [(name, value) for name, values in data.items()
                  for value in (values if isinstance(values, list) else [values])]
        response = await post(client, "/dashboard/memories/organise", fields)
        assert response.status == status, data
        panel = soup(await response.text()).select_one("#consolidation")
        assert text in panel.select_one("[data-organise-problem]").get_text(), data
    await post(client, "/dashboard/memories/organise", [("ids", str(i)) for i in ids])
    response = await post(client, "/dashboard/memories/organise", [("ids", str(i)) for i in ids])
    assert response.status == 409
    assert "正在进行" in soup(await response.text()).select_one(
        "[data-organise-problem]").get_text()

    # Cancelling the queued run says so.
    response = await post(client, "/dashboard/memories/organise/cancel", {})
    panel = soup(await response.text()).select_one("#consolidation")
    assert panel["data-consolidation-status"] == "failed"
    assert "已取消" in panel.select_one("[data-organise-failed]").get_text()


async def test_a_failed_run_is_explained(make_client: Any, upstream: FakeUpstream) -> None:
    client = await organiser(make_client)
    await picnic(client)
    await post(client, "/dashboard/memories/organise", {"date_from": DAY, "date_to": DAY})
    upstream.reply_error(400, "no such model")
    await run_jobs(client)
    panel = await panel_of(client)
    assert "MEMORY_MODEL" in panel.select_one("[data-organise-failed]").get_text()
    assert [r["is_active"] for r in await db_rows(client)] == [True, True, True]


async def test_without_script_the_start_redirects_and_confirm_renders_the_page(
        make_client: Any, upstream: FakeUpstream) -> None:
    client = await organiser(make_client)
    await picnic(client)
    response = await post(client, "/dashboard/memories/organise",
                          {"date_from": DAY, "date_to": DAY}, hx=False)
    assert response.status == 303
    assert response.headers["Location"] == "/dashboard/memories#consolidation"
    answer(upstream, [group("野餐", [1, 2, 3])])
    await run_jobs(client)
    page = await page_of(client)
    fields = drafts_form(page.select_one("#consolidation"), confirm="all")
    response = await post(client, "/dashboard/memories/drafts", fields, hx=False)
    assert response.status == 200
    page = soup(await response.text())
    assert page.select_one("h1").get_text(strip=True) == "记忆管理"
    assert page.select_one('[data-draft="1"]')["data-state"] == "confirmed"
    assert rows(page)[0]["content"] == "野餐"


async def test_manual_merge_dialog_then_sources_and_revert(make_client: Any) -> None:
    client = await organiser(make_client)
    ids = await picnic(client)
    response = await post(client, "/dashboard/memories/merge/form",
                          [("status", "active"), *(("ids", str(i)) for i in ids)])
    assert response.status == 200
    dialog = soup(await response.text()).select_one("#merge-slot dialog[data-autoshow]")
    assert dialog.select_one("textarea[name=content]").get_text() == (
        "周六和阿杰去公园野餐\n野餐带了三明治和西瓜\n回家路上下起了小雨")
    assert [o["value"] for o in dialog.select("select[name=to_layer] option")] == ["2", "3"]
    fields = dict(form_fields(dialog.select_one("form")))
    fields.update(content="周六野餐，回家时下雨", title="野餐", importance="7", to_layer="2")
    sent = [(k, v) for k, v in fields.items() if k != "ids"] + [("ids", str(i)) for i in ids]
    response = await post(client, "/dashboard/memories/merge", sent)
    assert response.status == 200
    answer_html = soup(await response.text())
    assert "已合并 3 条记忆" in answer_html.select_one("[data-result=notice]").get_text()
    assert answer_html.select_one("#merge-slot")["hx-swap-oob"] == "true"
    assert answer_html.select_one("#merge-slot dialog") is None  # the dialog closes
    [merged] = await db_rows(client, "layer = 2")
    assert (merged["content"], sorted(merged["merged_from"])) == ("周六野餐，回家时下雨", ids)

    page = await page_of(client)
    shown = rows(page)[0]
    assert shown["content"] == "周六野餐，回家时下雨"
    response = await client.get("/dashboard/memories/sources", headers=htmx(client),
                                params={"id": str(merged["id"]), "n": "1", "status": "active"})
    panel = soup(await response.text())
    assert [s.select_one(".version-content").get_text() for s in panel.select("[data-source]")
            ] == ["周六和阿杰去公园野餐", "野餐带了三明治和西瓜", "回家路上下起了小雨"]
    revert = panel.select_one("form:has([data-action=revert])")
    assert revert["hx-confirm"]
    response = await post(client, "/dashboard/memories/revert",
                          {"status": "active", "id": str(merged["id"])})
    assert response.status == 200
    assert "3 条来源已恢复" in notice(soup(await response.text()))[1]
    assert [(await row(client, i))["is_active"] for i in ids] == [True, True, True]
    assert (await row(client, merged["id"]))["is_active"] is False
    response = await post(client, "/dashboard/memories/revert",
                          {"status": "active", "id": str(merged["id"])})
    assert response.status == 409
    assert notice(soup(await response.text()))[0] == "alert"


async def test_merge_refusals_come_back_in_the_dialog(make_client: Any) -> None:
    client = await organiser(make_client)
    core = await add(client, "核心：对花生过敏", layer=3)
    other = await add(client, "在餐厅问了花生")
    response = await post(client, "/dashboard/memories/merge/form", {"ids": str(core)})
    assert response.status == 400
    assert "2 到 50 条" in notice(soup(await response.text()))[1]
    base = [("status", "active"), ("ids", str(core)), ("ids", str(other)),
            ("content", "对花生过敏，在餐厅问过"), ("importance", "9"), ("to_layer", "3")]
    response = await post(client, "/dashboard/memories/merge", base)
    assert response.status == 409
    assert response.headers["HX-Retarget"] == "#merge-slot"
    dialog = soup(await response.text()).select_one("dialog")
    assert "勾选" in dialog.select_one("[data-merge-problem]").get_text()
    assert dialog.select_one("textarea[name=content]").get_text() == "对花生过敏，在餐厅问过"
    response = await post(client, "/dashboard/memories/merge",
                          [*base[:-1], ("to_layer", "2"), ("core_ok", "1")])
    assert response.status == 400
    assert "层级" in soup(await response.text()).select_one('[data-error="layer"]').get_text()
    response = await post(client, "/dashboard/memories/merge", [*base, ("core_ok", "1")])
    assert response.status == 200
    assert (await row(client, core))["is_active"] is False


async def test_core_candidates_and_promote(make_client: Any) -> None:
    client = await organiser(make_client)
    sources = [await add(client, f"来源 {n}", active=False) for n in range(3)]
    event = await add(client, "一起去了三次的海边", layer=2, importance=6)
    await sql(client, "UPDATE memories SET merged_from = %s::bigint[] WHERE id = %s",
              (sources, event))
    await add(client, "普通的事件", layer=2, importance=5)
    page = await page_of(client)
    candidates = page.select("#candidates [data-candidate]")
    assert len(candidates) == 1
    assert "一起去了三次的海边" in candidates[0].get_text()
    assert [r.get_text() for r in candidates[0].select("[data-reason]")] == [
        "由 3 条合并（碎片 3，事件 0）"]
    assert str(event) not in page.select_one("#candidates").get_text(" ")
    response = await post(client, "/dashboard/memories/promote",
                          {"status": "active", "id": str(event)})
    assert response.status == 200
    answer_html = soup(await response.text())
    assert answer_html.select_one("#candidates [data-candidate]") is None
    assert "已升级" in answer_html.select_one("[data-candidates-result]").get_text()
    assert answer_html.select_one("#memories-main")["hx-swap-oob"] == "true"
    assert (await row(client, event))["layer"] == 3
