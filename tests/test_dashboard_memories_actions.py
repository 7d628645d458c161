"""Writes on the memories page: row actions, bulk actions, cleanup and the backfill panel."""

from __future__ import annotations

from typing import Any

from pawwake.db.pool import cursor, fetch_all
from pawwake.services import services_of
from tests.dashboard_memories_support import (
    embedding_settings,
    form_fields,
    notice,
    page_of,
    post,
    rows,
    signed_in,
    soup,
    tab_counts,
)
from tests.embedding_server import serve_embeddings
from tests.memory_fixtures import insert_memory
from tests.memory_support import create, merge, row, sql, supersede
from tests.memory_support import rows as db_rows

ACTIVE = {"status": "active", "layer": "", "page": "1"}
ARCHIVED = {"status": "archived", "layer": "", "page": "1"}


async def test_archive_and_restore_a_row(make_client: Any) -> None:
    client = await signed_in(make_client)
    kept = (await create(client, "留在有效列表里"))["id"]
    gone = (await create(client, "这一条会被归档"))["id"]
    response = await post(client, "/dashboard/memories/action",
                          {**ACTIVE, "op": "archive", "id": str(gone), "n": "1"})
    assert response.status == 200
    page = soup(await response.text())
    assert notice(page) == ("notice", "第 1 条已归档。")
    assert [r["id"] for r in rows(page)] == [kept]
    assert tab_counts(page)["archived"] == 1 and tab_counts(page)["active"] == 1
    assert (await row(client, gone))["is_active"] is False

    response = await post(client, "/dashboard/memories/action",
                          {**ARCHIVED, "op": "restore", "id": str(gone), "n": "1"})
    page = soup(await response.text())
    assert notice(page) == ("notice", "第 1 条已恢复。")
    assert rows(page) == [] and page.select_one("[data-empty]") is not None
    assert (await row(client, gone))["is_active"] is True

    # Archiving twice is refused, in the row, with 409; htmx is told where the row is.
    await post(client, "/dashboard/memories/action",
               {**ACTIVE, "op": "archive", "id": str(gone), "n": "2"})
    response = await post(client, "/dashboard/memories/action",
                          {**ACTIVE, "op": "archive", "id": str(gone), "n": "2"})
    assert response.status == 409
    assert response.headers["HX-Retarget"] == "#memory-row-2"
    [refused] = rows(soup(await response.text()))
    assert refused["n"] == 2 and "已经归档" in refused["message"].get_text()


async def test_plain_form_archive_renders_the_page(make_client: Any) -> None:
    client = await signed_in(make_client)
    made = (await create(client, "普通表单也能归档"))["id"]
    response = await post(client, "/dashboard/memories/action",
                          {**ACTIVE, "op": "archive", "id": str(made), "n": "1"}, hx=False)
    assert response.status == 200
    page = soup(await response.text())
    assert page.select_one("h1").get_text(strip=True) == "记忆管理"
    assert notice(page) == ("notice", "第 1 条已归档。")
    response = await post(client, "/dashboard/memories/action",
                          {**ACTIVE, "op": "archive", "id": str(made), "n": "1"}, hx=False)
    assert response.status == 409
    assert notice(soup(await response.text()))[0] == "alert"


async def test_permanent_delete_asks_first_and_explains_refusals(make_client: Any) -> None:
    client = await signed_in(make_client)
    plain = (await create(client, "可以删掉的旧记忆"))["id"]
    source = (await create(client, "合并前的碎片"))["id"]
    merged = (await create(client, "合并后的事件"))["id"]
    active = (await create(client, "还在用的记忆"))["id"]
    await merge(client, merged, [source])
    await sql(client, "UPDATE memories SET is_active = false WHERE id = %s", (plain,))

    # Without script: a confirmation page that re-posts the same request with confirmed=1.
    response = await post(client, "/dashboard/memories/action",
                          {**ARCHIVED, "op": "delete", "id": str(plain), "n": "2"}, hx=False)
    assert response.status == 200
    page = soup(await response.text())
    confirm = page.select_one("[data-confirm-page]")
    assert "可以删掉的旧记忆" in confirm.get_text()
    fields = dict(form_fields(confirm.select_one("form")))
    assert fields == {**fields, "op": "delete", "id": str(plain), "confirmed": "1",
                      "status": "archived"}
    assert await row(client, plain) is not None
    response = await post(client, "/dashboard/memories/action", fields, hx=False)
    assert response.status == 200
    assert notice(soup(await response.text())) == ("notice", "第 2 条已永久删除。")
    assert await row(client, plain) is None

    for memory_id, text in ((source, "合并记忆的来源"), (active, "只有已归档")):
        response = await post(client, "/dashboard/memories/action", {
            **ARCHIVED, "op": "delete", "id": str(memory_id), "n": "1", "confirmed": "1"})
        assert response.status == 409
        assert text in rows(soup(await response.text()))[0]["message"].get_text()
        assert await row(client, memory_id) is not None


async def test_bulk_actions_report_real_counts(make_client: Any) -> None:
    client = await signed_in(make_client)
    ids = [(await create(client, f"批量记忆 {n}"))["id"] for n in range(5)]
    await sql(client, "UPDATE memories SET is_active = false WHERE id = %s", (ids[0],))

    response = await post(client, "/dashboard/memories/bulk",
                          [*ACTIVE.items(), ("action", "archive"),
                           *(("ids", str(i)) for i in ids[:3])])
    assert response.status == 200
    page = soup(await response.text())
    assert notice(page) == ("notice", "已归档 2 条；跳过 1 条（本来就已归档 1）")
    assert tab_counts(page)["archived"] == 3

    response = await post(client, "/dashboard/memories/bulk",
                          [*ACTIVE.items(), ("action", "layer"), ("to_layer", "2"),
                           *(("ids", str(i)) for i in ids[2:])])
    assert notice(soup(await response.text())) == ("notice", "已修改 3 条的层级")
    assert [r["layer"] for r in await db_rows(client, "id = ANY(%s)", (ids[2:],))] == [2, 2, 2]

    # Bulk delete: chain members and merge sources are kept, and the report says so.
    await supersede(client, ids[1], ids[4])
    await merge(client, ids[3], [ids[2]])
    response = await post(client, "/dashboard/memories/bulk",
                          [*ARCHIVED.items(), ("action", "delete"), ("confirmed", "1"),
                           *(("ids", str(i)) for i in ids)])
    text = notice(soup(await response.text()))[1]
    assert text == "已永久删除 1 条；跳过 4 条（合并来源 1，未归档 2，版本链成员 1）"
    assert await row(client, ids[0]) is None
    assert len(await db_rows(client)) == 4

    response = await post(client, "/dashboard/memories/bulk",
                          [*ARCHIVED.items(), ("action", "restore"), ("ids", str(ids[1]))])
    assert notice(soup(await response.text())) == (
        "notice", "已恢复 0 条；跳过 1 条（已被新版本替代 1）")


async def test_bulk_delete_without_script_confirms_first(make_client: Any) -> None:
    client = await signed_in(make_client)
    ids = [(await create(client, f"要删除的 {n}"))["id"] for n in range(2)]
    await sql(client, "UPDATE memories SET is_active = false")
    response = await post(client, "/dashboard/memories/bulk",
                          [*ARCHIVED.items(), ("action", "delete"),
                           *(("ids", str(i)) for i in ids)], hx=False)
    page = soup(await response.text())
    confirm = page.select_one("[data-confirm-page]")
    assert "2 条" in confirm.get_text()
    assert [li.get_text() for li in confirm.select(".confirm-items li")] == ["要删除的 0",
                                                                            "要删除的 1"]
    assert len(await db_rows(client)) == 2
    response = await post(client, "/dashboard/memories/bulk",
                          form_fields(confirm.select_one("form")), hx=False)
    assert notice(soup(await response.text())) == ("notice", "已永久删除 2 条")
    assert await db_rows(client) == []


async def test_bulk_input_errors(make_client: Any) -> None:
    client = await signed_in(make_client)
    made = (await create(client, "一条"))["id"]
    response = await post(client, "/dashboard/memories/bulk", {**ACTIVE, "action": "archive"})
    assert response.status == 400
    assert notice(soup(await response.text())) == ("alert", "请先勾选要操作的记忆。")
    response = await post(client, "/dashboard/memories/bulk",
                          {**ACTIVE, "action": "layer", "to_layer": "9", "ids": str(made)})
    assert response.status == 400
    response = await post(client, "/dashboard/memories/bulk",
                          {**ACTIVE, "action": "explode", "ids": str(made)})
    assert response.status == 400
    response = await post(client, "/dashboard/memories/bulk",
                          {**ACTIVE, "action": "archive", "ids": "1; DROP"})
    assert response.status == 400
    assert (await row(client, made))["is_active"] is True


async def test_cleanup_of_old_archived_fragments(make_client: Any) -> None:
    client = await signed_in(make_client)
    old = [(await create(client, f"很久以前的碎片 {n}"))["id"] for n in range(3)]
    recent = (await create(client, "最近才归档的碎片"))["id"]
    merged = (await create(client, "合并后的事件"))["id"]
    await merge(client, merged, [old[2]])
    await sql(client, "UPDATE memories SET is_active = false, archived_at = now() - interval"
                      " '40 days' WHERE id = ANY(%s)", (old,))
    await sql(client, "UPDATE memories SET is_active = false, archived_at = now() WHERE id = %s",
              (recent,))
    page = await page_of(client, status="archived")
    assert page.select_one(".memory-cleanup input[name=days]")["value"] == "30"

    response = await post(client, "/dashboard/memories/cleanup", {**ARCHIVED, "days": "30"},
                          hx=False)
    confirm = soup(await response.text()).select_one("[data-confirm-page]")
    assert "30 天" in confirm.get_text()
    assert len(await db_rows(client)) == 5

    response = await post(client, "/dashboard/memories/cleanup",
                          {**ARCHIVED, "days": "30", "confirmed": "1"})
    page = soup(await response.text())
    assert notice(page)[1] == ("清理完成：删除 3 条归档超过 30 天的碎片，其中 1 条是合并来源，"
                               "1 条合并记忆因此不能再撤回；保留 0 条版本链成员。")
    report = {dd["data-report"]: dd.get_text() for dd in page.select("[data-report]")}
    assert report == {"deleted": "3", "sources": "1", "merges": "1", "chain": "0"}
    assert {r["id"] for r in await db_rows(client)} == {recent, merged}

    for days in ("-1", "abc", "99999"):
        response = await post(client, "/dashboard/memories/cleanup",
                              {**ARCHIVED, "days": days, "confirmed": "1"})
        assert response.status == 400, days


async def test_backfill_panel_starts_polls_and_finishes(make_client: Any,
                                                        aiohttp_server: Any) -> None:
    fake = await serve_embeddings(aiohttp_server)
    client = await signed_in(make_client, **embedding_settings(fake))
    for n in range(4):  # stored without asking for vectors, as rows from before an upgrade
        await insert_memory(services_of(client.server.app).database.pool,
                            f"需要向量的记忆 {n}")
    response = await client.get("/dashboard/memories/backfill", headers={"HX-Request": "true"})
    panel = soup(await response.text()).select_one("#backfill")
    assert panel["data-backfill-status"] == "idle"
    assert panel.get("hx-trigger") is None
    assert panel.select_one("[data-backfill-progress]").get_text() == "0 / 4"

    response = await post(client, "/dashboard/memories/backfill", {})
    assert response.status == 200
    panel = soup(await response.text()).select_one("#backfill")
    assert panel["data-backfill-status"] == "queued"
    assert panel["hx-trigger"] == "every 1s"  # polls itself while the job is unfinished
    assert panel["hx-get"] == "/dashboard/memories/backfill"

    await services_of(client.server.app).jobs.run_until_idle()
    response = await client.get("/dashboard/memories/backfill", headers={"HX-Request": "true"})
    panel = soup(await response.text()).select_one("#backfill")
    assert panel["data-backfill-status"] == "done"
    assert panel.get("hx-trigger") is None  # polling stops
    assert panel.select_one("[data-backfill-progress]").get_text() == "4 / 4"
    assert panel.select_one("progress")["value"] == "4"

    # Without htmx the start redirects to the page, where the panel shows the state.
    response = await post(client, "/dashboard/memories/backfill", {}, hx=False)
    assert response.status == 303
    assert response.headers["Location"] == "/dashboard/memories#backfill"


async def test_backfill_panel_counts_written_questions_apart(make_client: Any,
                                                              aiohttp_server: Any) -> None:
    """One job embeds the memories, then the questions the memory model wrote: the panel
    names which count it shows, and "complete" waits for both."""
    fake = await serve_embeddings(aiohttp_server)
    client = await signed_in(make_client, **embedding_settings(fake))
    pool = services_of(client.server.app).database.pool
    first = await insert_memory(pool, "用户的狗叫豆豆，是一只柯基")
    await insert_memory(pool, "用户喜欢听爵士乐")
    async with cursor(pool) as cur:  # the triggers keep memory_questions in step
        await cur.execute("UPDATE memories SET model_questions = %s WHERE id = %s",
                          (["我的狗叫什么？", "What breed is my dog?", "豆豆是什么品种？"], first))

    async def panel() -> Any:
        response = await client.get("/dashboard/memories/backfill",
                                    headers={"HX-Request": "true"})
        return soup(await response.text()).select_one("#backfill")

    idle = await panel()
    assert idle.select_one("[data-backfill-progress]").get_text() == "0 / 2"
    assert idle.select_one("[data-backfill-questions]").get_text() == (
        "记忆模型写下的问题：已生成向量 0 / 3")

    await post(client, "/dashboard/memories/backfill", {})
    await services_of(client.server.app).jobs.run_until_idle()
    async with cursor(pool) as cur:
        job = (await fetch_all(cur, "SELECT id, progress FROM jobs WHERE kind = 'memory_embed'"
                                    " ORDER BY id DESC LIMIT 1"))[0]
    assert job["progress"] == {"part": "memory question", "done": 3, "total": 3}
    finished = await panel()
    assert finished.select_one("[data-backfill-progress]").get_text() == "2 / 2"
    assert finished.select_one("[data-backfill-questions]").get_text().endswith("3 / 3")

    # Seen while the job is in its question part: the bar counts questions and says so,
    # the memories' own count stays what it is.
    async with cursor(pool) as cur:
        await cur.execute("UPDATE jobs SET status = 'running', progress = %s::jsonb"
                          " WHERE id = %s",
                          ('{"part": "memory question", "done": 1, "total": 3}', job["id"]))
    running = await panel()
    assert running["data-backfill-status"] == "running"
    assert running.select_one("[data-backfill-progress]").get_text() == "问题 1 / 3"
    assert running.select_one("[data-backfill-questions]") is None
    response = await client.get("/api/admin/backfill-memory-embeddings/status")
    status = await response.json()
    assert (status["part"], status["done"], status["total"], status["questions"]) == (
        "questions", 2, 2, {"done": 1, "total": 3})


async def test_backfill_asks_before_rebuilding_for_a_new_provider(make_client: Any,
                                                                  aiohttp_server: Any) -> None:
    fake = await serve_embeddings(aiohttp_server)
    client = await signed_in(make_client, **embedding_settings(fake))
    await create(client, "有旧向量的记忆")
    await services_of(client.server.app).config.update({"EMBEDDING_MODEL": "fake-a"})
    await post(client, "/dashboard/memories/backfill", {})
    await services_of(client.server.app).jobs.run_until_idle()
    await services_of(client.server.app).config.update({"EMBEDDING_MODEL": "fake-b"})

    page = await page_of(client)
    question = page.select_one("[data-needs-rebuild]")
    assert "fake-a" in question.get_text() and "fake-b" in question.get_text()
    response = await post(client, "/dashboard/memories/backfill", {})
    assert response.status == 409
    panel = soup(await response.text())
    assert "确认重建" in panel.select_one("[data-backfill-problem]").get_text()
    response = await post(client, "/dashboard/memories/backfill", {"confirm_rebuild": "1"})
    assert response.status == 200
    assert soup(await response.text()).select_one("#backfill")["data-backfill-status"] == "queued"
    await services_of(client.server.app).jobs.run_until_idle()
    async with cursor(services_of(client.server.app).database.pool) as cur:
        stored = await fetch_all(cur,
                                 "SELECT model FROM memory_embeddings")
    assert stored == [{"model": "fake-b"}]


async def test_backfill_when_vectors_are_off(make_client: Any) -> None:
    client = await signed_in(make_client, MEMORY_VECTOR_ENABLED=False)
    page = await page_of(client)
    assert page.select_one("[data-backfill-off]") is not None
    response = await post(client, "/dashboard/memories/backfill", {})
    assert response.status == 409
    assert "MEMORY_VECTOR_ENABLED" in soup(await response.text()).select_one(
        "[data-backfill-problem]").get_text()
    response = await post(client, "/dashboard/memories/backfill", {}, hx=False)
    assert response.status == 409
    page = soup(await response.text())
    assert page.select_one("h1").get_text(strip=True) == "向量补算"
    assert page.select_one("#backfill [data-backfill-problem]") is not None
