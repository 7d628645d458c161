"""Memory search (GET/POST /api/memories/search) and the vector backfill admin endpoints."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from pawwake.api_error import ApiError
from pawwake.app_faces import CONFIG, MEMORY_EMBEDDING, MEMORY_SEARCH, face_of, settings_of
from pawwake.llm.embeddings import EmbeddingError
from pawwake.memory.backfill import (
    RebuildNeedsConfirmation,
    VectorsDisabled,
    backfill_status,
    start_backfill,
)
from pawwake.memory.search import SearchOutcome, search_memories
from pawwake.memory.search_params import check_limit, check_query
from pawwake.routes.api_body import Parser, read_fields


def _confirm(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ApiError("invalid_confirm_rebuild", "confirm_rebuild must be true or false.")
    return value


SEARCH: dict[str, Parser] = {"q": check_query, "limit": lambda value: check_limit(value, from_text=False)}
BACKFILL: dict[str, Parser] = {"confirm_rebuild": _confirm}


def _result_json(outcome: SearchOutcome, query: str, timezone_hours: float | None = None
                 ) -> dict[str, Any]:
    return {
        "query": query,
        "timezone_hours": timezone_hours,
        "mode": outcome.mode,
        "warning": outcome.warning,
        "threshold": outcome.threshold,
        "floor": outcome.floor,  # a result is injected into chats when its relevance reaches it
        "fallback": outcome.fallback,
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
    outcome = await search_memories(face_of(request, MEMORY_SEARCH), query, limit=limit,
                                    settings=await settings_of(request))
    return web.json_response(_result_json(
        outcome, query, face_of(request, CONFIG).current().TIMEZONE_HOURS))


async def search_get(request: web.Request) -> web.Response:
    unknown = sorted(set(request.query) - {"q", "limit"})
    if unknown:
        raise ApiError("unknown_parameter", f"Unknown parameter: {unknown[0]}.")
    if len(request.query.getall("q", [])) > 1 or len(request.query.getall("limit", [])) > 1:
        raise ApiError("repeated_parameter", "Give q and limit at most once each.")
    query = check_query(request.query.get("q"))
    limit = check_limit(request.query.get("limit"), from_text=True)
    return await _search(request, query, limit)


async def search_post(request: web.Request) -> web.Response:
    """POST keeps private search text out of URLs and logs."""
    body = await read_fields(request, SEARCH)
    return await _search(request, body["q"], body["limit"])


async def backfill_start(request: web.Request) -> web.Response:
    body = await read_fields(request, BACKFILL, {"confirm_rebuild": False}, empty={})
    try:
        started = await start_backfill(face_of(request, MEMORY_EMBEDDING),
                                       confirm_rebuild=body["confirm_rebuild"],
                                       settings=await settings_of(request))
    except RebuildNeedsConfirmation as exc:
        raise ApiError("rebuild_needs_confirmation", str(exc), status=409) from exc
    except VectorsDisabled as exc:
        raise ApiError("vectors_disabled", str(exc), status=409) from exc
    except EmbeddingError as exc:
        raise ApiError("embedding_unavailable", f"Embedding provider failed: {exc}",
                       status=502) from exc
    return web.json_response({"status": "queued", **started}, status=202)


async def backfill_state(request: web.Request) -> web.Response:
    return web.json_response(await backfill_status(face_of(request, MEMORY_EMBEDDING),
                                                   settings=await settings_of(request)))


def setup(app: web.Application) -> None:
    """Register before ``/api/memories/{id}`` routes so "search" is not taken for an id."""
    app.router.add_get("/memories/search", search_get, name="api_memory_search")
    app.router.add_post("/memories/search", search_post, name="api_memory_search_post")
    app.router.add_post("/admin/backfill-memory-embeddings", backfill_start,
                        name="api_memory_backfill")
    app.router.add_get("/admin/backfill-memory-embeddings/status", backfill_state,
                       name="api_memory_backfill_status")
