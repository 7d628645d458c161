"""The import and export pages: plain text, backup preview then restore, download, repair."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import FormData

from tests.dashboard_memories_support import (
    first_ids,
    form_fields,
    page_of,
    post,
    signed_in,
    soup,
)
from tests.dashboard_support import htmx, same_origin
from tests.memory_support import create, row, rows, sql


def report_of(page: Any) -> dict[str, str]:
    return {dd["data-report"]: dd.get_text(strip=True)
            for dd in page.select("dd[data-report]")}


async def test_import_page_renders_both_forms(make_client: Any) -> None:
    client = await signed_in(make_client)
    page = await page_of(client, "/dashboard/import")
    assert page.select_one("h1").get_text(strip=True) == "导入记忆"
    text_form = page.select_one("#import-text form")
    assert (text_form["method"], text_form["action"]) == ("post", "/dashboard/import/text")
    assert text_form["enctype"] == "multipart/form-data"
    assert text_form.select_one("input[type=checkbox][name=skip_scoring]") is not None
    backup_form = page.select_one("#import-backup form")
    assert backup_form.select_one("input[name=step]")["value"] == "preview"


async def test_text_import_skipping_the_scoring(make_client: Any, upstream: Any) -> None:
    client = await signed_in(make_client)
    await create(client, "我的猫叫小橘")
    response = await post(client, "/dashboard/import/text", {
        "text": "我的猫叫小橘\n\n妈妈的生日是十月十二号\n喜欢喝乌龙茶\n妈妈的生日是十月十二号\n",
        "skip_scoring": "1"})
    assert response.status == 200
    card = soup(await response.text()).select_one("#import-text")
    assert report_of(card) == {"imported": "2", "skipped": "2", "scored": "0"}
    stored = {r["content"]: r["importance"] for r in await rows(client)}
    assert stored == {"我的猫叫小橘": 5, "妈妈的生日是十月十二号": 5, "喜欢喝乌龙茶": 5}
    assert upstream.requests == []  # no model call when scoring is skipped
    assert card.select_one("input[name=skip_scoring]").has_attr("checked")


async def test_text_import_scored_by_the_model_from_an_uploaded_file(make_client: Any,
                                                                    upstream: Any) -> None:
    client = await signed_in(make_client, MEMORY_MODEL="test/memory-model")
    upstream.reply_text("[8, 3]")
    form = FormData()
    form.add_field("text", "")
    form.add_field("file", "用户对花生过敏\n周末喜欢爬山\n".encode(), filename="seed.txt",
                   content_type="text/plain")
    response = await client.post("/dashboard/import/text", data=form,
                                 headers=same_origin(client))
    assert response.status == 200
    page = soup(await response.text())
    assert page.select_one("h1").get_text(strip=True) == "导入记忆"  # whole page, no htmx
    assert report_of(page) == {"imported": "2", "skipped": "0", "scored": "2"}
    stored = {r["content"]: r["importance"] for r in await rows(client)}
    assert stored == {"用户对花生过敏": 8, "周末喜欢爬山": 3}
    assert upstream.requests[-1].body["model"] == "test/memory-model"


async def test_text_import_errors(make_client: Any) -> None:
    client = await signed_in(make_client)
    response = await post(client, "/dashboard/import/text", {"text": "  \n "})
    assert response.status == 400
    assert "请粘贴文本" in soup(await response.text()).select_one("[role=alert]").get_text()
    form = FormData()
    form.add_field("file", "旧编码".encode("gb18030"), filename="old.txt")
    response = await client.post("/dashboard/import/text", data=form, headers=htmx(client))
    assert response.status == 400
    assert "UTF-8" in soup(await response.text()).select_one("[role=alert]").get_text()
    assert await rows(client) == []


def backup(*memories: dict[str, Any]) -> str:
    return json.dumps({"schema_version": 3, "source_database_id": "elsewhere",
                       "exported_at": "2026-11-01T00:00:00+00:00",
                       "memories": list(memories)}, ensure_ascii=False)


def backup_upload(text: str, step: str = "preview") -> FormData:
    form = FormData()
    form.add_field("step", step)
    form.add_field("file", text.encode(), filename="backup.json",
                   content_type="application/json")
    return form


async def test_backup_restore_previews_then_imports(make_client: Any) -> None:
    client = await signed_in(make_client)
    await first_ids(client)
    existing = (await create(client, "我的猫叫小橘", importance=8))["id"]
    document = backup(
        {"backup_id": 1, "content": "我的猫叫小橘", "importance": 3, "layer": 1},
        {"backup_id": 2, "content": "去年冬天第一次滑雪", "layer": 1, "is_active": False},
        {"backup_id": 3, "content": "冬天学会了滑雪", "layer": 2, "merged_from": [2],
         "event_date": "2025-12-20"})
    response = await client.post("/dashboard/import/backup", data=backup_upload(document),
                                 headers=htmx(client))
    assert response.status == 200
    card = soup(await response.text()).select_one("#import-backup")
    assert card.select_one("[data-backup-report]")["data-backup-report"] == "preview"
    assert report_of(card) == {"imported": "2", "skipped": "1", "conflicts": "1"}
    conflict = card.select_one("[data-conflicts] li").get_text(" ", strip=True)
    assert conflict.startswith("文件第 1 条") and "我的猫叫小橘" in conflict
    assert "importance" in conflict
    assert str(existing) not in card.get_text(" ")
    assert len(await rows(client)) == 1  # a preview writes nothing

    confirm = card.select_one("form:has([data-action=confirm-import])")
    assert "确认导入 2 条" in confirm.get_text()
    fields = dict(form_fields(confirm))
    assert json.loads(fields["backup"]) == json.loads(document)
    response = await post(client, "/dashboard/import/backup", fields)
    card = soup(await response.text()).select_one("#import-backup")
    assert card.select_one("[data-backup-report]")["data-backup-report"] == "done"
    assert report_of(card) == {"imported": "2", "skipped": "1", "conflicts": "1"}
    stored = await rows(client)
    assert [(r["content"], r["layer"], r["is_active"]) for r in stored] == [
        ("我的猫叫小橘", 1, True), ("去年冬天第一次滑雪", 1, False), ("冬天学会了滑雪", 2, True)]
    assert stored[2]["merged_from"] == [stored[1]["id"]]
    assert stored[0]["importance"] == 8  # the stored memory was kept as it was

    # The same file again changes nothing.
    response = await post(client, "/dashboard/import/backup", fields)
    assert report_of(soup(await response.text())) == {"imported": "0", "skipped": "3",
                                                      "conflicts": "1"}
    assert len(await rows(client)) == 3


async def test_broken_backups_are_explained_and_change_nothing(make_client: Any) -> None:
    client = await signed_in(make_client)
    cases = (
        ("{not json", "不是有效的 JSON", None),
        (backup({"backup_id": 1, "content": "", "layer": 1},
                {"backup_id": 2, "content": "好的", "merged_from": [9]}), "备份文件有问题",
         "memories[0]"),
        (json.dumps({"schema_version": 99, "memories": []}), "备份文件有问题", "schema_version"),
    )
    for text, message, problem in cases:
        response = await client.post("/dashboard/import/backup", data=backup_upload(text),
                                     headers=htmx(client))
        assert response.status == 400, text
        card = soup(await response.text())
        assert message in card.select_one("[role=alert]").get_text()
        if problem:
            assert problem in card.select_one("[data-problems]").get_text()
    response = await client.post("/dashboard/import/backup", data=backup_upload("", "import"),
                                 headers=htmx(client))
    assert response.status == 400
    assert await rows(client) == []


async def test_export_downloads_an_attachment(make_client: Any) -> None:
    client = await signed_in(make_client)
    await create(client, "我的猫叫小橘", layer=2, title="猫")
    await create(client, "The user likes oolong tea")
    page = await page_of(client, "/dashboard/export")
    assert page.select_one("[data-export-counts]").get_text(strip=True) == "有效记忆 2 条，已归档 0 条。"
    link = page.select_one("a[data-action=download]")
    assert link["href"] == "/dashboard/export/download"
    response = await client.get(link["href"])
    assert response.status == 200
    disposition = response.headers["Content-Disposition"]
    assert disposition.startswith('attachment; filename="pawwake-memories-')
    assert disposition.endswith('.json"')
    document = json.loads(await response.read())
    assert document["schema_version"] == 3
    assert [(m["content"], m["layer"], m["title"]) for m in document["memories"]] == [
        ("我的猫叫小橘", 2, "猫"), ("The user likes oolong tea", 1, None)]


async def test_export_downloads_the_conversations_too(make_client: Any) -> None:
    client = await signed_in(make_client)
    for session, role, text in (("kyoto", "user", "清水寺那天怎么安排？"),
                                ("kyoto", "assistant", "早上七点到清水寺。"),
                                ("cat", "user", "My cat stopped eating"),
                                ("old", "user", "in the trash")):
        await sql(client, "INSERT INTO conversations (session_id, role, content, deleted_at)"
                  " VALUES (%s, %s, %s, CASE WHEN %s = 'old' THEN now() END)",
                  (session, role, text, session))
    page = await page_of(client, "/dashboard/export")
    counts = page.select_one("[data-export-conversation-counts]").get_text(strip=True)
    assert counts.startswith("2 个会话，共 3 条消息")
    link = page.select_one("a[data-action=download-conversations]")
    response = await client.get(link["href"])
    assert response.status == 200
    assert response.headers["Content-Disposition"].startswith(
        'attachment; filename="pawwake-conversations-')
    sessions = json.loads(await response.read())
    assert {s["session_id"]: [m["content"] for m in s["messages"]] for s in sessions} == {
        "cat": ["My cat stopped eating"], "kyoto": ["清水寺那天怎么安排？", "早上七点到清水寺。"]}
    # the same shape the conversations API takes back
    api = await (await client.get("/api/conversations/export")).json()
    assert api == sessions


async def test_export_refuses_broken_links_and_offers_the_repair(make_client: Any) -> None:
    client = await signed_in(make_client)
    await first_ids(client)
    good = (await create(client, "好好的记忆"))["id"]
    broken = (await create(client, "合并来源已经丢失的事件", layer=2))["id"]
    await sql(client, "UPDATE memories SET merged_from = %s::bigint[] WHERE id = %s",
              ([good, 999_999], broken))
    response = await client.get("/dashboard/export/download")
    assert response.status == 409
    assert "Content-Disposition" not in response.headers
    page = soup(await response.text())
    assert page.select_one("h1").get_text(strip=True) == "导出备份"
    items = page.select("[data-broken-row]")
    assert [item.get_text(" ", strip=True) for item in items] == [
        "合并来源已经丢失的事件 缺少 1 条合并来源"]
    assert "999999" not in page.get_text(" ") and str(broken) not in page.get_text(" ")
    repair = page.select_one("form:has([data-action=repair])")
    assert repair["action"] == "/dashboard/export/repair"
    assert repair["hx-confirm"]

    # Without the confirmation nothing is repaired yet.
    response = await post(client, "/dashboard/export/repair", {}, hx=False)
    assert soup(await response.text()).select_one("[data-confirm-repair]") is not None
    assert (await row(client, broken))["merged_from"] == [good, 999_999]
    response = await post(client, "/dashboard/export/repair", {"confirmed": "1"})
    assert response.status == 200
    panel = soup(await response.text())
    assert "已修复 1 条记忆的关联" in panel.select_one("[data-repaired]").get_text()
    assert (await row(client, broken))["merged_from"] == [good]
    response = await client.get(panel.select_one("a[data-action=download]")["href"])
    assert response.status == 200
    assert len(json.loads(await response.read())["memories"]) == 2
