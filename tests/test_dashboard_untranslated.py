"""No English sentence reaches a Chinese page: every dashboard page, rendered in zh with data
(conversations, usage, a failed job, memories, an import whose scoring failed), is searched
for runs of English words outside code, ids and an allow-list of product names."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from bs4 import BeautifulSoup

from pawwake.db.pool import cursor, execute, fetch_all
from pawwake.services import services_of
from tests.dashboard_support import dashboard_client, htmx, login, same_origin

# Three or more English words in a row: a sentence or a phrase someone forgot to translate.
ENGLISH_RUN = re.compile(r"[A-Za-z][a-z']+(?:[ ,;:]+[A-Za-z][a-z']+){2,}")
# Names that stay as they are in every language (products, protocols, settings).
ALLOWED = ("Pawwake", "OpenRouter", "OpenAI", "Open WebUI", "SillyTavern", "Claude Code",
           "PostgreSQL", "pgvector", "English", "Token", "JSON", "CSV", "API", "HTTP", "htmx")
# Where raw values are shown on purpose: code, ids, the user's own words, form values.
RAW = "code, pre, kbd, script, style, textarea, input, option, [translate=no], .conv-message-text"


def english_runs(html: str) -> list[str]:
    page = BeautifulSoup(html, "html.parser")
    for element in page.select(RAW):
        element.decompose()
    text = page.get_text(" ")
    for name in ALLOWED:
        text = text.replace(name, " ")
    return ENGLISH_RUN.findall(text)


def test_the_detector_finds_english() -> None:
    assert english_runs("<main><p>第 1–3 行：lines 1-3: the scoring answer was bad</p></main>")
    assert not english_runs("<main><p>导入 Pawwake 的 JSON 备份</p><code>the raw value here</code>"
                            "</main>")


async def seed(client: Any) -> None:
    pool = services_of(client.server.app).database.pool
    now = datetime.now(UTC)
    for role, text in (("user", "下个月去京都旅行"), ("assistant", "早上七点到清水寺。")):
        async with cursor(pool) as cur:
            await execute(cur, "INSERT INTO conversations (session_id, role, content, model,"
                          " created_at) VALUES ('kyoto', %s, %s, 'test/model-a', %s)",
                          (role, text, now - timedelta(hours=3)))
    for days, model, cost in ((0, "test/model-a", 0.001), (2, "test/model-b", None)):
        async with cursor(pool) as cur:
            await execute(cur, "INSERT INTO token_usage (session_id, model, prompt_tokens,"
                          " completion_tokens, total_tokens, usage_type, cost, created_at)"
                          " VALUES ('kyoto', %s, 100, 20, 120, 'chat', %s, %s)",
                          (model, cost, now - timedelta(days=days)))
    async with cursor(pool) as cur:
        await execute(cur, "INSERT INTO jobs (kind, status, last_error, attempts)"
                      " VALUES ('extract', 'failed', 'UpstreamFailure', 5)")
        await execute(cur, "INSERT INTO memories (content, importance) VALUES ('用户喜欢乌龙茶', 6)")


@pytest.fixture
async def dash(make_client: Any) -> Any:
    client = await dashboard_client(make_client, JOB_WORKERS=0, MEMORY_ENABLED=True,
                                    MEMORY_MODEL="test/memory-model")
    assert (await login(client)).status == 303
    await seed(client)
    return client


async def test_no_english_on_any_chinese_page(dash: Any) -> None:
    status = BeautifulSoup(await (await dash.get("/dashboard")).text(), "html.parser")
    paths = [a["href"] for a in status.select("nav.mainnav a")]
    paths += ["/dashboard/conversations/view?session=kyoto", "/dashboard/usage?days=90",
              "/dashboard/conversations?trash=1", "/dashboard/memories/organise",
              "/dashboard/memories/backfill", "/dashboard/jobs?status=failed"]
    async with cursor(services_of(dash.server.app).database.pool) as cur:
        memory = (await fetch_all(cur,
                                  "SELECT id FROM memories LIMIT 1"))[0]["id"]
    paths.append(f"/dashboard/memories/{memory}")
    found = {}
    for path in paths:
        response = await dash.get(path)
        assert response.status == 200, path
        if runs := english_runs(await response.text()):
            found[path] = runs
    assert not found, found


@pytest.mark.parametrize("answer", ["这些都很重要。", None])
async def test_import_warnings_are_in_the_page_language(dash: Any, upstream: Any,
                                                        answer: str | None) -> None:
    if answer is None:
        from tests.fake_upstream import Reply
        upstream.queue(Reply(status=500, body={"error": {"message": "boom"}}))
    else:
        upstream.reply_text(answer)
    response = await dash.post("/dashboard/import/text",
                               data={"text": "周末喜欢爬山\n对花生过敏\n家住杭州\n"},
                               headers=htmx(dash))
    assert response.status == 200
    html = await response.text()
    card = BeautifulSoup(html, "html.parser").select_one("[data-report='warnings']")
    assert card is not None and "第 1–3 行" in card.get_text(), html
    assert not english_runs(html), english_runs(html)
    english = await dash.post("/dashboard/import/text",
                              data={"text": "另一行\n"},
                              headers=same_origin(dash, Cookie="pawwake_lang=en"))
    assert english.status == 200
    assert "Lines 1–1: the scoring answer was not a list" in await english.text()


@pytest.mark.parametrize(("field", "value", "words"), [
    ("MAX_MEMORIES_INJECT", "many", "请填写数字"),
    ("MAX_MEMORIES_INJECT", "100000", "不能大于"),
    ("MEMORY_ENABLED", "perhaps", "请选择开或关")])
async def test_refused_settings_are_explained_in_chinese(dash: Any, field: str, value: str,
                                                         words: str) -> None:
    response = await dash.post("/dashboard/settings", headers=htmx(dash),
                               data={"_group": "memory", field: value})
    assert response.status == 400
    html = await response.text()
    assert words in html
    assert not english_runs(html), english_runs(html)


async def test_service_refusals_are_worded_in_chinese(dash: Any) -> None:
    pool = services_of(dash.server.app).database.pool
    purge = await dash.post("/dashboard/conversations/bulk", headers=same_origin(dash),
                            data={"session": "kyoto", "action": "purge", "trash": "1"})
    assert purge.status == 409
    assert "只有回收站里的会话才能永久删除" in await purge.text()
    async with cursor(pool) as cur:
        job = (await fetch_all(cur, "SELECT id FROM jobs"))[0]["id"]
    for expected in (200, 409):
        discard = await dash.post(f"/dashboard/jobs/{job}/discard", headers=same_origin(dash),
                                  data={"status": "failed"})
        assert discard.status == expected
    text = await discard.text()
    assert "任务当前状态是「已放弃」" in text
    for response_text in (await purge.text(), text):
        assert not english_runs(response_text), english_runs(response_text)


async def test_a_failing_model_list_is_explained_in_chinese(dash: Any, upstream: Any) -> None:
    upstream.models_status = 401
    response = await dash.get("/dashboard/models", headers=htmx(dash))
    assert response.status == 502
    html = await response.text()
    assert "返回了 HTTP 401" in html
    assert not english_runs(html), english_runs(html)
