"""The token usage page: a 7/30/90-day chart of tokens per local day stacked by kind of call,
input/output/cached sums, a per-model table with reported cost, per-session totals and a CSV
download of the same range."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from pawwake.app_faces import CONFIG, DATABASE, database_of, face_of
from pawwake.conversations import manage as service
from pawwake.dashboard.render import render
from pawwake.dashboard.usage.chart import chart
from pawwake.db.usage import USAGE_TYPES
from pawwake.local_time import file_stamp, zone_of
from pawwake.text.numbers import whole_number
from pawwake.usage_report import RANGES, parse_range, usage_csv, usage_report

SESSION_PAGE = 20
TYPE_KEYS = {kind: f"usage.type_{kind}" for kind in USAGE_TYPES}
SESSION_TYPES = ("chat", "summary", "extract", "consolidate")  # the per-session sums


def money(cost: float) -> str:
    """A reported price in USD: enough decimals that a cheap call does not show as $0.00."""
    if cost >= 1:
        return f"${cost:,.2f}"
    return f"${cost:.4f}" if cost == 0 or cost >= 0.001 else f"${cost:.6f}"


def _page_number(text: str) -> int:
    number = whole_number(text, max_digits=6)
    return number if number else 1


async def usage(request: web.Request) -> web.Response:
    days = parse_range(request.query.get("days"))
    page_number = _page_number(request.query.get("page", "1"))
    context: dict[str, Any] = {
        "days_shown": days, "ranges": RANGES, "types": USAGE_TYPES, "type_keys": TYPE_KEYS,
        "session_types": SESSION_TYPES,
        "money": money, "page": page_number, "pages": 1, "sessions": [], "report": None,
        "has_usage": False}
    if face_of(request, DATABASE) is not None:
        report = await usage_report(database_of(request), face_of(request, CONFIG), days)
        total_sessions, sessions = await service.usage_by_session(database_of(request), SESSION_PAGE,
                                                                  (page_number - 1) * SESSION_PAGE)
        context.update(
            report=report, sessions=sessions,
            chart=chart([(day, totals.by_kind) for day, totals in report.days], USAGE_TYPES),
            recent_days=[(d, t) for d, t in reversed(report.days) if t.calls],
            pages=max(1, -(-total_sessions // SESSION_PAGE)),
            has_usage=bool(report.total.calls) or bool(sessions))
    return render(request, "dashboard/usage.html", context)


async def usage_csv_download(request: web.Request) -> web.Response:
    """The shown range as CSV, one line per local day, model and kind of call."""
    days = parse_range(request.query.get("days"))
    if face_of(request, DATABASE) is None:
        raise web.HTTPNotFound()
    report = await usage_report(database_of(request), face_of(request, CONFIG), days)
    stamp = file_stamp(zone_of(face_of(request, CONFIG).current()))
    return web.Response(text=usage_csv(report), content_type="text/csv", charset="utf-8",
                        headers={"Content-Disposition":
                                 f'attachment; filename="pawwake-usage-{days}d-{stamp}.csv"'})


def setup(dashboard: web.Application) -> None:
    dashboard.router.add_get("/usage", usage, name="usage")
    dashboard.router.add_get("/usage.csv", usage_csv_download, name="usage_csv")
