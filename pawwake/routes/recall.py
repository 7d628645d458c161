"""Sidecar ingest (POST /api/conversations/turn) and raw recall (GET|POST
/api/chat/search-fragments)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from pawwake import keys
from pawwake.chat.ingest import TurnInvalid, ingest_turn, parse_turn
from pawwake.chat.recall import index as conversation_index
from pawwake.chat.recall.params import BadSearch, parse_search
from pawwake.chat.recall.search import search_fragments
from pawwake.errors import api_error
from pawwake.routes.body_limit import BodyTooLarge, read_bounded
from pawwake.text.json_input import JsonTooDeep, parse_json


def _no_database() -> web.Response:
    return api_error(503, "database_unavailable",
                     "Conversations need the database (DATABASE_ENABLED=false).")


# A sidecar turn is user text and final replies; parsing JSON holds the event loop, so a body
# is bounded before it is read (a 4 MB body is over a million characters of text).
MAX_TURN_BODY_BYTES = 4 * 1024 * 1024


async def _read_json(request: web.Request) -> Any:
    raw = await read_bounded(request, MAX_TURN_BODY_BYTES)
    try:
        return parse_json(raw)
    except JsonTooDeep as exc:
        raise TurnInvalid("json_too_deep", str(exc)) from None
    except (ValueError, UnicodeDecodeError):
        raise TurnInvalid("invalid_json", "The body is not valid JSON.") from None


async def post_turn(request: web.Request) -> web.Response:
    app = request.app
    if app[keys.DATABASE] is None:
        return _no_database()
    try:
        turn = parse_turn(await _read_json(request))
    except BodyTooLarge:
        return api_error(413, "turn_too_large", "A turn's body is limited to "
                         f"{MAX_TURN_BODY_BYTES // (1024 * 1024)} MB.")
    except TurnInvalid as exc:
        return api_error(400, exc.code, str(exc))
    result = await ingest_turn(app, turn)
    body = {"status": result.status, "turn_id": turn.turn_id, "session_id": turn.session_id,
            "source": turn.source}
    if result.status == "duplicate":
        return web.json_response(body, status=200)
    if result.status == "replaced":  # a continued turn: its stored reply is now the final one
        return web.json_response({**body, "messages_replaced": len(result.message_ids)})
    body.update(messages_stored=len(result.message_ids),
                extraction_scheduled=result.extraction_job is not None)
    return web.json_response(body, status=201)


async def search(request: web.Request) -> web.Response:
    app = request.app
    if app[keys.DATABASE] is None:
        return _no_database()
    settings = await app[keys.CONFIG].fresh()
    if not settings.CONVERSATION_RECALL_ENABLED:
        return api_error(409, "conversation_recall_disabled",
                         "Conversation recall is off (CONVERSATION_RECALL_ENABLED=false).")
    try:
        if request.method == "POST":
            body = await _read_json(request)
            if not isinstance(body, dict):
                raise BadSearch("invalid_body", "Send a JSON object.")
            options = parse_search(body, text=False)
        else:
            options = parse_search(dict(request.query), text=True)
    except BodyTooLarge:
        return api_error(413, "request_too_large", "A search body is limited to "
                         f"{MAX_TURN_BODY_BYTES // (1024 * 1024)} MB.")
    except (BadSearch, TurnInvalid) as exc:
        return api_error(400, exc.code, str(exc))
    query = options.pop("query")
    outcome = await search_fragments(app, query, settings=settings, **options)
    return web.json_response({
        "query": query,
        "mode": outcome.mode,
        "warning": outcome.warning,
        "keywords": outcome.keywords,
        "fragments": outcome.fragments,
        "fragment_ids": [f["fragment_id"] for f in outcome.fragments],
        "timezone_hours": settings.TIMEZONE_HOURS,  # for callers that show local times
    })


async def embedding_status(request: web.Request) -> web.Response:
    if request.app[keys.DATABASE] is None:
        return _no_database()
    return web.json_response(await conversation_index.index_status(request.app))


async def rebuild_search(request: web.Request) -> web.Response:
    """Index every message that lacks terms, then wake the vector job."""
    app = request.app
    if app[keys.DATABASE] is None:
        return _no_database()
    settings = await app[keys.CONFIG].fresh()
    if not settings.CONVERSATION_RECALL_ENABLED:
        return api_error(409, "conversation_recall_disabled",
                         "Conversation recall is off (CONVERSATION_RECALL_ENABLED=false).")
    indexed = await conversation_index.index_pending(app)
    await conversation_index.request_embedding(app)
    status = await conversation_index.index_status(app)
    return web.json_response({"indexed": indexed, **status}, status=202)


def setup(app: web.Application) -> None:
    app.router.add_post("/api/conversations/turn", post_turn, name="conversation_turn")
    app.router.add_get("/api/chat/search-fragments", search, name="search_fragments")
    app.router.add_post("/api/chat/search-fragments", search, name="search_fragments_post")
    app.router.add_get("/api/admin/conversation-embedding-status", embedding_status,
                       name="conversation_embedding_status")
    app.router.add_post("/api/admin/rebuild-conversation-search", rebuild_search,
                        name="rebuild_conversation_search")
