"""Strict validation of memory fields sent by programs (create, edit, bulk edit, ids).

Each parser returns a clean value or raises FieldError naming the field, so a client learns
exactly what to fix. Booleans are never accepted as numbers.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date, datetime
from typing import Any, cast

from pawwake.api_error import ApiError
from pawwake.db.memory_rows import MemoryChanges, NewMemory
from pawwake.local_time import MAX_YEAR, MIN_YEAR, date_in_range, moment_in_range
from pawwake.text.numbers import whole_number
from pawwake.text.storable import storable_text

CREATE_FIELDS = ("content", "importance", "layer", "title", "event_date", "remind_at",
                 "external_id")
EDIT_FIELDS = ("content", "importance", "layer", "title")
BULK_FIELDS = ("importance", "layer", "title")
MAX_BATCH_IDS = 1000
MAX_CONTENT_CHARS = 20_000  # a memory is a fact or an event, not a document
MAX_TITLE_CHARS = 200

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_RFC3339 = re.compile(
    r"^(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


class FieldError(ApiError):
    """An ``ApiError`` about one field a client sent (400, or ``status``): written field first,
    as every parser here names the field it refuses; ``details`` go into the error body."""

    def __init__(self, field: str | None, message: str, code: str = "invalid_field",
                 status: int = 400, **details: Any) -> None:
        super().__init__(code, message, status=status, field=field, **details)


def require_object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise FieldError(None, "The body must be a JSON object.", "invalid_body")
    return body


def reject_unknown(body: dict[str, Any], allowed: tuple[str, ...]) -> None:
    for name in body:
        if name not in allowed:
            raise FieldError(name, f"Unknown field '{name}'; allowed: {', '.join(allowed)}.",
                             "unknown_field")


def parse_content(value: Any, field: str = "content") -> str:
    if isinstance(value, str):
        value = storable_text(value).strip()
    if not isinstance(value, str) or not value:
        raise FieldError(field, f"'{field}' must be a non-empty string.")
    if len(value) > MAX_CONTENT_CHARS:
        raise FieldError(field, f"'{field}' is limited to {MAX_CONTENT_CHARS} characters "
                                f"(got {len(value)}).", f"{field}_too_long")
    return value


def parse_int(value: Any, field: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise FieldError(field, f"'{field}' must be a whole number from {low} to {high}.")
    return value


def parse_importance(value: Any) -> int:
    return parse_int(value, "importance", 1, 10)


def parse_layer(value: Any) -> int:
    return parse_int(value, "layer", 1, 3)


def parse_title(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise FieldError("title", "'title' must be a string or null.")
    value = storable_text(value).strip()
    if len(value) > MAX_TITLE_CHARS:
        raise FieldError("title", f"'title' is limited to {MAX_TITLE_CHARS} characters "
                                  f"(got {len(value)}).", "title_too_long")
    return value or None


def parse_event_date(value: Any, field: str = "event_date") -> date | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _DATE.match(value):
        raise FieldError(field, f"'{field}' must be a date written YYYY-MM-DD.")
    try:
        day = date.fromisoformat(value)
    except ValueError:
        raise FieldError(field, f"'{field}' is not a real calendar date.") from None
    if not date_in_range(day):
        raise FieldError(field, f"'{field}' must lie between the years {MIN_YEAR} and "
                                f"{MAX_YEAR}.")
    return day


def parse_timestamp(value: Any, field: str) -> datetime | None:
    """An RFC 3339 time WITH an offset (``Z`` or ``+08:00``): a naive time is ambiguous."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise FieldError(field, f"'{field}' must be an RFC 3339 time string or null.")
    match = _RFC3339.match(value.strip())
    if not match:
        if re.match(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?$", value.strip()):
            raise FieldError(field, f"'{field}' needs a time zone offset, e.g. "
                                    "2025-01-31T09:00:00+08:00 or ...Z.")
        raise FieldError(field, f"'{field}' must be an RFC 3339 time such as "
                                "2025-01-31T09:00:00+08:00.")
    day, clock, fraction, offset = match.groups()
    fraction = (fraction or "")[:7]  # Python keeps microseconds
    offset = "+00:00" if offset in ("Z", "z") else offset
    try:
        moment = datetime.fromisoformat(f"{day}T{clock}{fraction}{offset}")
    except ValueError:
        raise FieldError(field, f"'{field}' is not a real point in time.") from None
    if not moment_in_range(moment):
        raise FieldError(field, f"'{field}' must lie between the years {MIN_YEAR} and "
                                f"{MAX_YEAR} (UTC).")
    return moment


def parse_external_id(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise FieldError("external_id", "'external_id' must be a non-empty string or null.")
    return value.strip()


def parse_create(body: Any) -> NewMemory:
    """A new memory's fields, with defaults (importance 5, layer 1)."""
    body = require_object(body)
    reject_unknown(body, CREATE_FIELDS)
    if "content" not in body:
        raise FieldError("content", "'content' is required.", "missing_field")
    return {
        "content": parse_content(body["content"]),
        "importance": parse_importance(body.get("importance", 5)),
        "layer": parse_layer(body.get("layer", 1)),
        "title": parse_title(body.get("title")),
        "event_date": parse_event_date(body.get("event_date")),
        "remind_at": parse_timestamp(body.get("remind_at"), "remind_at"),
        "external_id": parse_external_id(body.get("external_id")),
    }


_EDIT_PARSERS: dict[str, Callable[[Any], Any]] = {
    "content": parse_content, "importance": parse_importance, "layer": parse_layer,
    "title": parse_title}


def parse_edit(body: Any, allowed: tuple[str, ...] = EDIT_FIELDS) -> MemoryChanges:
    """The fields to change on existing rows; at least one."""
    body = require_object(body)
    reject_unknown(body, allowed)
    if not body:
        raise FieldError(None, f"Nothing to change; send one of: {', '.join(allowed)}.",
                         "missing_field")
    return cast(MemoryChanges,
                {name: _EDIT_PARSERS[name](value) for name, value in body.items()})


def parse_ids(value: Any, field: str = "ids") -> list[int]:
    """A non-empty list of row ids (duplicates dropped, order kept)."""
    if not isinstance(value, list) or not value:
        raise FieldError(field, f"'{field}' must be a non-empty list of memory ids.")
    if len(value) > MAX_BATCH_IDS:
        raise FieldError(field, f"'{field}' may hold at most {MAX_BATCH_IDS} ids per request.")
    for item in value:
        if isinstance(item, bool) or not isinstance(item, int) or item < 1:
            raise FieldError(field, f"'{field}' must contain positive whole numbers only.")
    return list(dict.fromkeys(value))


def parse_bool(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise FieldError(field, f"'{field}' must be true or false.")
    return value


def parse_query_bool(value: str | None, field: str, default: bool) -> bool:
    """A boolean in a query string: true/false/1/0/yes/no."""
    if value is None or value == "":
        return default
    lowered = value.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise FieldError(field, f"'{field}' must be true or false.")


def parse_query_int(value: str | None, field: str, default: int | None, low: int, high: int
                    ) -> int | None:
    if value is None or value == "":
        return default
    number = whole_number(value.strip())
    if number is None:
        raise FieldError(field, f"'{field}' must be a whole number.")
    if not low <= number <= high:
        raise FieldError(field, f"'{field}' must be from {low} to {high}.")
    return number
