"""Partition thread API (/api/partition/*): status, threads, switch, create, rename, delete
and the rolling summary."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from aiohttp import web

from pawwake import keys
from pawwake.chat import threads as service
from pawwake.chat.threads import Invalid, session_id_of
from pawwake.db.errors import Conflict, NotFound
from pawwake.errors import api_error
from pawwake.settings import SettingError

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _guarded(handler: Handler) -> Handler:
    """Map the service's typed errors to statuses; 503 without a database."""
    async def wrapper(request: web.Request) -> web.StreamResponse:
        if request.app[keys.DATABASE] is None:
            return api_error(503, "database_unavailable",
                             "Partition threads need the database (DATABASE_ENABLED=false).")
        try:
            return await handler(request)
        except Invalid as exc:
            return api_error(400, exc.code, str(exc))
        except SettingError as exc:
            return api_error(400, "invalid_thread_id", str(exc))
        except NotFound as exc:
            return api_error(404, "not_found", f"No such {exc}.")
        except Conflict as exc:
            return api_error(409, "conflict", str(exc).capitalize() + ".")
    wrapper.__name__ = handler.__name__
    return wrapper


def _json(body: Any, status: int = 200) -> web.Response:
    def default(value: Any) -> Any:
        if isinstance(value, datetime):
            return value.isoformat()
        raise TypeError(f"cannot encode {type(value).__name__}")
    return web.json_response(body, status=status,
                             dumps=lambda v: json.dumps(v, default=default, ensure_ascii=False))


async def _object(request: web.Request, allowed: set[str]) -> dict[str, Any]:
    try:
        body = json.loads(await request.read())
    except (ValueError, UnicodeDecodeError):
        raise Invalid("invalid_json", "The body is not valid JSON.") from None
    if not isinstance(body, dict):
        raise Invalid("invalid_body", "Send a JSON object.")
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise Invalid("unknown_field", f"Unknown field: {unknown[0]}.")
    return body


def _query_thread(request: web.Request) -> str:
    return session_id_of(request.query.get("thread_id"), "thread_id")


@_guarded
async def status(request: web.Request) -> web.StreamResponse:
    return _json(await service.status(request.app))


@_guarded
async def list_threads(request: web.Request) -> web.StreamResponse:
    return _json({"threads": await service.list_threads(request.app)})


@_guarded
async def switch(request: web.Request) -> web.StreamResponse:
    body = await _object(request, {"thread_id"})
    thread_id = await service.switch(request.app, session_id_of(body.get("thread_id"),
                                                                "thread_id"))
    return _json({"active_thread": thread_id})


@_guarded
async def create(request: web.Request) -> web.StreamResponse:
    body = await _object(request, {"thread_id", "inherit_summary_from"})
    thread_id = session_id_of(body.get("thread_id"), "thread_id")
    source = body.get("inherit_summary_from")
    if source is not None:
        source = session_id_of(source, "inherit_summary_from")
    return _json(await service.create(request.app, thread_id, source), status=201)


@_guarded
async def rename(request: web.Request) -> web.StreamResponse:
    body = await _object(request, {"old_id", "new_id"})
    old_id = session_id_of(body.get("old_id"), "old_id")
    new_id = session_id_of(body.get("new_id"), "new_id")
    return _json(await service.rename(request.app, old_id, new_id))


@_guarded
async def delete(request: web.Request) -> web.StreamResponse:
    return _json(await service.delete(request.app, request.match_info["thread_id"]))


@_guarded
async def get_summary(request: web.Request) -> web.StreamResponse:
    return _json(await service.get_summary(request.app, _query_thread(request)))


@_guarded
async def put_summary(request: web.Request) -> web.StreamResponse:
    body = await _object(request, {"thread_id", "summary"})
    thread_id = session_id_of(body.get("thread_id"), "thread_id")
    summary = service.summary_text(body.get("summary"))
    return _json(await service.put_summary(request.app, thread_id, summary))


@_guarded
async def clear_summary(request: web.Request) -> web.StreamResponse:
    return _json(await service.clear_summary(request.app, _query_thread(request)))


def setup(app: web.Application) -> None:
    add = app.router
    add.add_get("/api/partition/status", status, name="partition_status")
    add.add_get("/api/partition/threads", list_threads, name="partition_threads")
    add.add_post("/api/partition/switch", switch, name="partition_switch")
    add.add_post("/api/partition/thread", create, name="partition_thread_create")
    add.add_put("/api/partition/thread/rename", rename, name="partition_thread_rename")
    add.add_delete("/api/partition/thread/{thread_id}", delete, name="partition_thread")
    add.add_get("/api/partition/summary", get_summary, name="partition_summary")
    add.add_put("/api/partition/summary", put_summary, name="partition_summary_put")
    add.add_delete("/api/partition/summary", clear_summary, name="partition_summary_delete")
