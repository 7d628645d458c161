"""What the memories page shows: the view asked for (status, layer, page, search) and its rows.

Pure helpers, no I/O: parsing the view from a query string or a form, numbering rows (the
page shows row numbers, never database ids) and formatting dates in the configured zone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import date, datetime, timezone
from typing import Any

from pawwake.dashboard.refusals import PageRefusal
from pawwake.local_time import zone_of as zone_of
from pawwake.local_time import zoned_minute  # one formatter for every page
from pawwake.text.numbers import number_or_text, whole_number

PAGE_SIZE = 30
SEARCH_LIMIT = 50
MAX_QUERY_CHARS = 2000
MAX_PAGE = 100_000
LAYERS = (1, 2, 3)
LAYER_KEYS = {1: "fragment", 2: "event", 3: "core"}
STATUSES = ("active", "archived")
SEARCH_MODES = ("keyword", "semantic")


@dataclass(frozen=True)
class View:
    """One state of the list: which rows, which page, and the search if there is one."""

    status: str = "active"
    layer: int | None = None
    page: int = 1
    q: str = ""
    mode: str = ""  # "" lists rows; "keyword" or "semantic" searches active memories

    @property
    def active(self) -> bool:
        return self.status == "active"

    @property
    def searching(self) -> bool:
        return bool(self.q) and self.active

    def query(self, **changes: Any) -> dict[str, str]:
        """GET parameters for this view (search text never goes into a URL)."""
        view = replace(self, **changes) if changes else self
        params = {"status": view.status}
        if view.layer is not None:
            params["layer"] = str(view.layer)
        if view.page > 1:
            params["page"] = str(view.page)
        return params

    def listing(self) -> View:
        """The same rows without the search."""
        return replace(self, q="", mode="")


def _one(values: Mapping[str, Any], name: str) -> str:
    value = values.get(name, "")
    return value.strip() if isinstance(value, str) else ""


def parse_view(values: Mapping[str, Any]) -> View:
    """A view from a query string or a form; missing values take their defaults."""
    status = _one(values, "status") or "active"
    if status not in STATUSES:
        raise PageRefusal("memories.bad_status")
    layer_text = _one(values, "layer")
    layer = None
    if layer_text:
        if layer_text not in {str(n) for n in LAYERS}:
            raise PageRefusal("memories.bad_layer")
        layer = int(layer_text)
    page_text = _one(values, "page") or "1"
    page = whole_number(page_text)
    if page is None or not 1 <= page <= MAX_PAGE:
        raise PageRefusal("memories.bad_page")
    raw_q = values.get("q", "")
    q = raw_q.strip() if isinstance(raw_q, str) else ""
    if len(q) > MAX_QUERY_CHARS:
        raise PageRefusal("memories.query_too_long")
    mode = _one(values, "mode")
    if mode and mode not in SEARCH_MODES:
        raise PageRefusal("memories.bad_mode")
    if q and not mode:
        mode = "keyword"
    return View(status=status, layer=layer, page=page, q=q if mode else "",
                mode=mode if q else "")


def page_count(total: int) -> int:
    return max(1, -(-total // PAGE_SIZE))


def _as_date(value: Any) -> date | None:
    """A date from a row (a ``date``, or ISO text as the API's JSON shapes carry it)."""
    if isinstance(value, str) and value:
        return date.fromisoformat(value[:10])
    return value if isinstance(value, date) else None


def _as_moment(value: Any) -> datetime | None:
    if isinstance(value, str) and value:
        return datetime.fromisoformat(value)
    return value if isinstance(value, datetime) else None


def local_day(memory: Mapping[str, Any], zone: timezone) -> tuple[str, str]:
    """(``YYYY-MM-DD``, "event" | "created"): the event's date when known, else creation day."""
    event = _as_date(memory.get("event_date"))
    if event is not None:
        return event.isoformat(), "event"
    created = _as_moment(memory.get("created_at"))
    if created is not None:
        return created.astimezone(zone).date().isoformat(), "created"
    return "", "created"


def row_view(memory: Mapping[str, Any], number: int, zone: timezone, *,
             score: float | None = None, parts: Mapping[str, float] | None = None,
             similarity: float | None = None) -> dict[str, Any]:
    """One row as the templates show it; ``id`` is only used in form values."""
    day, day_kind = local_day(memory, zone)
    return {
        "n": number,
        "id": int(memory["id"]),
        "content": memory["content"],
        "title": memory.get("title"),
        "layer": int(memory["layer"]),
        "layer_key": LAYER_KEYS[int(memory["layer"])],
        "importance": int(memory["importance"]),
        "day": day,
        "day_kind": day_kind,
        "reminder": zoned_minute(memory.get("remind_at"), zone),
        "reminder_delivered": memory.get("reminder_delivered_at") is not None,
        "is_active": bool(memory.get("is_active", True)),
        "superseded": memory.get("superseded_by") is not None,
        "merged_count": len(memory.get("merged_from") or ()),
        "score": score,
        "parts": dict(parts) if parts else None,
        "similarity": similarity,
    }


def layer_counts(stats: Mapping[str, Any], status: str) -> dict[int | None, int]:
    """Counts per layer (and None for all layers) for one status, from ``layer_stats``."""
    counts: dict[int | None, int] = {None: int(stats[status])}
    for item in stats["layers"]:
        counts[int(item["layer"])] = int(item[status])
    return counts


def form_edit_values(form: Mapping[str, Any]) -> dict[str, Any]:
    """Edit fields as ``fields.parse_edit`` expects them: numbers made ints when they are."""
    values: dict[str, Any] = {}
    # The layer travels as "to_layer": "layer" names the list's layer tab in the same form.
    for name, field in (("content", "content"), ("title", "title"),
                        ("importance", "importance"), ("layer", "to_layer")):
        if field not in form:
            continue
        raw = form[field]
        text = raw.replace("\r\n", "\n") if isinstance(raw, str) else raw
        if name in ("importance", "layer") and isinstance(text, str):
            stripped = text.strip()
            values[name] = number_or_text(stripped)
        else:
            values[name] = text
    return values
