"""Sidecar ingest (POST /api/conversations/turn) and raw recall (GET|POST
/api/chat/search-fragments)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from pawwake.api_error import ApiError
from pawwake.app_faces import RECALL, TURN_STORE, face_of, settings_of
from pawwake.conversations.ingest import ingest_turn, parse_turn
from pawwake.memory.fields import require_object
from pawwake.recall import index as conversation_index
from pawwake.recall.params import parse_search
from pawwake.recall.search import search_fragments
from pawwake.routes.api_body import read_json
from pawwake.routes.database_required import database_required
from pawwake.settings import Settings

FEATURE = "Conversations"


# A sidecar turn is user text and final replies; parsing JSON holds the event loop, so a body
# is bounded before it is read (a 4 MB body is over a million characters of text).
MAX_TURN_BODY_BYTES = 4 * 1024 * 1024


async def _read_json(request: web.Request, too_large: str, too_large_code: str) -> Any:
    return await read_json(request, max_bytes=MAX_TURN_BODY_BYTES, too_large=too_large,
                           too_large_code=too_large_code)


@database_required(FEATURE)
async def post_turn(request: web.Request) -> web.Response:
    turn = parse_turn(await _read_json(
        request, f"A turn's body is limited to {MAX_TURN_BODY_BYTES // (1024 * 1024)} MB.",
        "turn_too_large"))
    result = await ingest_turn(face_of(request, TURN_STORE), turn, settings=await settings_of(request))
    body: dict[str, Any] = {"status": result.status, "turn_id": turn.turn_id, "session_id": turn.session_id,
            "source": turn.source}
    if result.status == "duplicate":
        return web.json_response(body, status=200)
    if result.status == "replaced":  # a continued turn: its stored reply is now the final one
        return web.json_response({**body, "messages_replaced": len(result.message_ids)})
    body.update(messages_stored=len(result.message_ids),
                extraction_scheduled=result.extraction_job is not None)
    return web.json_response(body, status=201)


def _check_recall_on(settings: Settings) -> None:
    if not settings.CONVERSATION_RECALL_ENABLED:
        raise ApiError("conversation_recall_disabled",
                       "Conversation recall is off (CONVERSATION_RECALL_ENABLED=false).",
                       status=409)


@database_required(FEATURE)
async def search(request: web.Request) -> web.Response:
    settings = await settings_of(request)
    _check_recall_on(settings)
    if request.method == "POST":
        body = require_object(await _read_json(
            request, f"A search body is limited to {MAX_TURN_BODY_BYTES // (1024 * 1024)} MB.",
            "request_too_large"))
        options = parse_search(body, text=False)
    else:
        options = parse_search(dict(request.query), text=True)
    query = options.pop("query")
    outcome = await search_fragments(face_of(request, RECALL), query, settings=settings, **options)
    return web.json_response({
        "query": query,
        "mode": outcome.mode,
        "warning": outcome.warning,
        "keywords": outcome.keywords,
        "fragments": outcome.fragments,
        "fragment_ids": [f["fragment_id"] for f in outcome.fragments],
        "timezone_hours": settings.TIMEZONE_HOURS,  # for callers that show local times
    })


@database_required(FEATURE)
async def embedding_status(request: web.Request) -> web.Response:
    status = await conversation_index.index_status(face_of(request, RECALL),
                                                   settings=await settings_of(request))
    return web.json_response(status)


@database_required(FEATURE)
async def rebuild_search(request: web.Request) -> web.Response:
    """Index every message that lacks terms, then wake the vector job."""
    _check_recall_on(await settings_of(request))
    indexed = await conversation_index.index_pending(face_of(request, RECALL))
    await conversation_index.request_embedding(face_of(request, RECALL))
    status = await conversation_index.index_status(face_of(request, RECALL),
                                                   settings=await settings_of(request))
    return web.json_response({"indexed": indexed, **status}, status=202)


def setup(app: web.Application) -> None:
    app.router.add_post("/conversations/turn", post_turn, name="conversation_turn")
    app.router.add_get("/chat/search-fragments", search, name="search_fragments")
    app.router.add_post("/chat/search-fragments", search, name="search_fragments_post")
    app.router.add_get("/admin/conversation-embedding-status", embedding_status,
                       name="conversation_embedding_status")
    app.router.add_post("/admin/rebuild-conversation-search", rebuild_search,
                        name="rebuild_conversation_search")
