"""/api/memories: create, list, edit, archive/restore/delete, batches, chains, housekeeping."""

from __future__ import annotations

import functools
from typing import Any

from aiohttp import web

from pawwake.app_faces import MEMORY_SEARCH, MEMORY_WRITES, database_of, face_of
from pawwake.db.errors import NotFound
from pawwake.db.memory_rows import MemoryChanges
from pawwake.memory import duplicates, store
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
)
from pawwake.memory.store import memory_json
from pawwake.routes import api_body
from pawwake.routes.api_body import MAX_BODY_BYTES, Parser, read_fields

MAX_ID = 2 ** 63 - 1
DEFAULT_PAGE = 50
MAX_PAGE = 500
DEFAULT_CLEANUP_DAYS = 30
TOO_LARGE = (f"The request body is larger than {MAX_BODY_BYTES // 1024} KB; a memory holds at "
             f"most {MAX_CONTENT_CHARS} characters.")


async def read_json(request: web.Request) -> Any:
    """A memory route's JSON body: 1 MB at most, the 413 saying why."""
    return await api_body.read_json(request, too_large=TOO_LARGE)


def memory_id(request: web.Request) -> int:
    number = int(request.match_info["id"])
    if not 1 <= number <= MAX_ID:
        raise NotFound(f"No memory with id {request.match_info['id']}.")
    return number


async def create(request: web.Request) -> web.Response:
    fields = parse_create(await read_json(request))
    row, inserted = await store.create_memory(face_of(request, MEMORY_WRITES), fields)
    return web.json_response({**memory_json(row), "inserted": inserted},
                             status=201 if inserted else 200)


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


async def get_one(request: web.Request) -> web.Response:
    return web.json_response(memory_json(await store.get_memory(database_of(request),
                                                                memory_id(request))))


async def edit(request: web.Request) -> web.Response:
    number = memory_id(request)
    changes = parse_edit(await read_json(request))
    row, changed = await store.edit_memory(face_of(request, MEMORY_WRITES), number, changes)
    return web.json_response({**memory_json(row), "changed": changed})


async def delete(request: web.Request) -> web.Response:
    """Archive by default; ``?soft=false`` deletes an archived memory for good."""
    number = memory_id(request)
    if parse_query_bool(request.query.get("soft"), "soft", True):
        row = await store.archive_memory(database_of(request), number)
        return web.json_response({"archived": True, "memory": memory_json(row)})
    await store.delete_memory(database_of(request), number)
    return web.json_response({"deleted": True, "id": number})


async def restore(request: web.Request) -> web.Response:
    return web.json_response(memory_json(await store.restore_memory(database_of(request),
                                                                    memory_id(request))))


async def promote(request: web.Request) -> web.Response:
    return web.json_response(memory_json(await store.promote_memory(database_of(request),
                                                                    memory_id(request))))


async def undo_supersede(request: web.Request) -> web.Response:
    result = await store.undo_supersede(database_of(request), memory_id(request))
    return web.json_response({"restored": memory_json(result["restored"]),
                              "archived": memory_json(result["archived"])})


async def versions(request: web.Request) -> web.Response:
    chain = await store.versions(database_of(request), memory_id(request))
    current = [row["id"] for row in chain if row["superseded_by"] is None and row["is_active"]]
    return web.json_response({"versions": [memory_json(row) for row in chain],
                              "current_id": current[-1] if current else None})


def parse_bulk_fields(value: Any) -> MemoryChanges:
    if not isinstance(value, dict):
        raise FieldError("fields", "'fields' must be an object of importance/layer/title.")
    if "content" in value:
        raise FieldError("content", "Content is edited one memory at a time.")
    return parse_edit(value, BULK_FIELDS)


BATCH_UPDATE: dict[str, Parser] = {"ids": parse_ids, "fields": parse_bulk_fields}
BATCH_DELETE: dict[str, Parser] = {"ids": parse_ids, "soft": functools.partial(parse_bool, field="soft")}
BATCH_RESTORE: dict[str, Parser] = {"ids": parse_ids}


async def batch_update(request: web.Request) -> web.Response:
    body = await read_fields(request, BATCH_UPDATE, too_large=TOO_LARGE)
    return web.json_response(await store.batch_update(database_of(request), body["ids"],
                                                      body["fields"]))


async def batch_delete(request: web.Request) -> web.Response:
    """Archive the listed memories, or with ``"soft": false`` delete archived ones for good."""
    soft = parse_query_bool(request.query.get("soft"), "soft", True)
    body = await read_fields(request, BATCH_DELETE, {"soft": soft}, too_large=TOO_LARGE)
    if body["soft"]:
        return web.json_response(await store.batch_archive(database_of(request), body["ids"]))
    return web.json_response(await store.batch_delete(database_of(request), body["ids"]))


async def batch_restore(request: web.Request) -> web.Response:
    body = await read_fields(request, BATCH_RESTORE, too_large=TOO_LARGE)
    return web.json_response(await store.batch_restore(database_of(request), body["ids"]))


async def layer_stats(request: web.Request) -> web.Response:
    return web.json_response(await store.layer_stats(database_of(request)))


def parse_threshold(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise FieldError("threshold", "'threshold' must be a number above 0 and at most 1.")
    return float(value)


DUPLICATE_CHECK: dict[str, Parser] = {"content": parse_content, "threshold": parse_threshold}


async def check_duplicate(request: web.Request) -> web.Response:
    check = await read_fields(request, DUPLICATE_CHECK,
                              {"threshold": duplicates.DEFAULT_THRESHOLD}, too_large=TOO_LARGE)
    return web.json_response(await duplicates.check_duplicate(face_of(request, MEMORY_SEARCH),
                                                              check["content"], check["threshold"]))


def parse_days(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 36500:
        raise FieldError("days", "'days' must be a number from 0 to 36500.")
    return value


async def cleanup_fragments(request: web.Request) -> web.Response:
    fields = await read_fields(request, {"days": parse_days}, {"days": DEFAULT_CLEANUP_DAYS},
                               too_large=TOO_LARGE, empty={})
    return web.json_response(await store.cleanup_fragments(database_of(request), fields["days"]))


def setup(app: web.Application) -> None:
    add = app.router
    add.add_post("/memories", create, name="api_memories_create")
    add.add_get("/memories", list_all, name="api_memories_list")
    add.add_get("/memories/layer-stats", layer_stats, name="api_memories_layer_stats")
    add.add_post("/memories/check-duplicate", check_duplicate,
                 name="api_memories_check_duplicate")
    add.add_post("/memories/cleanup-fragments", cleanup_fragments,
                 name="api_memories_cleanup")
    add.add_post("/memories/batch-update", batch_update, name="api_memories_batch_update")
    add.add_post("/memories/batch-delete", batch_delete, name="api_memories_batch_delete")
    add.add_post("/memories/batch-restore", batch_restore,
                 name="api_memories_batch_restore")
    add.add_get(r"/memories/{id:[0-9]{1,18}}", get_one, name="api_memory")
    add.add_put(r"/memories/{id:[0-9]{1,18}}", edit, name="api_memory_edit")
    add.add_delete(r"/memories/{id:[0-9]{1,18}}", delete, name="api_memory_delete")
    add.add_post(r"/memories/{id:[0-9]{1,18}}/restore", restore, name="api_memory_restore")
    add.add_post(r"/memories/{id:[0-9]{1,18}}/promote", promote, name="api_memory_promote")
    add.add_post(r"/memories/{id:[0-9]{1,18}}/undo-supersede", undo_supersede,
                 name="api_memory_undo_supersede")
    add.add_get(r"/memories/{id:[0-9]{1,18}}/versions", versions, name="api_memory_versions")
