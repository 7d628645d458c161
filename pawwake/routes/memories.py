"""/api/memories: create, list, edit, archive/restore/delete, batches, chains, housekeeping."""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from pawwake.db.errors import Conflict, DatabaseUnavailable, NotFound
from pawwake.memory import duplicates, store
from pawwake.memory.backup import BrokenLinks
from pawwake.memory.backup_format import BackupInvalid
from pawwake.memory.fields import (
    BULK_FIELDS,
    MAX_CONTENT_CHARS,
    FieldError,
    parse_bool,
    parse_content,
    parse_create,
    parse_edit,
    parse_ids,
    parse_query_bool,
    parse_query_int,
    reject_unknown,
    require_object,
)
from pawwake.memory.store import MemoryConflict, memory_json
from pawwake.routes.body_limit import BodyTooLarge, read_bounded
from pawwake.services import database_of, services_of
from pawwake.text.json_input import JsonTooDeep, parse_json

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
MAX_ID = 2 ** 63 - 1
DEFAULT_PAGE = 50
MAX_PAGE = 500
DEFAULT_CLEANUP_DAYS = 30
# Memory bodies carry at most a 20,000-character text (6 bytes a character when escaped) plus
# small fields: anything much bigger is refused before it is read (imports pass their own cap).
MAX_BODY_BYTES = 1024 * 1024


def error(status: int, code: str, message: str, **extra: Any) -> web.Response:
    """The /api error shape, optionally with more detail inside ``error``."""
    return web.json_response({"error": {"code": code, "message": message, **extra}},
                             status=status)


def memory_errors(handler: Handler) -> Handler:
    """Turn the memory layer's typed errors into real statuses and the /api error shape."""

    @functools.wraps(handler)
    async def wrapper(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except FieldError as exc:
            extra = {"field": exc.field} if exc.field else {}
            return error(exc.status, exc.code, exc.message, **extra)
        except BackupInvalid as exc:
            return error(400, "invalid_backup", "The backup was not imported: "
                         + "; ".join(exc.problems[:3]), problems=exc.problems)
        except NotFound as exc:
            return error(404, "not_found", str(exc))
        except BrokenLinks as exc:
            return error(409, exc.code, exc.message, broken=exc.broken)
        except MemoryConflict as exc:
            return error(409, exc.code, exc.message)
        except Conflict as exc:
            return error(409, "conflict", str(exc))
        except DatabaseUnavailable as exc:
            off = services_of(request).database is None
            return error(503, "database_disabled" if off else "database_unavailable", str(exc))

    return wrapper


async def read_json(request: web.Request, *, empty: Any = None,
                    max_bytes: int | None = MAX_BODY_BYTES) -> Any:
    """The JSON body; ``empty`` stands in for a missing body when given, else 400. A body over
    ``max_bytes`` is refused (413) from its Content-Length, before it is read or parsed."""
    if max_bytes is None:
        data = await request.read()
    else:
        try:
            data = await read_bounded(request, max_bytes)
        except BodyTooLarge:
            raise _too_large(max_bytes) from None
    try:
        raw = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise FieldError(None, "The body is not UTF-8 encoded JSON.", "invalid_json") from None
    if not raw.strip():
        if empty is not None:
            return empty
        raise FieldError(None, "The body is empty; send JSON.", "invalid_json")
    try:
        return parse_json(raw)
    except JsonTooDeep as exc:
        raise FieldError(None, str(exc), "json_too_deep") from None
    except ValueError:
        raise FieldError(None, "The body is not valid JSON.", "invalid_json") from None


def _too_large(max_bytes: int) -> FieldError:
    return FieldError(None, f"The request body is larger than {max_bytes // 1024} KB; a memory "
                      f"holds at most {MAX_CONTENT_CHARS} characters.", "request_too_large",
                      status=413)


def memory_id(request: web.Request) -> int:
    number = int(request.match_info["id"])
    if not 1 <= number <= MAX_ID:
        raise NotFound(f"No memory with id {request.match_info['id']}.")
    return number


@memory_errors
async def create(request: web.Request) -> web.Response:
    fields = parse_create(await read_json(request))
    row, inserted = await store.create_memory(services_of(request), fields)
    return web.json_response({**memory_json(row), "inserted": inserted},
                             status=201 if inserted else 200)


@memory_errors
async def list_all(request: web.Request) -> web.Response:
    query = request.query
    status = query.get("status") or "active"
    if status not in ("active", "archived"):
        raise FieldError("status", "'status' must be active or archived.")
    layer = parse_query_int(query.get("layer"), "layer", None, 1, 3)
    limit = parse_query_int(query.get("limit"), "limit", DEFAULT_PAGE, 1, MAX_PAGE)
    offset = parse_query_int(query.get("offset"), "offset", 0, 0, MAX_ID)
    assert limit is not None and offset is not None
    rows, total = await store.list_memories(database_of(request), active=status == "active",
                                            layer=layer,
                                            limit=limit, offset=offset)
    return web.json_response({"memories": [memory_json(r) for r in rows], "total": total,
                              "status": status, "layer": layer, "limit": limit,
                              "offset": offset})


@memory_errors
async def get_one(request: web.Request) -> web.Response:
    return web.json_response(memory_json(await store.get_memory(database_of(request),
                                                                memory_id(request))))


@memory_errors
async def edit(request: web.Request) -> web.Response:
    number = memory_id(request)
    changes = parse_edit(await read_json(request))
    row, changed = await store.edit_memory(services_of(request), number, changes)
    return web.json_response({**memory_json(row), "changed": changed})


@memory_errors
async def delete(request: web.Request) -> web.Response:
    """Archive by default; ``?soft=false`` deletes an archived memory for good."""
    number = memory_id(request)
    if parse_query_bool(request.query.get("soft"), "soft", True):
        row = await store.archive_memory(database_of(request), number)
        return web.json_response({"archived": True, "memory": memory_json(row)})
    await store.delete_memory(database_of(request), number)
    return web.json_response({"deleted": True, "id": number})


@memory_errors
async def restore(request: web.Request) -> web.Response:
    return web.json_response(memory_json(await store.restore_memory(database_of(request),
                                                                    memory_id(request))))


@memory_errors
async def promote(request: web.Request) -> web.Response:
    return web.json_response(memory_json(await store.promote_memory(database_of(request),
                                                                    memory_id(request))))


@memory_errors
async def undo_supersede(request: web.Request) -> web.Response:
    result = await store.undo_supersede(database_of(request), memory_id(request))
    return web.json_response({name: memory_json(row) for name, row in result.items()})


@memory_errors
async def versions(request: web.Request) -> web.Response:
    chain = await store.versions(database_of(request), memory_id(request))
    current = [row["id"] for row in chain if row["superseded_by"] is None and row["is_active"]]
    return web.json_response({"versions": [memory_json(row) for row in chain],
                              "current_id": current[-1] if current else None})


async def _batch_body(request: web.Request, allowed: tuple[str, ...]) -> dict[str, Any]:
    body = require_object(await read_json(request))
    reject_unknown(body, allowed)
    body["ids"] = parse_ids(body.get("ids"))
    return body


@memory_errors
async def batch_update(request: web.Request) -> web.Response:
    body = await _batch_body(request, ("ids", "fields"))
    if not isinstance(body.get("fields"), dict):
        raise FieldError("fields", "'fields' must be an object of importance/layer/title.")
    if "content" in body["fields"]:
        raise FieldError("content", "Content is edited one memory at a time.")
    fields = parse_edit(body.get("fields"), BULK_FIELDS)
    return web.json_response(await store.batch_update(database_of(request), body["ids"], fields))


@memory_errors
async def batch_delete(request: web.Request) -> web.Response:
    """Archive the listed memories, or with ``"soft": false`` delete archived ones for good."""
    body = await _batch_body(request, ("ids", "soft"))
    soft = parse_query_bool(request.query.get("soft"), "soft", True)
    if "soft" in body:
        soft = parse_bool(body["soft"], "soft")
    if soft:
        return web.json_response(await store.batch_archive(database_of(request), body["ids"]))
    return web.json_response(await store.batch_delete(database_of(request), body["ids"]))


@memory_errors
async def batch_restore(request: web.Request) -> web.Response:
    body = await _batch_body(request, ("ids",))
    return web.json_response(await store.batch_restore(database_of(request), body["ids"]))


@memory_errors
async def layer_stats(request: web.Request) -> web.Response:
    return web.json_response(await store.layer_stats(database_of(request)))


@memory_errors
async def check_duplicate(request: web.Request) -> web.Response:
    body = require_object(await read_json(request))
    reject_unknown(body, ("content", "threshold"))
    content = parse_content(body.get("content"))
    threshold = body.get("threshold", duplicates.DEFAULT_THRESHOLD)
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) \
            or not 0 < threshold <= 1:
        raise FieldError("threshold", "'threshold' must be a number above 0 and at most 1.")
    return web.json_response(await duplicates.check_duplicate(services_of(request), content,
                                                              float(threshold)))


@memory_errors
async def cleanup_fragments(request: web.Request) -> web.Response:
    body = require_object(await read_json(request, empty={}))
    reject_unknown(body, ("days",))
    days = body.get("days", DEFAULT_CLEANUP_DAYS)
    if isinstance(days, bool) or not isinstance(days, (int, float)) or not 0 <= days <= 36500:
        raise FieldError("days", "'days' must be a number from 0 to 36500.")
    return web.json_response(await store.cleanup_fragments(database_of(request), days))


def setup(app: web.Application) -> None:
    from pawwake.routes import imports

    add = app.router
    add.add_post("/api/memories", create, name="api_memories_create")
    add.add_get("/api/memories", list_all, name="api_memories_list")
    add.add_get("/api/memories/layer-stats", layer_stats, name="api_memories_layer_stats")
    add.add_post("/api/memories/check-duplicate", check_duplicate,
                 name="api_memories_check_duplicate")
    add.add_post("/api/memories/cleanup-fragments", cleanup_fragments,
                 name="api_memories_cleanup")
    add.add_post("/api/memories/batch-update", batch_update, name="api_memories_batch_update")
    add.add_post("/api/memories/batch-delete", batch_delete, name="api_memories_batch_delete")
    add.add_post("/api/memories/batch-restore", batch_restore,
                 name="api_memories_batch_restore")
    add.add_get(r"/api/memories/{id:\d+}", get_one, name="api_memory")
    add.add_put(r"/api/memories/{id:\d+}", edit, name="api_memory_edit")
    add.add_delete(r"/api/memories/{id:\d+}", delete, name="api_memory_delete")
    add.add_post(r"/api/memories/{id:\d+}/restore", restore, name="api_memory_restore")
    add.add_post(r"/api/memories/{id:\d+}/promote", promote, name="api_memory_promote")
    add.add_post(r"/api/memories/{id:\d+}/undo-supersede", undo_supersede,
                 name="api_memory_undo_supersede")
    add.add_get(r"/api/memories/{id:\d+}/versions", versions, name="api_memory_versions")
    imports.setup(app)
