"""The token usage page and its CSV: local-day grouping, ranges, per-model sums, reported cost
captured from streamed and non-stream replies."""

from __future__ import annotations

import csv
import io
import re
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any

import pytest
from bs4 import BeautifulSoup

from pawwake.dashboard.usage.chart import compact, nice_step
from pawwake.db.pool import cursor, execute, fetch_all
from pawwake.llm.sse import TokenUsage
from pawwake.services import services_of
from pawwake.usage_report import build_report
from tests.dashboard_support import dashboard_client, login
from tests.fake_upstream import Reply, completion_body, text_stream
from tests.gateway_support import chat_body, settle

ZONE = timezone(timedelta(hours=8))


@pytest.fixture
async def dash(make_client: Any) -> Any:
    client = await dashboard_client(make_client, JOB_WORKERS=0, TIMEZONE_HOURS=8)
    assert (await login(client)).status == 303
    return client


def pool_of(client: Any) -> Any:
    return services_of(client.server.app).database.pool


async def add_usage(client: Any, when: datetime, *, model: str = "test/model-a",
                    usage_type: str = "chat", prompt: int = 100, completion: int = 20,
                    cached: int | None = None, cost: float | None = None) -> None:
    async with cursor(pool_of(client)) as cur:
        await execute(cur,
                      "INSERT INTO token_usage (session_id, model, prompt_tokens, completion_tokens,"
                      " total_tokens, cached_tokens, usage_type, cost, created_at)"
                      " VALUES ('s1', %s, %s, %s, %s, %s, %s, %s, %s)",
                      (model, prompt, completion, prompt + completion, cached, usage_type, cost,
                       when))


async def page(client: Any, path: str, lang: str = "zh") -> BeautifulSoup:
    response = await client.get(path, headers={"Cookie": f"pawwake_lang={lang}"})
    assert response.status == 200
    return BeautifulSoup(await response.text(), "html.parser")


def local_today() -> date:
    return datetime.now(UTC).astimezone(ZONE).date()


def utc_at_local(day: date, hour: int, minute: int = 0) -> datetime:
    return datetime(day.year, day.month, day.day, hour, minute, tzinfo=ZONE).astimezone(UTC)


async def test_usage_is_grouped_by_local_day(dash: Any) -> None:
    day = local_today() - timedelta(days=3)
    # 00:10 local is still the previous day in UTC; 23:59 local is the same UTC day;
    # 00:00 local the next day. The user's calendar decides, not UTC's.
    await add_usage(dash, utc_at_local(day, 0, 10), prompt=1, completion=0)
    await add_usage(dash, utc_at_local(day, 23, 59), prompt=2, completion=0)
    await add_usage(dash, utc_at_local(day + timedelta(days=1), 0, 0), prompt=4, completion=0)
    assert utc_at_local(day, 0, 10).date() == day - timedelta(days=1)
    html = await page(dash, "/dashboard/usage?days=7")
    totals = {g["data-day"]: int(g["data-total"]) for g in html.select("svg g.day")}
    assert len(totals) == 7 and max(totals) == local_today().isoformat()
    assert totals[day.isoformat()] == 3
    assert totals[(day + timedelta(days=1)).isoformat()] == 4
    assert totals[(day - timedelta(days=1)).isoformat()] == 0


async def test_ranges_chart_axes_models_and_cost(dash: Any) -> None:
    today = local_today()
    await add_usage(dash, utc_at_local(today, 12), cost=0.0012, cached=40)
    await add_usage(dash, utc_at_local(today - timedelta(days=2), 9), model="test/model-b",
                    prompt=1000, completion=500, cost=0.0034)
    await add_usage(dash, utc_at_local(today - timedelta(days=2), 10), usage_type="extract",
                    prompt=300, completion=30)  # no price reported
    await add_usage(dash, utc_at_local(today - timedelta(days=20), 10), prompt=5, completion=5)
    await add_usage(dash, utc_at_local(today - timedelta(days=60), 10), prompt=7, completion=0)
    for days, calls in (("7", 3), ("30", 4), ("90", 5), ("nonsense", 4)):
        html = await page(dash, f"/dashboard/usage?days={days}", "en")
        assert len(html.select("svg g.day")) == (30 if days == "nonsense" else int(days))
        assert html.select_one("[data-figure='calls']").get_text() == str(calls)
    html = await page(dash, "/dashboard/usage?days=7", "en")
    assert html.select_one(".usage-ranges [aria-current='page']")["data-range"] == "7"
    assert html.select_one("[data-figure='input']").get_text() == "1,400"
    assert html.select_one("[data-figure='output']").get_text() == "550"
    assert html.select_one("[data-figure='cached']").get_text() == "40"
    assert html.select_one("[data-figure='cost']").get_text() == "$0.0046"
    assert "2 calls" in html.select_one("[data-cost-partial]").get_text()
    # axes: round y ticks from 0, a date label under the last day, a hover title per day
    ticks = [t.get_text() for t in html.select("g.axis-y text")]
    assert ticks[0] == "0" and ticks[-1] in {"2K", "2.5K"}
    assert html.select("text.x-label")[-1].get_text() == today.strftime("%m-%d")
    busy = html.select_one(f"g.day[data-day='{(today - timedelta(days=2)).isoformat()}']")
    assert [r["data-kind"] for r in busy.select("rect[data-kind]")] == ["chat", "extract"]
    title = busy.title.get_text()
    assert "Chat: 1,500" in title and "Extraction: 330" in title and "Total: 1,830" in title
    models = {tr["data-model"]: tr for tr in html.select("table[data-table='models'] tbody tr")}
    assert list(models) == ["test/model-b", "test/model-a"]
    assert models["test/model-b"].select_one("[data-cost]").get_text() == "$0.0034"
    assert models["test/model-a"].select_one("[data-cost]").get_text() == "$0.0012"


async def test_csv_export_of_the_range(dash: Any) -> None:
    today = local_today()
    await add_usage(dash, utc_at_local(today, 0, 30), cost=0.25, cached=10)
    await add_usage(dash, utc_at_local(today, 1), model="test/model-b", usage_type="summary")
    await add_usage(dash, utc_at_local(today - timedelta(days=10), 1))
    html = await page(dash, "/dashboard/usage?days=7")
    assert html.select_one("[data-csv]")["href"] == "/dashboard/usage.csv?days=7"
    response = await dash.get("/dashboard/usage.csv?days=7")
    assert response.status == 200 and response.content_type == "text/csv"
    name = re.fullmatch(r'attachment; filename="pawwake-usage-7d-(\d{8})-\d{6}\.csv"',
                        response.headers["Content-Disposition"])
    assert name and name[1] == today.strftime("%Y%m%d")  # the local date, not UTC's
    rows = list(csv.DictReader(io.StringIO(await response.text())))
    assert rows == [
        {"date": today.isoformat(), "model": "test/model-a", "kind": "chat", "calls": "1",
         "input_tokens": "100", "output_tokens": "20", "cached_tokens": "10",
         "total_tokens": "120", "cost": "0.25"},
        {"date": today.isoformat(), "model": "test/model-b", "kind": "summary", "calls": "1",
         "input_tokens": "100", "output_tokens": "20", "cached_tokens": "0",
         "total_tokens": "120", "cost": ""}]
    assert len(list(csv.reader(io.StringIO(
        await (await dash.get("/dashboard/usage.csv?days=30")).text())))) == 4


async def test_csv_needs_a_login(make_client: Any) -> None:
    client = await dashboard_client(make_client, JOB_WORKERS=0)
    response = await client.get("/dashboard/usage.csv", allow_redirects=False)
    assert response.status in (302, 303, 401)


@pytest.mark.parametrize("stream", [True, False])
async def test_reported_cost_is_stored(make_client: Any, upstream: Any, stream: bool) -> None:
    client = await make_client(JOB_WORKERS=0)
    usage = {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60,
             "cost": 0.00042, "is_byok": False}
    if stream:
        upstream.queue(Reply(chunks=text_stream("好的", usage=usage)))
    else:
        upstream.queue(Reply(body=completion_body("好的", usage=usage)))
    response = await client.post("/v1/chat/completions", json=chat_body(stream=stream),
                                 headers={"X-Session-Id": "priced"})
    assert response.status == 200
    await response.read()
    await settle(client)
    async with cursor(pool_of(client)) as cur:
        rows = await fetch_all(cur, "SELECT session_id, total_tokens, cost::float8"
                               " AS cost FROM token_usage")
    assert rows == [{"session_id": "priced", "total_tokens": 60, "cost": 0.00042}]


async def test_no_reported_cost_stays_unknown(make_client: Any, upstream: Any) -> None:
    client = await make_client(JOB_WORKERS=0)
    upstream.queue(Reply(chunks=text_stream("好的")))
    response = await client.post("/v1/chat/completions", json=chat_body(stream=True))
    await response.read()
    await settle(client)
    async with cursor(pool_of(client)) as cur:
        assert [r["cost"] for r in await fetch_all(cur,
                                                   "SELECT cost FROM token_usage")] == [None]


def test_cost_parsing() -> None:
    base = {"prompt_tokens": 1, "completion_tokens": 1}
    assert TokenUsage.from_openai({**base, "cost": 0.5}).cost == 0.5
    assert TokenUsage.from_openai({**base, "cost": 0}).cost == 0.0
    for bad in (None, "0.5", True, -1, float("nan"), float("inf")):
        assert TokenUsage.from_openai({**base, "cost": bad}).cost is None


def test_report_fills_gaps_and_sums_partial_cost() -> None:
    today = date(2026, 12, 1)
    row = {"day": today, "model": "m", "usage_type": "chat", "calls": 2, "prompt_tokens": 3,
           "completion_tokens": 4, "cached_tokens": 0, "total_tokens": 7, "cost": None,
           "priced_calls": 0}
    report = build_report([row, {**row, "usage_type": "embed", "cost": 0.5, "priced_calls": 1},
                           {**row, "day": date(2026, 10, 1)}], today, 7)
    assert report.days[0][0] == date(2026, 11, 25) and len(report.days) == 7
    assert report.total.calls == 4 and report.total.cost == 0.5 and report.total.priced_calls == 1
    assert report.days[-1][1].by_kind["embed"] == 7


def test_axis_helpers() -> None:
    assert [nice_step(p) for p in (0, 3, 9, 1830, 95_000)] == [1, 1, 5, 500, 25_000]
    assert [compact(v) for v in (0, 950, 1200, 12_000, 3_400_000)] == [
        "0", "950", "1.2K", "12K", "3.4M"]


@pytest.mark.parametrize("model", ["=cmd|' /C calc'!A0", "+SUM(1,2)", "-2+3", "@SUM(A1)",
                                   "\tx", "\rx"])
async def test_csv_cells_never_start_a_spreadsheet_formula(dash: Any, model: str) -> None:
    # A client names the model; a spreadsheet must show it as text, never run it.
    await add_usage(dash, utc_at_local(local_today(), 1), model=model)
    response = await dash.get("/dashboard/usage.csv?days=7")
    rows = list(csv.DictReader(io.StringIO(await response.text(), newline="")))
    assert [row["model"] for row in rows] == ["'" + model]
