"""The token usage page: tokens per day by kind of call (a server-drawn SVG bar chart and a
table) and per session."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

from aiohttp import web

from pawwake import keys
from pawwake.chat import conversations as service
from pawwake.dashboard.render import render
from pawwake.db.usage import USAGE_TYPES

DAYS = 30
SESSION_PAGE = 20
CHART_WIDTH, CHART_HEIGHT, BAR_GAP = 600, 160, 4
CHART_TYPES = ("chat", "summary", "extract", "consolidate")
TYPE_KEYS = {"chat": "usage.type_chat", "summary": "usage.type_summary",
             "extract": "usage.type_extract", "consolidate": "usage.type_consolidate"}


def _empty_day(day: date) -> dict[str, Any]:
    return {"day": day, "total": 0, "calls": 0, **{kind: 0 for kind in USAGE_TYPES}}


def daily_totals(rows: list[dict[str, Any]], today: date, days: int = DAYS
                 ) -> list[dict[str, Any]]:
    """One entry per day (gaps filled with zeros), tokens split by usage type."""
    first = today - timedelta(days=days - 1)
    by_day = {first + timedelta(days=i): _empty_day(first + timedelta(days=i))
              for i in range(days)}
    for row in rows:
        entry = by_day.get(row["day"])
        if entry is None:
            continue
        entry[row["usage_type"]] += int(row["total_tokens"] or 0)
        entry["total"] += int(row["total_tokens"] or 0)
        entry["calls"] += int(row["calls"])
    return list(by_day.values())


def chart_bars(days: list[dict[str, Any]]) -> dict[str, Any]:
    """Stacked bar geometry for the SVG: one column a day, one rect per usage type."""
    peak = max((d["total"] for d in days), default=0) or 1
    width = CHART_WIDTH / max(1, len(days))
    columns = []
    for index, entry in enumerate(days):
        bottom = float(CHART_HEIGHT)
        rects = []
        for kind in (*CHART_TYPES, "embed"):
            height = entry[kind] / peak * CHART_HEIGHT
            if height <= 0:
                continue
            bottom -= height
            rects.append({"kind": kind, "y": round(bottom, 2), "height": round(height, 2),
                          "tokens": entry[kind]})
        columns.append({"x": round(index * width + BAR_GAP / 2, 2),
                        "width": round(max(1.0, width - BAR_GAP), 2),
                        "day": entry["day"], "total": entry["total"], "rects": rects})
    return {"width": CHART_WIDTH, "height": CHART_HEIGHT, "columns": columns, "peak": peak}


async def usage(request: web.Request) -> web.Response:
    app = request.match_info.apps[0]
    page = request.query.get("page", "1")
    page_number = int(page) if page.isdigit() and 0 < len(page) < 7 and int(page) > 0 else 1
    days: list[dict[str, Any]] = []
    sessions: list[dict[str, Any]] = []
    total_sessions = 0
    if app[keys.DATABASE] is not None:
        today = datetime.now(UTC).date()
        since = datetime.combine(today - timedelta(days=DAYS - 1), datetime.min.time(), UTC)
        days = daily_totals(await service.usage_by_day(app, since), today)
        total_sessions, sessions = await service.usage_by_session(
            app, SESSION_PAGE, (page_number - 1) * SESSION_PAGE)
    return render(request, "dashboard/usage.html", {
        "days": days, "chart": chart_bars(days), "types": CHART_TYPES, "type_keys": TYPE_KEYS,
        "recent_days": [d for d in reversed(days) if d["calls"]],
        "sessions": sessions, "page": page_number,
        "pages": max(1, -(-total_sessions // SESSION_PAGE)), "days_shown": DAYS,
        "has_usage": any(d["calls"] for d in days) or bool(sessions)})


def setup(dashboard: web.Application) -> None:
    dashboard.router.add_get("/usage", usage, name="usage")
