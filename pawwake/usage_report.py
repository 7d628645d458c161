"""Token usage over a range of local days: totals per day (stacked by kind of call), per model,
in sum, and as CSV rows. Days follow TIMEZONE_HOURS, so "today" is the user's today."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import TYPE_CHECKING, Any

from pawwake.db.pool import cursor
from pawwake.db.usage import USAGE_TYPES, usage_by_local_day
from pawwake.local_time import day_start_utc, local_today, zone_of

if TYPE_CHECKING:
    from pawwake.database import Database
    from pawwake.live_settings import RuntimeConfig

RANGES = (7, 30, 90)
DEFAULT_RANGE = 30
TOKEN_FIELDS = ("prompt_tokens", "completion_tokens", "cached_tokens", "total_tokens")
CSV_COLUMNS = ("date", "model", "kind", "calls", "input_tokens", "output_tokens",
               "cached_tokens", "total_tokens", "cost")


@dataclass
class Totals:
    """Sums over some calls; ``cost`` sums only the calls that reported a price."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    total_tokens: int = 0
    cost: float = 0.0
    priced_calls: int = 0
    by_kind: dict[str, int] = field(default_factory=lambda: dict.fromkeys(USAGE_TYPES, 0))

    def add(self, row: dict[str, Any]) -> None:
        self.calls += int(row["calls"])
        for name in TOKEN_FIELDS:
            setattr(self, name, getattr(self, name) + int(row[name] or 0))
        self.by_kind[row["usage_type"]] += int(row["total_tokens"] or 0)
        if row["cost"] is not None:
            self.cost += float(row["cost"])
        self.priced_calls += int(row["priced_calls"])

    @property
    def has_cost(self) -> bool:
        return self.priced_calls > 0


@dataclass
class UsageReport:
    first_day: date
    last_day: date
    days: list[tuple[date, Totals]]  # every day of the range, oldest first, gaps as zeros
    models: list[tuple[str, Totals]]  # most tokens first
    total: Totals
    rows: list[dict[str, Any]]  # day x model x kind, for CSV


def parse_range(value: str | None) -> int:
    """The requested number of days, one of RANGES; anything else gives the default."""
    return int(value) if value in {str(days) for days in RANGES} else DEFAULT_RANGE


def build_report(rows: list[dict[str, Any]], today: date, days: int) -> UsageReport:
    first = today - timedelta(days=days - 1)
    by_day = {first + timedelta(days=i): Totals() for i in range(days)}
    by_model: dict[str, Totals] = {}
    total = Totals()
    kept = []
    for row in rows:
        bucket = by_day.get(row["day"])
        if bucket is None:  # outside the range (the query starts a little early)
            continue
        kept.append(row)
        bucket.add(row)
        by_model.setdefault(row["model"], Totals()).add(row)
        total.add(row)
    models = sorted(by_model.items(), key=lambda item: (-item[1].total_tokens, item[0]))
    return UsageReport(first, today, list(by_day.items()), models, total, kept)


async def usage_report(database: Database, config: RuntimeConfig, days: int) -> UsageReport:
    """The report for the last ``days`` local days, today included (days as the settings in
    force count them)."""
    settings = config.current()
    zone = zone_of(settings)
    today = local_today(zone)
    since = day_start_utc(today - timedelta(days=days - 1), zone)
    async with cursor(database.pool) as cur:
        rows = await usage_by_local_day(cur, since, settings.TIMEZONE_HOURS)
    return build_report(rows, today, days)


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet may read as a formula


def spreadsheet_text(value: str) -> str:
    """A text cell that a spreadsheet shows as text: a leading ``'`` before anything that
    could start a formula (a client names its model, e.g. ``=cmd|' /C calc'!A0``)."""
    return "'" + value if value.startswith(FORMULA_STARTS) else value


def usage_csv(report: UsageReport) -> str:
    """One line per local day, model and kind of call; cost empty when not reported."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    for row in report.rows:
        cost = "" if row["cost"] is None else format(float(row["cost"]), ".8f").rstrip("0")
        writer.writerow((row["day"].isoformat(), spreadsheet_text(row["model"] or ""),
                         spreadsheet_text(row["usage_type"] or ""),
                         int(row["calls"]), int(row["prompt_tokens"]),
                         int(row["completion_tokens"]), int(row["cached_tokens"]),
                         int(row["total_tokens"]), cost.rstrip(".") if cost else ""))
    return out.getvalue()
