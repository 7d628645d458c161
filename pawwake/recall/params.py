"""Recall search parameters as the HTTP API (GET query or POST body) and the MCP tools take
them: the text, how many sessions, how much context, the mode and what to leave out."""

from __future__ import annotations

from typing import Any

from pawwake.api_error import ApiError

MAX_QUERY_CHARS = 2000
MAX_EXCLUDES = 500
SEARCH_FIELDS = frozenset({"q", "max_sessions", "context", "mode", "exclude_session_ids",
                           "exclude_fragment_ids"})


def _int_in(value: Any, name: str, low: int, high: int, default: int, *, text: bool) -> int:
    if value is None:
        return default
    if text:
        try:
            value = int(str(value).strip())
        except ValueError:
            raise ApiError(f"invalid_{name}", f"{name} must be a whole number.") from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiError(f"invalid_{name}", f"{name} must be a whole number.")
    if not low <= value <= high:
        raise ApiError(f"invalid_{name}", f"{name} must be between {low} and {high}.")
    return value


def _id_list(value: Any, name: str, *, text: bool) -> list[str]:
    if value is None:
        return []
    if text and isinstance(value, str):  # GET: comma-separated
        value = [part for part in value.split(",") if part.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ApiError(f"invalid_{name}", f"{name} must be a list of non-empty strings.")
    if len(value) > MAX_EXCLUDES:
        raise ApiError(f"invalid_{name}", f"{name} holds at most {MAX_EXCLUDES} ids.")
    return [v.strip() for v in value]


def parse_search(params: dict[str, Any], *, text: bool, query_name: str = "q"
                 ) -> dict[str, Any]:
    """Validate search parameters (GET query or POST body) into keyword arguments; the search
    text is ``params["q"]``, named ``query_name`` in messages (MCP calls it query)."""
    unknown = sorted(set(params) - SEARCH_FIELDS)
    if unknown:
        raise ApiError("unknown_field", f"Unknown field: {unknown[0]}.")
    query = params.get("q")
    if not isinstance(query, str) or not query.strip():
        raise ApiError("missing_query", f"Give the search text as {query_name}.")
    if len(query) > MAX_QUERY_CHARS:
        raise ApiError("query_too_long",
                        f"{query_name} is limited to {MAX_QUERY_CHARS} characters.")
    mode = params.get("mode") or "hybrid"
    if mode not in ("hybrid", "keyword"):
        raise ApiError("invalid_mode", "mode must be hybrid or keyword.")
    return {
        "query": query.strip(),
        "max_sessions": _int_in(params.get("max_sessions"), "max_sessions", 1, 50, 3, text=text),
        "context": _int_in(params.get("context"), "context", 0, 5, 1, text=text),
        "mode": mode,
        "exclude_session_ids": _id_list(params.get("exclude_session_ids"),
                                        "exclude_session_ids", text=text),
        "exclude_fragment_ids": _id_list(params.get("exclude_fragment_ids"),
                                         "exclude_fragment_ids", text=text),
    }
