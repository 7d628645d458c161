"""Memory search parameters as the HTTP API and the MCP tools take them: the text and the
limit, checked alike wherever they come from."""

from __future__ import annotations

from typing import Any

from pawwake.api_error import ApiError
from pawwake.memory.search import MAX_LIMIT
from pawwake.text.numbers import whole_number

MAX_QUERY_CHARS = 2000
DEFAULT_LIMIT = 10


def check_query(value: Any, name: str = "q") -> str:
    """The search text; ``name`` is what the caller calls it (q here, query over MCP)."""
    if value is None:
        raise ApiError("missing_query", f"Give the search text as {name}.")
    if not isinstance(value, str):
        raise ApiError("invalid_query", f"{name} must be a string.")
    if not value.strip():
        raise ApiError("missing_query", f"{name} must not be empty.")
    if len(value) > MAX_QUERY_CHARS:
        raise ApiError("query_too_long", f"{name} is limited to {MAX_QUERY_CHARS} characters.")
    return value.strip()


def check_limit(value: Any, *, from_text: bool) -> int:
    if value is None:
        return DEFAULT_LIMIT
    if from_text:
        value = whole_number(value.strip())
        if value is None:
            raise ApiError("invalid_limit", "limit must be a whole number.")
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiError("invalid_limit", "limit must be a whole number.")
    if not 1 <= value <= MAX_LIMIT:
        raise ApiError("invalid_limit", f"limit must be between 1 and {MAX_LIMIT}.")
    return value
