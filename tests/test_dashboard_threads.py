"""The dashboard threads page through real forms and parsed HTML: status, switch, create with
an inherited summary, rename, delete, and the summary editor."""

from __future__ import annotations

from typing import Any

from bs4 import BeautifulSoup

from pawwake.dashboard.i18n import STRINGS
from tests.dashboard_support import PASSWORD, SECRET, login, same_origin
from tests.partition_support import PARTITION, now_turn, say, system


async def _dash(gateway: Any) -> Any:
    client = await gateway(DASHBOARD_PASSWORD=PASSWORD, SESSION_SECRET=SECRET, **PARTITION)
    assert (await login(client)).status == 303
    return client


async def _page(client: Any, **params: str) -> BeautifulSoup:
    resp = await client.get("/dashboard/threads", params=params)
    assert resp.status == 200, await resp.text()
    return BeautifulSoup(await resp.text(), "html.parser")


async def _act(client: Any, status: int = 303, **form: str) -> Any:
    resp = await client.post("/dashboard/threads/action", data=form,
                             headers=same_origin(client), allow_redirects=False)
    assert resp.status == status, await resp.text()
    return resp


async def test_page_shows_status_and_threads(gateway: Any, upstream: Any) -> None:
    client = await _dash(gateway)
    for n in range(1, 4):
        await say(client, upstream, f"问{n}", f"答{n}")
    page = await _page(client)
    assert page.select_one("[data-fact=active]").get_text(strip=True) == "default"
    assert page.select_one("[data-fact=rounds]").get_text(strip=True) == "3"
    assert page.select_one("[data-fact=zones]").get_text(" ", strip=True) == "A 2 · B 1"
    progress = page.select_one("[data-fact=until] progress")
    assert (progress["value"], progress["max"]) == ("3", "4")
    nav = [a.get_text(strip=True) for a in page.select("nav.mainnav a")]
    assert STRINGS["zh"]["nav.threads"] in nav
    assert page.select_one("tr[data-thread=default] [data-action=switch]") is None


async def test_forms_create_switch_rename_edit_and_delete(gateway: Any, upstream: Any) -> None:
    client = await _dash(gateway)
    await say(client, upstream, "旧问", "旧答")
    resp = await _act(client, action="summary_save", thread="default", summary="旧摘要")
    assert "done=summary_saved" in resp.headers["Location"]
    page = await _page(client, summary="default")
    assert page.select_one("textarea[data-summary]").get_text() == "旧摘要"
    await _act(client, action="create", thread="新线", inherit="default")
    await _act(client, action="create", thread="新线", status=409)
    await _act(client, action="switch", thread="新线")
    page = await _page(client, done="switched")
    assert page.select_one("[data-fact=active]").get_text(strip=True) == "新线"
    assert page.select_one("[data-notice]").get_text(strip=True) == \
        STRINGS["zh"]["threads.done_switched"]
    assert await say(client, upstream, "新问", "新答") == [system(None, ["旧摘要"]),
                                                       now_turn("新问")]
    await _act(client, action="delete", thread="新线", status=409)
    await _act(client, action="rename", thread="新线", new_id="工作")
    page = await _page(client)
    assert page.select_one("[data-fact=active]").get_text(strip=True) == "工作"
    await _act(client, action="delete", thread="default")
    page = await _page(client)
    assert [tr["data-thread"] for tr in page.select("tr[data-thread]")] == ["工作"]
    await _act(client, action="summary_clear", thread="工作")
    page = await _page(client)
    assert page.select_one("textarea[data-summary]").get_text() == ""
    await _act(client, action="bogus", status=400)
    await _act(client, action="switch", thread="", status=400)
