"""Time for people: the one time-zone helper of the product, and the years a time may have.

Every page, prompt, injected block, usage grouping and export file name shifts UTC by
TIMEZONE_HOURS through these helpers, so nothing shows a second time zone.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any

from pawwake.settings import Settings

MINUTE_FORMAT = "%Y-%m-%d %H:%M"
FILE_STAMP_FORMAT = "%Y%m%d-%H%M%S"
# Dates and times are accepted from year 1000 to 9998 (UTC): far enough from Python's and
# PostgreSQL's edges that no time zone shift or date arithmetic can overflow.
MIN_YEAR = 1000
MAX_YEAR = 9998


def zone_of(settings: Settings) -> timezone:
    """The fixed offset the user chose (TIMEZONE_HOURS may be fractional, e.g. 5.5)."""
    return zone_at(settings.TIMEZONE_HOURS)


def zone_at(hours: float) -> timezone:
    """The fixed offset ``hours`` east of UTC, for callers handed TIMEZONE_HOURS alone."""
    return timezone(timedelta(hours=float(hours)))


def zone_label(zone: timezone) -> str:
    """The zone as people read it next to a time: ``UTC+8``, ``UTC+5:30``, ``UTC-3``, ``UTC``."""
    offset = zone.utcoffset(None)
    minutes = round(offset.total_seconds() / 60)
    if minutes == 0:
        return "UTC"
    sign = "+" if minutes > 0 else "-"
    hours, rest = divmod(abs(minutes), 60)
    return f"UTC{sign}{hours}" + (f":{rest:02d}" if rest else "")


def as_moment(value: Any) -> datetime | None:
    """A timezone-aware datetime from a row value or ISO text; naive values count as UTC."""
    if isinstance(value, str) and value:
        value = datetime.fromisoformat(value)
    if not isinstance(value, datetime):
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def local_minute(moment: Any, zone: timezone) -> str:
    """``YYYY-MM-DD HH:MM`` in the local zone; empty for no time."""
    when = as_moment(moment)
    return when.astimezone(zone).strftime(MINUTE_FORMAT) if when is not None else ""


def zoned_minute(moment: Any, zone: timezone) -> str:
    """``YYYY-MM-DD HH:MM UTC+8``: a local time that says which zone it is in."""
    shown = local_minute(moment, zone)
    return f"{shown} {zone_label(zone)}" if shown else ""


def local_iso(moment: Any, zone: timezone) -> str:
    """ISO 8601 with the local offset, for ``<time datetime=...>``."""
    when = as_moment(moment)
    return when.astimezone(zone).isoformat(timespec="seconds") if when is not None else ""


def local_today(zone: timezone, now: datetime | None = None) -> date:
    return (now or datetime.now(UTC)).astimezone(zone).date()


def day_start_utc(day: date, zone: timezone) -> datetime:
    """The UTC instant at which a local day begins."""
    return datetime.combine(day, datetime.min.time(), zone).astimezone(UTC)


def file_stamp(zone: timezone, now: datetime | None = None) -> str:
    """A local ``YYYYMMDD-HHMMSS`` for download file names."""
    return (now or datetime.now(UTC)).astimezone(zone).strftime(FILE_STAMP_FORMAT)


def date_in_range(day: date) -> bool:
    return MIN_YEAR <= day.year <= MAX_YEAR


def moment_in_range(moment: datetime) -> bool:
    """A time zone-aware time whose UTC date lies within the accepted years."""
    try:
        return date_in_range(moment.astimezone(UTC).date())
    except (OverflowError, ValueError):
        return False
