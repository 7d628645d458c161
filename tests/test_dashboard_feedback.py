"""Feedback where the action was: the selection bar's organise answer next to the bar, the
settings notice by the save button, a failed organise run explained once (not on every later
visit), an empty progress bar at 0 / 0, the persona in force as the SYSTEM_PROMPT placeholder,
and the threads page explaining that partition mode is off."""

from __future__ import annotations

from typing import Any

from pawwake.dashboard.i18n import STRINGS
from tests.consolidation_support import add, run_jobs
from tests.dashboard_memories_support import page_of, post, signed_in, soup
from tests.dashboard_support import PASSWORD, SECRET, htmx, login
from tests.fake_upstream import FakeUpstream
from tests.partition_support import PARTITION

ORGANISE = {"TIMEZONE_HOURS": 8, "MEMORY_MODEL": "test/memory", "MEMORY_VECTOR_ENABLED": False}
DAY = "2025-03-01"


async def picnic(client: Any) -> list[int]:
    return [await add(client, text, at=f"{DAY}T0{n + 1}:00:00+08:00") for n, text in
            enumerate(["周六和阿杰去公园野餐", "野餐带了三明治和西瓜"])]


async def test_organise_from_the_bar_answers_next_to_the_bar(make_client: Any) -> None:
    client = await signed_in(make_client, **ORGANISE)
    ids = await picnic(client)
    bar = (await page_of(client)).select_one("[data-bulk-bar] [data-action=organise]")
    assert bar["hx-target"] == "#bulk-result"

    response = await post(client, "/dashboard/memories/organise",
                          [("ids", str(ids[0])), ("from_bar", "1")])
    assert response.status == 400
    answer = soup(await response.text())
    result = answer.select_one("#bulk-result")
    assert result["data-bulk-result"] == "alert"
    assert "至少勾选 2 条" in result.get_text()
    assert answer.select_one("#consolidation") is None  # the top card is left alone

    response = await post(client, "/dashboard/memories/organise",
                          [*(("ids", str(i)) for i in ids), ("from_bar", "1")])
    assert response.status == 200
    answer = soup(await response.text())
    result = answer.select_one("#bulk-result")
    assert result["data-bulk-result"] == "notice" and "2 条" in result.get_text()
    # The panel still follows the run (out of band), without a message of its own.
    panel = answer.select_one("#consolidation[hx-swap-oob]")
    assert panel["data-consolidation-status"] == "queued"
    assert panel.select_one("[data-organise-problem]") is None


async def test_a_failed_run_is_explained_once_then_cleared(make_client: Any,
                                                          upstream: FakeUpstream) -> None:
    client = await signed_in(make_client, **ORGANISE)
    await picnic(client)
    await post(client, "/dashboard/memories/organise", {"date_from": DAY, "date_to": DAY})
    upstream.reply_error(400, "no such model")
    await run_jobs(client)
    first = await page_of(client)
    assert first.select_one("[data-organise-failed]") is not None
    later = await page_of(client)
    assert later.select_one("[data-organise-failed]") is None
    assert later.select_one("#consolidation")["data-consolidation-status"] == "none"


async def test_empty_embedding_progress_is_shown_empty(make_client: Any) -> None:
    client = await signed_in(make_client, MEMORY_VECTOR_ENABLED=True,
                             EMBEDDING_PROVIDER="local")
    page = await page_of(client)
    assert page.select_one("[data-backfill-progress]").get_text() == "0 / 0"
    progress = page.select_one("#backfill progress")
    assert progress["value"] == "0"


async def test_settings_notice_sits_by_the_save_button(make_client: Any) -> None:
    client = await signed_in(make_client)
    response = await client.post("/dashboard/settings",
                                 data={"_group": "basic", "DEFAULT_MODEL": "test/model-b"},
                                 headers=htmx(client))
    assert response.status == 200
    group = soup(await response.text()).select_one("#group-basic")
    notice = group.select_one("[data-result=saved]")
    assert notice is not None
    assert notice.parent.get("class") == ["group-foot"]
    assert notice.find_next_sibling("button")["type"] == "submit"


async def test_persona_in_force_is_the_system_prompt_placeholder(gateway: Any) -> None:
    client = await gateway(persona="你是小爪，一只温柔的猫。", DASHBOARD_PASSWORD=PASSWORD,
                           SESSION_SECRET=SECRET)
    assert (await login(client)).status == 303
    page = soup(await (await client.get("/dashboard/settings")).text())
    box = page.select_one("textarea[name=SYSTEM_PROMPT]")
    assert box.get_text() == ""
    assert box["placeholder"] == "你是小爪，一只温柔的猫。"


async def test_threads_page_explains_that_partition_mode_is_off(gateway: Any,
                                                              upstream: Any) -> None:
    client = await gateway(DASHBOARD_PASSWORD=PASSWORD, SESSION_SECRET=SECRET)
    assert (await login(client)).status == 303
    for session in ("a", "b"):
        response = await client.post("/v1/chat/completions", headers={"X-Session-Id": session},
                                     json={"messages": [{"role": "user", "content": "你好"}]})
        await response.read()
    page = soup(await (await client.get("/dashboard/threads")).text())
    off = page.select_one("[data-partition-off]")
    assert STRINGS["zh"]["threads.off_title"] in off.get_text()
    assert off.select_one("a[href='/dashboard/settings#group-partition']") is not None
    assert page.select("tr[data-thread]") == []
    assert page.select("[data-action=switch], [data-action=delete]") == []

    client = await gateway(DASHBOARD_PASSWORD=PASSWORD, SESSION_SECRET=SECRET, **PARTITION)
    assert (await login(client)).status == 303
    page = soup(await (await client.get("/dashboard/threads")).text())
    assert page.select_one("[data-partition-off]") is None
    assert page.select_one("[data-fact=active]") is not None
