"""Time in recall: the dates a question names, whether it asks "when", and words that place
a message in time.

"What did I cook in March 2024?" / "2024年3月我做了什么菜" asks about messages of that month:
the window is a part of every candidate message's score (in it or not), and the date words
leave the keywords (no stored message says "march 2024" about its own time). Understood: a
month with its year ("March 2024", "2024年3月", "2024-03"), a day ("12 March 2024",
"March 12, 2024", "2024年3月12日", "2024-03-12"), and a month or day without a year
("in March", "3月", "3月12日"), taken as its latest occurrence not after now. Windows are in
the user's time zone (TIMEZONE_HOURS). Relative phrases ("last week") are left to the
semantic part.

A question that asks "when" ("When did Maya move?", "林晓哪天完赛的？") is answered by the
message that pins the event's day, and people pin it with words relative to the moment they
speak ("we moved in this weekend", "昨天跑完了"): such messages get a part of the score
(``rank.TIME_WEIGHT``); their own time gives the answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, timezone

from pawwake.local_time import MAX_YEAR, MIN_YEAR, day_start_utc

MONTHS = {name: number for number, names in enumerate((
    ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",),
    ("june", "jun"), ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"),
    ("october", "oct"), ("november", "nov"), ("december", "dec")), start=1)
    for name in names}
_MONTH = r"(?P<month>" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_YEAR = r"(?P<year>(?:1\d|2\d)\d\d)"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
# Longest forms first: a day with its month and year before a month alone. A bare English
# month needs "in"/"during"/"of" before it ("may" is a verb, "march" a walk).
_PATTERNS = [re.compile(p, re.IGNORECASE) for p in (
    rf"(?<!\d){_YEAR}年(?P<month>[01]?\d)月(?:(?P<day>[0-3]?\d)[日号])?",
    r"(?<![\d年])(?P<month>[01]?\d)月(?:(?P<day>[0-3]?\d)[日号])?",
    rf"(?<!\d){_YEAR}-(?P<month>[01]?\d)(?:-(?P<day>[0-3]?\d))?(?!\d)",
    rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b",
    rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b",
    rf"\b{_MONTH},?\s+{_YEAR}\b",
    rf"\b(?:on\s+)?{_DAY}\s+(?:of\s+)?{_MONTH}\b",
    rf"\b(?:on\s+)?{_MONTH}\s+{_DAY}\b(?!\s*(?:am|pm|:|h\b|hours?|minutes?|days?|years?))",
    rf"\b(?:in|during|of|since|around)\s+(?:early\s+|late\s+|mid-?)?{_MONTH}\b",
)]


@dataclass(frozen=True)
class TimeWindow:
    """[start, end) in UTC, and the words that named it."""

    start: datetime
    end: datetime
    phrase: str

    def holds(self, moment: datetime) -> bool:
        return self.start <= moment < self.end


def _month_number(text: str) -> int:
    return int(text) if text.isdigit() else MONTHS[text.lower().rstrip(".")]


def _window(year: int | None, month: int, day: int | None, zone: timezone, now: datetime,
            phrase: str) -> TimeWindow | None:
    today = now.astimezone(zone).date()
    if not 1 <= month <= 12:
        return None
    if year is None:  # the latest such month (or day) not after today
        year = today.year
        if (month, day or 1) > (today.month, today.day if day else 1):
            year -= 1
    if not MIN_YEAR <= year <= MAX_YEAR:
        return None
    try:
        first = date(year, month, day or 1)
    except ValueError:
        return None
    if day is not None:
        last = first + timedelta(days=1)
    else:
        last = date(year + (month == 12), month % 12 + 1, 1)
    return TimeWindow(day_start_utc(first, zone), day_start_utc(last, zone), phrase)


def find_window(text: str, zone: timezone, now: datetime | None = None
                ) -> TimeWindow | None:
    """The first date the question names, as a window; None when it names none."""
    now = now or datetime.now(UTC)
    for pattern in _PATTERNS:
        for match in pattern.finditer(text):
            parts = match.groupdict()
            if parts.get("day") is not None and not 1 <= int(parts["day"]) <= 31:
                continue
            window = _window(int(parts["year"]) if parts.get("year") else None,
                             _month_number(parts["month"]),
                             int(parts["day"]) if parts.get("day") else None, zone, now,
                             match.group(0))
            if window is not None:
                return window
    return None


def without(text: str, window: TimeWindow | None) -> str:
    """``text`` with the window's words taken out (for its keywords)."""
    if window is None:
        return text
    return " ".join(text.replace(window.phrase, " ").split())


_WHEN = re.compile(
    r"\bwhen\b|\bwhat (?:day|date|time|month|year)\b|\bwhich (?:day|date|month|year)\b"
    r"|\bhow long ago\b|什么时候|哪一?天|几号|几月|哪个月|哪一?年|何时|多久以前", re.IGNORECASE)
_WEEKDAY = r"(?:mon|tues|wednes|thurs|fri|satur|sun)day"
_TIME_WORDS = re.compile(
    r"\b(?:yesterday|today|tonight|tomorrow|earlier today|just now"
    r"|(?:this|last|next) (?:morning|afternoon|evening|night|weekend|week|month|year)"
    rf"|(?:on |last |this |next )?{_WEEKDAY}s?"
    r"|(?:\d+|a|an|one|two|three|four|five|six|few|couple of) (?:days?|weeks?|months?) ago)\b"
    r"|昨天|昨晚|昨日|今天|今晚|今早|今日|明天|前天|上午|下午|中午|早上|晚上|周末|上周|这周"
    r"|本周|下周|上个月|这个月|刚才|刚刚|(?:星期|礼拜)[一二三四五六日天]|周[一二三四五六日]"
    r"|[\d一二三四五六七八九十两几]+天前", re.IGNORECASE)


def asks_when(question: str) -> bool:
    """The question asks when something happened."""
    return _WHEN.search(question) is not None


def mentions_time(text: str) -> bool:
    """The message places something in time relative to when it was said."""
    return _TIME_WORDS.search(text) is not None
