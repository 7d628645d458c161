"""Memory search (GET/POST /api/memories/search) and the vector backfill admin endpoints."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from pawwake.db.errors import DatabaseUnavailable
from pawwake.errors import api_error
from pawwake.llm.embeddings import EmbeddingError
from pawwake.memory.backfill import (
    RebuildNeedsConfirmation,
    VectorsDisabled,
    backfill_status,
    start_backfill,
)
from pawwake.memory.search import MAX_LIMIT, SearchOutcome, search_memories
from pawwake.services import services_of, settings_of
from pawwake.text.json_input import JsonTooDeep, parse_json

MAX_QUERY_CHARS = 2000
DEFAULT_LIMIT = 10


class BadInput(ValueError):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def check_query(value: Any, name: str = "q") -> str:
    """The search text; ``name`` is what the caller calls it (q here, query over MCP)."""
    if value is None:
        raise BadInput("missing_query", f"Give the search text as {name}.")
    if not isinstance(value, str):
        raise BadInput("invalid_query", f"{name} must be a string.")
    if not value.strip():
        raise BadInput("missing_query", f"{name} must not be empty.")
    if len(value) > MAX_QUERY_CHARS:
        raise BadInput("query_too_long", f"{name} is limited to {MAX_QUERY_CHARS} characters.")
    return value.strip()


def check_limit(value: Any, *, from_text: bool) -> int:
    if value is None:
        return DEFAULT_LIMIT
    if from_text:
        try:
            value = int(value.strip())
        except ValueError:
            raise BadInput("invalid_limit", "limit must be a whole number.") from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadInput("invalid_limit", "limit must be a whole number.")
    if not 1 <= value <= MAX_LIMIT:
        raise BadInput("invalid_limit", f"limit must be between 1 and {MAX_LIMIT}.")
    return value


async def _json_object(request: web.Request, allowed: set[str], *, optional: bool = False
                       ) -> dict[str, Any]:
    raw = await request.read()
    if not raw.strip() and optional:
        return {}
    try:
        body = parse_json(raw)
    except JsonTooDeep as exc:
        raise BadInput("json_too_deep", str(exc)) from None
    except (ValueError, UnicodeDecodeError):
        raise BadInput("invalid_json", "The body is not valid JSON.") from None
    if not isinstance(body, dict):
        raise BadInput("invalid_body", "Send a JSON object.")
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise BadInput("unknown_field", f"Unknown field: {unknown[0]}.")
    return body


def _result_json(outcome: SearchOutcome, query: str, timezone_hours: float | None = None
                 ) -> dict[str, Any]:
    return {
        "query": query,
        "timezone_hours": timezone_hours,
        "mode": outcome.mode,
        "warning": outcome.warning,
        "threshold": outcome.threshold,
        "keywords": outcome.keywords,
        "results": [{
            "id": r.id,
            "content": r.memory["content"],
            "title": r.memory["title"],
            "importance": r.memory["importance"],
            "layer": r.memory["layer"],
            "event_date": r.memory["event_date"].isoformat() if r.memory["event_date"] else None,
            "created_at": r.memory["created_at"].isoformat(),
            "score": round(r.score, 4),
            "score_parts": {name: round(value, 4) for name, value in r.parts.items()},
            "relevance": round(r.relevance, 4),
            "similarity": None if r.similarity is None else round(r.similarity, 4),
        } for r in outcome.results],
    }


async def _search(request: web.Request, query: str, limit: int) -> web.Response:
    try:
        outcome = await search_memories(services_of(request), query, limit=limit,
                                        settings=await settings_of(request))
    except DatabaseUnavailable as exc:
        return api_error(503, "database_unavailable", str(exc))
    return web.json_response(_result_json(
        outcome, query, services_of(request).config.current().TIMEZONE_HOURS))


async def search_get(request: web.Request) -> web.Response:
    try:
        unknown = sorted(set(request.query) - {"q", "limit"})
        if unknown:
            raise BadInput("unknown_parameter", f"Unknown parameter: {unknown[0]}.")
        if len(request.query.getall("q", [])) > 1 or len(request.query.getall("limit", [])) > 1:
            raise BadInput("repeated_parameter", "Give q and limit at most once each.")
        query = check_query(request.query.get("q"))
        limit = check_limit(request.query.get("limit"), from_text=True)
    except BadInput as exc:
        return api_error(400, exc.code, str(exc))
    return await _search(request, query, limit)


async def search_post(request: web.Request) -> web.Response:
    """POST keeps private search text out of URLs and logs."""
    try:
        body = await _json_object(request, {"q", "limit"})
        query = check_query(body.get("q"))
        limit = check_limit(body.get("limit"), from_text=False)
    except BadInput as exc:
        return api_error(400, exc.code, str(exc))
    return await _search(request, query, limit)


async def backfill_start(request: web.Request) -> web.Response:
    try:
        body = await _json_object(request, {"confirm_rebuild"}, optional=True)
        confirm = body.get("confirm_rebuild", False)
        if not isinstance(confirm, bool):
            raise BadInput("invalid_confirm_rebuild", "confirm_rebuild must be true or false.")
    except BadInput as exc:
        return api_error(400, exc.code, str(exc))
    try:
        started = await start_backfill(services_of(request), confirm_rebuild=confirm,
                                       settings=await settings_of(request))
    except RebuildNeedsConfirmation as exc:
        return api_error(409, "rebuild_needs_confirmation", str(exc))
    except VectorsDisabled as exc:
        return api_error(409, "vectors_disabled", str(exc))
    except EmbeddingError as exc:
        return api_error(502, "embedding_unavailable", f"Embedding provider failed: {exc}")
    except DatabaseUnavailable as exc:
        return api_error(503, "database_unavailable", str(exc))
    return web.json_response({"status": "queued", **started}, status=202)


async def backfill_state(request: web.Request) -> web.Response:
    try:
        return web.json_response(await backfill_status(services_of(request),
                                                       settings=await settings_of(request)))
    except DatabaseUnavailable as exc:
        return api_error(503, "database_unavailable", str(exc))


def setup(app: web.Application) -> None:
    """Register before ``/api/memories/{id}`` routes so "search" is not taken for an id."""
    app.router.add_get("/api/memories/search", search_get, name="api_memory_search")
    app.router.add_post("/api/memories/search", search_post, name="api_memory_search_post")
    app.router.add_post("/api/admin/backfill-memory-embeddings", backfill_start,
                        name="api_memory_backfill")
    app.router.add_get("/api/admin/backfill-memory-embeddings/status", backfill_state,
                       name="api_memory_backfill_status")
